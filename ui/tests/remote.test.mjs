// Settings → Approve from Feishu (issue 18): off by default; turned on "when away" for a number
// of minutes with its own Save, in both languages; the status line says the connection is up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`approving from Feishu is off by default and is turned on with its own Save (${lang})`, async () => {
    const page = await open({ opts: { signedIn: true }, locale });
    await page.getByTestId('nav-settings').click();
    const section = page.getByTestId('feishu-approval');
    await section.waitFor();
    const enabled = page.getByTestId('remote-enabled');
    assert.equal(await enabled.isChecked(), false, 'off by default');
    assert.equal(await page.getByTestId('remote-status').getAttribute('data-state'), 'off');
    assert.equal(await page.getByTestId('remote-minutes').isDisabled(), true, 'nothing to set while off');
    await enabled.check();
    await page.getByTestId('remote-away').check();
    await page.getByTestId('remote-minutes').fill('0');
    assert.equal(await page.getByTestId('save-remote').isDisabled(), true, 'zero minutes cannot be saved');
    await page.getByTestId('remote-minutes').fill('15');
    await page.getByTestId('save-remote').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('save_settings').length > 0);
    const saved = await page.evaluate(() => window.__fake.commandsCalled('save_settings').at(-1).args.settings);
    assert.deepEqual(saved.remote_approval, { enabled: true, when: 'away', away_minutes: 15 });
    assert.equal(saved.feishu.app_id, 'cli_demo', 'the other sections are saved as they were');
    const status = page.getByTestId('remote-status');
    await page.waitForFunction(() => document.querySelector('[data-testid="remote-status"]')?.getAttribute('data-state') === 'connected');
    assert.match(await status.innerText(), lang === 'zh' ? /状态：已连接/ : /Status: connected/);
    assert.match(await section.innerText(), lang === 'zh' ? /im:message:send_as_bot/ : /card\.action\.trigger/);
    await section.scrollIntoViewIfNeeded();
    await shot(page, `feishu-approval-setting-${lang}`);
    await section.screenshot({ path: new URL(`./artifacts/feishu-approval-section-${lang}.png`, import.meta.url).pathname });
    assert.deepEqual(page.errors, []);
  });
}

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`a write approved in Feishu that then needs a permission says it was approved (${lang})`, async () => {
    const page = await open({ opts: { signedIn: true }, locale });
    // As the engine leaves it: approved on the phone, then short of the create permission.
    const id = await page.evaluate(() =>
      window.__fake.propose({
        tool: 'create_calendar_event',
        status: 'awaiting_auth',
        pending: true,
        verdict: 'approved',
        decided_by: 'user:feishu',
        scopes: [{ scope: 'calendar:calendar', label: { zh: '创建和修改日程', en: 'Create and change events' } }],
      }),
    );
    const card = page.locator(`[data-testid="auth-card"][data-call-id="${id}"]`);
    await card.waitFor();
    assert.equal(
      await card.getByTestId('decision-line').innerText(),
      lang === 'zh' ? '已在飞书中批准' : 'Approved in Feishu',
    );
    await card.scrollIntoViewIfNeeded();
    await card.screenshot({ path: new URL(`./artifacts/auth-after-feishu-approval-${lang}.png`, import.meta.url).pathname });

    // A call not yet decided (a read that needs a permission) claims no approval.
    const read = await page.evaluate(() =>
      window.__fake.propose({ call_id: 'read1', tool: 'list_tasks', status: 'awaiting_auth', requires_approval: false }),
    );
    const readCard = page.locator(`[data-testid="auth-card"][data-call-id="${read}"]`);
    await readCard.waitFor();
    assert.equal(await readCard.getByTestId('decision-line').count(), 0);
    assert.deepEqual(page.errors, []);
  });
}

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`the app's card and the inbox row say quietly when the call's card also waits in Feishu (${lang})`, async () => {
    const line = lang === 'zh' ? '已同时发到飞书，可在手机上批准' : 'Also sent to Feishu — you can approve it on your phone';
    const short = lang === 'zh' ? '已同时发到飞书' : 'Also in Feishu';
    // p0's card was already in Feishu when the window opened: the status command says so.
    const page = await open({ opts: { signedIn: true, pending: 2, inFeishu: ['p0'] }, locale });
    const id = await page.evaluate(() =>
      window.__fake.propose({
        tool: 'create_calendar_event',
        preview: {
          summary: { zh: '在你的日历中创建日程「产品评审会」并发送邀请', en: 'Create the event “产品评审会” in your calendar and send invitations' },
          risk: 'normal',
          fields: [{ label: { zh: '参与人', en: 'Attendees' }, value: '张伟、李娜' }],
          changes: [],
        },
      }),
    );
    const card = page.locator(`[data-testid="approval-card"][data-call-id="${id}"]`);
    await card.waitFor();
    assert.equal(await card.getByTestId('in-feishu').count(), 0, 'not sent yet: nothing said');

    // The core sent its card: the line appears, from the event alone.
    await page.evaluate((c) => window.__fake.sendToFeishu(c), id);
    await card.getByTestId('in-feishu').waitFor();
    assert.equal(await card.getByTestId('in-feishu').innerText(), line);
    await card.scrollIntoViewIfNeeded();
    await card.screenshot({ path: new URL(`./artifacts/approval-card-in-feishu-${lang}.png`, import.meta.url).pathname });

    // The card in Feishu lost its buttons (approving from Feishu turned off): the line goes, the call still waits.
    await page.evaluate(() => window.__fake.emit({ type: 'remote_cards', call_ids: ['p0'] }));
    await card.getByTestId('in-feishu').waitFor({ state: 'detached' });
    assert.equal(await card.count(), 1);

    // Sent again, then decided here: the line goes with the decision.
    await page.evaluate((c) => window.__fake.sendToFeishu(c), id);
    await card.getByTestId('in-feishu').waitFor();
    await card.getByTestId('approve').click();
    await page.waitForFunction((c) => !document.querySelector(`[data-call-id="${c}"] [data-testid="in-feishu"]`), id);

    // The inbox: p0's row says it (short, the whole sentence on hover), p1's says nothing.
    await page.getByTestId('nav-inbox').click();
    const row = (c) => page.locator(`[data-testid="inbox-row"][data-call-id="${c}"]`);
    await row('p0').waitFor();
    assert.equal(await row('p0').getByTestId('in-feishu').innerText(), short);
    assert.equal(await row('p0').getByTestId('in-feishu').getAttribute('title'), line);
    assert.equal(await row('p1').getByTestId('in-feishu').count(), 0);
    await shot(page, `inbox-in-feishu-${lang}`);
    // Decided elsewhere: the row goes, and with it the line.
    await page.evaluate(() => window.__fake.resolve('p0'));
    await row('p0').waitFor({ state: 'detached' });
    assert.equal(await page.getByTestId('in-feishu').count(), 0);
    assert.deepEqual(page.errors, []);
  });
}

// Issue 13 in the browser against the fake backend: expiry on screen, waiting approvals and a new
// message, whose conversations these are, notices in the user's language, the drawer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

test('an approval collapses into an expired line the second it expires, and leaves the inbox', async () => {
  const page = await open({ opts: { sessions: 2 } });
  await page.evaluate(() => window.__fake.propose({ call_id: 'soon', expires_at: Date.now() + 2500 }));
  const card = page.locator('[data-testid="approval-card"][data-call-id="soon"]');
  await card.waitFor();
  assert.match(await card.getByTestId('countdown').innerText(), /秒后过期/);
  assert.equal(await page.getByTestId('inbox-count').innerText(), '1');
  await shot(page, '40-expiring-zh');
  // No sweep, no event from the backend: the screen alone knows the time is up.
  await page.waitForFunction(() => !document.querySelector('[data-testid="approval-card"][data-call-id="soon"]'), null, { timeout: 5000 });
  const row = page.locator('[data-testid="item-tool"][data-call-id="soon"]');
  assert.equal(await row.getAttribute('data-status'), 'done');
  assert.equal(await row.getByTestId('decision-line').innerText(), '已过期');
  assert.equal(await page.getByTestId('approve').count(), 0, 'no live Approve button for an expired approval');
  assert.match((await page.getByTestId('inbox-count').innerText()).trim(), /^0?$/);
  await shot(page, '41-expired-line-zh');
  assert.deepEqual(page.errors, []);
});

test('a one-minute expiry reads one minute from the first render, in both languages', async () => {
  for (const [locale, re] of [
    ['zh-CN', /^1 分钟后过期$/],
    ['en-US', /^expires in 1m$/],
  ]) {
    const page = await open({ locale });
    await page.evaluate(() => window.__fake.propose({ call_id: 'min', expires_at: Date.now() + 60_000 }));
    const countdown = page.locator('[data-call-id="min"] [data-testid="countdown"]');
    await countdown.waitFor();
    assert.match((await countdown.innerText()).trim(), re);
  }
});

test('sending while an approval waits asks keep or cancel; keep is the default and sends without cancelling', async () => {
  const page = await open({ locale: 'en-US' });
  await page.evaluate(() => window.__fake.propose({ call_id: 'w1' }));
  await page.locator('[data-testid="approval-card"][data-call-id="w1"]').waitFor();
  await page.getByTestId('composer').fill('and also the agenda');
  await page.getByTestId('composer').press('Enter');
  const choice = page.getByTestId('waiting-choice');
  await choice.waitFor();
  assert.match(await choice.innerText(), /1 approval is waiting in this conversation/);
  assert.equal(await page.evaluate(() => window.__fake.commandsCalled('send_message').length), 0, 'nothing is sent before the user chooses');
  await shot(page, '42-waiting-choice-en');
  // Enter on the focused default keeps the approval.
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => window.__fake.commandsCalled('send_message').length === 1);
  const sent = await page.evaluate(() => window.__fake.commandsCalled('send_message')[0].args);
  assert.equal(sent.cancelWaiting, false);
  assert.equal(await page.locator('[data-testid="approval-card"][data-call-id="w1"]').count(), 1, 'the card still waits');
});

test('cancelling the waiting approval when sending records why, in the user language', async () => {
  const page = await open();
  await page.evaluate(() => window.__fake.propose({ call_id: 'w2' }));
  await page.locator('[data-testid="approval-card"][data-call-id="w2"]').waitFor();
  await page.getByTestId('composer').fill('算了，先看看明天的日程');
  await page.getByTestId('send').click();
  await page.getByTestId('waiting-choice').waitFor();
  assert.match(await page.getByTestId('waiting-choice').innerText(), /此对话中有 1 项审批在等待/);
  await shot(page, '43-waiting-choice-zh');
  await page.getByTestId('waiting-cancel').click();
  await page.waitForFunction(() => window.__fake.commandsCalled('send_message').length === 1);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('send_message')[0].args)).cancelWaiting, true);
  const line = page.locator('[data-testid="item-tool"][data-call-id="w2"] [data-testid="decision-line"]');
  await line.waitFor();
  assert.equal(await line.innerText(), '你发送新消息时选择了取消等待中的审批');
  assert.equal(await line.getAttribute('title'), 'cancelled by the user when they sent a new message');
  await shot(page, '44-cancelled-for-new-message-zh');
});

test('a signed-out person keeps their name in the status bar, marked signed out, not as signed in', async () => {
  for (const [locale, re] of [
    ['zh-CN', /林晓 · 已退出登录/],
    ['en-US', /林晓 · signed out/],
  ]) {
    const page = await open({ locale, opts: { person: { name: '林晓', open_id: 'ou_lx' }, sessions: 4 } });
    const account = page.getByTestId('account');
    assert.match(await account.innerText(), re);
    assert.equal(await account.getAttribute('data-signed-in'), 'false');
    assert.equal(await page.getByTestId('status-sign-in').count(), 1);
    await shot(page, `45-person-signed-out-${locale.slice(0, 2)}`);
  }
});

test('an auth card does not say "not signed in" while the status bar shows the account', async () => {
  const page = await open({ locale: 'en-US', opts: { signedIn: true } });
  await page.getByTestId('composer').fill('show my tasks');
  await page.getByTestId('send').click();
  const status = page.getByTestId('auth-status');
  await status.waitFor();
  assert.match(await page.getByTestId('account').innerText(), /张三/);
  assert.doesNotMatch(await status.innerText(), /Not signed in/);
  assert.match(await status.innerText(), /Signed in as 张三; this needs a permission/);
  await shot(page, '46-auth-card-signed-in-en');
});

test('engine notices show in the user language with the raw text as a tooltip; a stopped answer stays, marked', async () => {
  const page = await open();
  await page.evaluate(() => {
    const f = window.__fake;
    f.emit({
      type: 'items',
      session_id: 's1',
      invocation_id: 'invX',
      items: [
        { kind: 'user', id: 'u9', at: Date.now(), text: '写一份周报' },
        { kind: 'assistant', id: 'a9', at: Date.now(), author: 'assistant', text: '本周完成了三件事：', stopped: true },
        {
          kind: 'notice',
          id: 'n9',
          at: Date.now(),
          level: 'info',
          text: 'cancelled by the user',
          message: { zh: '你取消了这一轮', en: 'You cancelled this turn' },
        },
      ],
    });
  });
  const notice = page.getByTestId('item-notice').last();
  await notice.waitFor();
  assert.equal((await notice.innerText()).trim(), '你取消了这一轮');
  assert.equal(await notice.locator('span[title]').getAttribute('title'), 'cancelled by the user');
  const stopped = page.getByTestId('stopped-tag');
  assert.equal(await stopped.innerText(), '已停止');
  assert.match(await page.getByTestId('item-assistant').last().innerText(), /本周完成了三件事/);
  await shot(page, '47-notice-and-stopped-zh');
});

test('the inbox drawer closes when the approval it shows is decided elsewhere', async () => {
  const page = await open({ opts: { pending: 3, sessions: 3 }, locale: 'en-US' });
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().click();
  await page.getByTestId('drawer').getByTestId('approval-card').waitFor();
  const shown = await page.getByTestId('drawer').getByTestId('approval-card').getAttribute('data-call-id');
  await page.evaluate((id) => window.__fake.resolve(id), shown);
  await page.waitForFunction(() => !document.querySelector('[data-testid="drawer"]'));
  assert.equal(await page.getByTestId('inbox-row').count(), 2);
});

test('single-key approve in the inbox asks first for a high-risk write, not for an ordinary one', async () => {
  const page = await open({ opts: { pending: 5, sessions: 3 } });
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().waitFor();
  await page.locator('body').click({ position: { x: 700, y: 10 } });
  // p3 is the high-risk one.
  for (let i = 0; i < 3; i++) await page.keyboard.press('j');
  assert.equal(await page.locator('[data-testid="inbox-row"][data-cursor="true"]').getAttribute('data-call-id'), 'p3');
  await page.keyboard.press('a');
  await page.getByTestId('high-risk-confirm').waitFor();
  assert.equal(await page.evaluate(() => window.__fake.commandsCalled('decide').length), 0, 'one key approved a high-risk write');
  await shot(page, '48-high-risk-confirm-zh');
  await page.keyboard.press('a');
  await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 1);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('decide')[0].args)).callId, 'p3');
  // An ordinary write: one key, no question.
  await page.keyboard.press('k');
  const id = await page.locator('[data-testid="inbox-row"][data-cursor="true"]').getAttribute('data-call-id');
  await page.keyboard.press('a');
  await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 2);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('decide')[1].args)).callId, id);
  assert.equal(await page.getByTestId('high-risk-confirm').count(), 0);
});

test('a read result shows as a readable list, not raw JSON', async () => {
  const page = await open({ locale: 'en-US' });
  await page.evaluate(() => {
    window.__fake.emit({
      type: 'items',
      session_id: 's1',
      invocation_id: 'invR',
      items: [
        {
          kind: 'tool',
          call_id: 'r1',
          at: Date.now(),
          tool: 'list_calendar_events',
          title: { zh: '查看日程', en: 'Read your calendar' },
          args: {},
          result: { is_error: false, text: '{"events":[…]}', lines: ['12-02 10:00–11:00  周会', '12-02 15:00–16:00  产品评审'] },
        },
      ],
    });
  });
  const list = page.getByTestId('result-lines');
  await list.waitFor();
  assert.deepEqual(await list.locator('li').allTextContents(), ['12-02 10:00–11:00  周会', '12-02 15:00–16:00  产品评审']);
  await shot(page, '49-readable-read-result-en');
});

test('at the 900×600 minimum the demo banner is one line, and the inbox keeps readable titles beside the drawer', async () => {
  for (const locale of ['zh-CN', 'en-US']) {
    const page = await open({ locale, width: 900, height: 600, opts: { pending: 6, sessions: 3 } });
    const banner = page.getByTestId('demo-banner');
    const box = await banner.boundingBox();
    assert.ok(box.height <= 44, `the banner is ${box.height}px high`);
    // The examples moved into a menu, and still work from there.
    assert.equal(await page.getByTestId('demo-example').first().isVisible(), false);
    await page.getByTestId('demo-more').click();
    assert.equal(await page.getByTestId('demo-more-example').count(), 3);
    await shot(page, `50-900x600-demo-menu-${locale.slice(0, 2)}`);
    await page.keyboard.press('Escape');
    await page.getByTestId('nav-inbox').click();
    await page.getByTestId('inbox-row').first().click();
    await page.getByTestId('drawer').getByTestId('approval-card').waitFor();
    const list = await page.getByTestId('inbox-list').boundingBox();
    const drawer = await page.getByTestId('drawer').boundingBox();
    assert.ok(list.x + list.width <= drawer.x + 1, 'the drawer covers the list');
    await shot(page, `51-900x600-inbox-drawer-${locale.slice(0, 2)}`);
    // Readable: every title shows whole, on at most two lines, beside the drawer.
    const sums = await page.locator('[data-testid="inbox-row"] .sum').evaluateAll((els) =>
      els.map((el) => ({
        width: el.getBoundingClientRect().width,
        clipped: el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1,
        lines: Math.round(el.getBoundingClientRect().height / parseFloat(getComputedStyle(el).lineHeight)),
      })),
    );
    assert.ok(sums.length >= 3);
    for (const s of sums) {
      assert.ok(s.width >= 120, `an inbox title has only ${s.width}px`);
      assert.equal(s.clipped, false, 'an inbox title is cut off');
      assert.ok(s.lines <= 2, `an inbox title takes ${s.lines} lines`);
    }
  }
});

test('a conversation autonomy mode shows as a coloured banner with its time left and ends in one click', async () => {
  for (const [locale, touched, readOnly] of [
    ['zh-CN', /写入本对话已涉及的对象时不再询问 · 还剩 30 分钟/, /只读/],
    ['en-US', /run without asking · 30m left/, /Read-only/],
  ]) {
    const page = await open({ locale });
    await page.getByTestId('composer').waitFor();
    assert.equal(await page.getByTestId('autonomy-banner').count(), 0, 'no banner while asking for every write');
    await page.getByTestId('autonomy-mode').selectOption('allow_touched');
    const banner = page.getByTestId('autonomy-banner');
    await banner.waitFor();
    assert.match(await banner.innerText(), touched);
    assert.equal(await banner.getAttribute('data-mode'), 'allow_touched');
    await shot(page, `52-autonomy-touched-${locale.slice(0, 2)}`);
    await page.getByTestId('autonomy-mode').selectOption('read_only');
    await page.waitForFunction(() => document.querySelector('[data-testid="autonomy-banner"]')?.dataset.mode === 'read_only');
    assert.match(await banner.innerText(), readOnly);
    await shot(page, `53-autonomy-read-only-${locale.slice(0, 2)}`);
    await page.getByTestId('autonomy-end').click();
    await page.waitForFunction(() => !document.querySelector('[data-testid="autonomy-banner"]'));
    const modes = await page.evaluate(() => window.__fake.commandsCalled('set_autonomy').map((c) => c.args.mode));
    assert.deepEqual(modes, ['allow_touched', 'read_only', 'ask']);
  }
});

test('editing in the form re-checks the arguments and recomputes the preview before Approve; schema errors block it, in Chinese', async () => {
  const page = await open();
  await page.getByTestId('composer').fill('tell the team');
  await page.getByTestId('composer').press('Enter');
  const card = page.getByTestId('approval-card');
  await card.waitFor();
  await card.getByTestId('edit').click();
  const field = card.getByTestId('edit-field-text');
  await field.waitFor();
  await field.fill('会议改到 4 点');
  // Until the engine has checked the edit, Approve waits.
  await card.getByTestId('edit-preview-updated').waitFor();
  assert.match(await card.innerText(), /会议改到 4 点/);
  assert.equal(await card.getByTestId('approve').isDisabled(), false);
  await shot(page, '54-edit-form-rechecked-zh');
  // The raw JSON view: a schema problem is refused in the editor, in the user's language.
  await card.getByTestId('edit-tab-json').click();
  await card.getByTestId('edit-args').fill('{ "text": "没有群" }');
  await card.getByTestId('edit-error').waitFor();
  assert.match(await card.getByTestId('edit-error').innerText(), /修改后的参数不符合这个操作的要求/);
  assert.equal(await card.getByTestId('approve').isDisabled(), true);
  await card.getByTestId('edit-args').fill('{ "chat_id": ');
  assert.match(await card.getByTestId('edit-error').innerText(), /JSON 格式不正确/);
  await shot(page, '55-edit-json-error-zh');
  await card.getByTestId('edit-args').fill('{ "chat_id": "oc_product", "text": "会议改到 4 点" }');
  await card.getByTestId('edit-preview-updated').waitFor();
  await card.getByTestId('approve').click();
  await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 1);
  const d = (await page.evaluate(() => window.__fake.commandsCalled('decide')))[0].args.decision;
  assert.deepEqual(d, { kind: 'approve_edited', args: { chat_id: 'oc_product', text: '会议改到 4 点' } });
});

test('a decision the core refuses is told in the user language, not in the core English', async () => {
  const page = await open({ opts: { sessions: 1 } });
  await page.evaluate(() => window.__fake.propose({ call_id: 'gone' }));
  const card = page.locator('[data-testid="approval-card"][data-call-id="gone"]');
  await card.waitFor();
  // Decided on another surface, and this window has not heard yet.
  await page.evaluate(() => (window.__fake.calls.gone.pending = false));
  await card.getByTestId('approve').click();
  const toast = page.locator('.toast').filter({ hasText: '这项操作已不再等待你的决定' });
  await toast.waitFor();
  assert.doesNotMatch(await page.locator('.toasts').innerText(), /no longer waits/);
  await shot(page, '48-refused-decision-zh');
  assert.deepEqual(page.errors, []);
});

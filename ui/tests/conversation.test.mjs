import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

test('demo banner, empty state and status bar show', async () => {
  const page = await open();
  await page.getByTestId('demo-banner').waitFor();
  assert.match(await page.getByTestId('demo-banner').innerText(), /演示模式/);
  assert.match(await page.getByTestId('demo-banner').innerText(), /明天我有什么安排？/);
  assert.equal(await page.getByTestId('empty-state').count(), 1);
  assert.match(await page.getByTestId('account').innerText(), /未登录/);
  assert.match(await page.getByTestId('model').innerText(), /Demo/);
  await shot(page, '01-empty-zh');
  assert.deepEqual(page.errors, []);
});

test('send → approval card with summary → approve → collapses and the reply shows', async () => {
  const page = await open();
  await page.getByTestId('composer').fill('帮我通知大家明天开评审会');
  await page.getByTestId('composer').press('Enter');
  const card = page.getByTestId('approval-card');
  await card.waitFor();
  assert.match(await card.innerText(), /以你的身份向「产品周会」发送消息/);
  assert.match(await card.innerText(), /后过期/);
  assert.equal(await page.getByTestId('item-user').count(), 1);
  assert.equal(await page.getByTestId('composer').inputValue(), '');
  await shot(page, '02-approval-card-zh');
  await card.getByTestId('approve').click();
  await page.getByTestId('decision-line').waitFor();
  assert.equal(await page.getByTestId('approval-card').count(), 0);
  assert.match(await page.getByTestId('decision-line').innerText(), /已批准/);
  await page.getByText('消息已发送到「产品周会」。').waitFor();
  const decide = await page.evaluate(() => window.__fake.commandsCalled('decide'));
  assert.equal(decide.length, 1);
  assert.deepEqual(decide[0].args.decision, { kind: 'approve' });
  await shot(page, '03-approved-zh');
});

test('reject with a reason sends it to the assistant', async () => {
  const page = await open({ locale: 'en-US' });
  await page.getByTestId('composer').fill('tell the team');
  await page.getByTestId('send').click();
  const card = page.getByTestId('approval-card');
  await card.waitFor();
  assert.match(await card.innerText(), /Send a message to 产品周会 as you/);
  await card.getByTestId('reject').click();
  await card.getByTestId('reject-reason').fill('Move it to Friday');
  await shot(page, '04-reject-reason-en');
  await card.getByTestId('reject-reason').press('Enter');
  await page.getByTestId('decision-line').waitFor();
  assert.match(await page.getByTestId('decision-line').innerText(), /Rejected: Move it to Friday/);
  const decide = await page.evaluate(() => window.__fake.commandsCalled('decide'));
  assert.deepEqual(decide[0].args, { callId: decide[0].args.callId, decision: { kind: 'reject', reason: 'Move it to Friday' } });
});

test('edit the arguments → approve edited sends approve_edited; invalid JSON blocks it', async () => {
  const page = await open({ locale: 'en-US' });
  await page.getByTestId('composer').fill('tell the team');
  await page.getByTestId('composer').press('Control+Enter');
  const card = page.getByTestId('approval-card');
  await card.waitFor();
  await card.getByTestId('edit').click();
  // The form is the default editor; the raw JSON is the advanced view.
  await card.getByTestId('edit-tab-json').click();
  const ta = card.getByTestId('edit-args');
  await ta.fill('{ "chat_id": ');
  assert.equal(await card.getByTestId('approve').isDisabled(), true);
  assert.match(await card.innerText(), /This is not valid JSON/);
  await ta.fill('{ "chat_id": "oc_product", "text": "Edited text" }');
  assert.match(await card.getByTestId('approve').innerText(), /Approve edited/);
  await card.getByTestId('approve').click();
  await page.getByTestId('decision-line').waitFor();
  const decide = await page.evaluate(() => window.__fake.commandsCalled('decide'));
  assert.deepEqual(decide[0].args.decision, { kind: 'approve_edited', args: { chat_id: 'oc_product', text: 'Edited text' } });
});

test('always allow for this chat sends the constraint and a duration', async () => {
  const page = await open({ locale: 'en-US' });
  await page.getByTestId('composer').fill('tell the team');
  await page.getByTestId('composer').press('Enter');
  const card = page.getByTestId('approval-card');
  await card.waitFor();
  await card.getByTestId('always-allow').click();
  await card.getByTestId('duration-hour').click();
  await shot(page, '05-always-allow-menu-en');
  const items = card.getByTestId('always-allow-choice');
  assert.equal(await items.count(), 2);
  // The chat goes by the name the preview gives it; the raw id stays in the tooltip.
  assert.match(await items.nth(1).innerText(), /for this chat, “产品周会（12 人）”/);
  assert.equal(await items.nth(1).getAttribute('title'), 'chat_id = oc_product');
  const t0 = Date.now();
  await items.nth(1).click();
  await page.getByTestId('decision-line').waitFor();
  assert.match(await page.getByTestId('decision-line').innerText(), /Always allowed/);
  const d = (await page.evaluate(() => window.__fake.commandsCalled('decide')))[0].args.decision;
  assert.equal(d.kind, 'always_allow');
  assert.deepEqual(d.constraints, { chat_id: 'oc_product' });
  assert.ok(Math.abs(d.expires_at - (t0 + 3600e3)) < 60e3);
});

test('a failed send keeps the text and says why', async () => {
  const page = await open({ opts: { failSend: 'The model is not reachable' } });
  await page.getByTestId('composer').fill('明天我有什么安排？');
  await page.getByTestId('send').click();
  await page.getByTestId('toast').waitFor();
  assert.match(await page.getByTestId('toast').innerText(), /The model is not reachable/);
  assert.equal(await page.getByTestId('composer').inputValue(), '明天我有什么安排？');
  assert.equal(await page.getByTestId('item-user').count(), 0);
});

test('auth card: sign in → waiting (with the URL) → signed in → resumed', async () => {
  const page = await open();
  await page.getByTestId('composer').fill('看看我的待办');
  await page.getByTestId('composer').press('Enter');
  const card = page.getByTestId('auth-card');
  await card.waitFor();
  assert.match(await card.innerText(), /需要飞书授权/);
  assert.match(await card.innerText(), /查看你的待办/);
  assert.equal(await card.locator('li[title="task:task:read"]').count(), 1);
  await shot(page, '06-auth-card-zh');
  await card.getByTestId('sign-in').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="auth-status"]')?.getAttribute('data-state') === 'waiting');
  assert.match(await card.getByTestId('auth-status').innerText(), /请在飞书窗口中完成登录/);
  const url = await card.getByTestId('open-in-browser').getAttribute('data-url');
  assert.match(url, /^https:\/\/accounts\.feishu\.cn\/.*scope=task%3Atask%3Aread/);
  const signIn = await page.evaluate(() => window.__fake.commandsCalled('sign_in'));
  assert.deepEqual(signIn[0].args, { scopes: ['task:task:read', 'offline_access'], embedded: true });
  await card.getByTestId('open-in-browser').click();
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('open_sign_in_in_browser'))).length, 1);
  await shot(page, '07-auth-waiting-zh');
  await page.evaluate(() => window.__fake.completeSignIn());
  await page.getByText('提交周报').waitFor();
  assert.equal(await page.getByTestId('auth-card').count(), 0);
  assert.match(await page.getByTestId('account').innerText(), /张三/);
  await shot(page, '08-auth-resumed-zh');
});

test('assistant markdown is sanitised', async () => {
  const page = await open({ locale: 'en-US' });
  await page.getByTestId('composer').fill('markdown please');
  await page.getByTestId('composer').press('Enter');
  const a = page.getByTestId('item-assistant').last();
  await a.waitFor();
  await page.waitForTimeout(100);
  const html = await a.innerHTML();
  assert.match(html, /<strong>Bold<\/strong>/);
  assert.doesNotMatch(html, /onerror|<script|javascript:|target=/i);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  const link = a.locator('a', { hasText: 'docs' });
  await link.click();
  assert.equal(page.url().startsWith('http://127.0.0.1'), true);
  // An http(s) link opens in the system browser through the shell, with its URL as written.
  await page.waitForFunction(() => window.__fake.commandsCalled('open_link').length === 1);
  assert.deepEqual((await page.evaluate(() => window.__fake.commandsCalled('open_link')))[0].args, { url: 'https://open.feishu.cn' });
  await a.locator('a', { hasText: 'plain' }).click();
  await page.waitForFunction(() => window.__fake.commandsCalled('open_link').length === 2);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('open_link')))[1].args.url, 'http://example.com/a?b=1');
  // javascript:, data: and mailto: links open nothing and navigate nowhere.
  for (const text of ['bad link', 'data link', 'mail']) await a.locator('a', { hasText: text }).click();
  await page.waitForTimeout(100);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('open_link'))).length, 2);
  assert.equal(page.url().startsWith('http://127.0.0.1'), true);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  // Chromium reports the payload's onerror as blocked by the CSP while parsing it (it never runs).
  assert.deepEqual(page.errors.filter((e) => !/Content Security Policy/.test(e)), []);
});

test('dark theme and English apply', async () => {
  const page = await open({ locale: 'en-US', colorScheme: 'dark' });
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, 'rgb(26, 26, 26)');
  assert.match(await page.getByTestId('demo-banner').innerText(), /Demo mode/);
  await page.getByTestId('composer').fill('tell the team');
  await page.getByTestId('composer').press('Enter');
  await page.getByTestId('approval-card').waitFor();
  await shot(page, '09-dark-approval-en');
});

test('a notification click selects the session and highlights the card', async () => {
  const page = await open({ opts: { pending: 6, sessions: 3 } });
  await page.evaluate(() => window.__fake.emitOpen({ session_id: 's2', call_id: 'p4' }));
  await page.locator('[data-testid="approval-card"][data-call-id="p4"]').waitFor();
  assert.equal(await page.locator('[data-testid="session-row"][data-session-id="s2"][aria-current="true"]').count(), 1);
});

test('a pending card scrolled out of view gets a marker that jumps to it', async () => {
  const page = await open({ opts: { longTimeline: 400, pending: 0 } });
  await page.getByTestId('timeline').waitFor();
  // A call waits (at the end) while the user reads the middle of a long conversation.
  await page.evaluate(() => {
    const f = window.__fake;
    f.emit({ type: 'call', call: { call_id: 'old', session_id: 's1', invocation_id: 'i0', tool: 'send_message', title: { zh: '发送消息', en: 'Send a message' }, args: {}, original_args: null, status: 'awaiting_approval', pending: true, requires_approval: true, preview: null, scopes: [], authorize_url: null, verdict: null, decided_by: null, reason: null, outcome: null, created_at: 1, expires_at: null, updated_at: 1 } });
  });
  await page.getByTestId('timeline').evaluate((el) => (el.scrollTop = 0));
  await page.getByTestId('timeline').evaluate((el) => (el.scrollTop = el.scrollHeight / 2));
  await page.getByTestId('jump-pending').waitFor();
  await page.getByTestId('jump-pending').click();
  await page.locator('[data-testid="approval-card"][data-call-id="old"]').waitFor();
  await page.waitForFunction(() => !document.querySelector('[data-testid="jump-pending"]'));
});

test('leaving the conversation the moment it grows throws nothing', async () => {
  const page = await open({ opts: { longTimeline: 40, pending: 0 } });
  await page.getByTestId('timeline').waitFor();
  // The list, at the bottom, follows the new row on the next frame; the user has gone by then.
  for (let i = 0; i < 5; i++) {
    await page.evaluate(async () => {
      window.__fake.propose();
      await new Promise((r) => setTimeout(r, 0));
      document.querySelector('[data-testid="nav-inbox"]').click();
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    });
    await page.getByTestId('session-row').first().click();
    await page.getByTestId('timeline').waitFor();
  }
  assert.deepEqual(page.errors, []);
});

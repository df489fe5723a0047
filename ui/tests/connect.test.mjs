// "Connect my Feishu" (issue 22): Feishu creates the user's app in one scan, a second scan signs
// in; the permission card by scanning; the card of an app that lacks a permission. Screenshots go
// to /tmp/ui-shots/issue22 (not kept in the repository).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useApp } from './harness.mjs';

const open = useApp();
const SHOTS = '/tmp/ui-shots/issue22';
fs.mkdirSync(SHOTS, { recursive: true });
const snap = (target, name) => target.screenshot({ path: `${SHOTS}/${name}.png` });
const langs = [['zh-CN', 'zh'], ['en-US', 'en']];
const W = { zh: (zh) => zh, en: (_zh, en) => en };
const called = (page, cmd) => page.evaluate((c) => window.__fake.commandsCalled(c), cmd);
const dialog = (page) => page.getByTestId('connect-dialog');

/** Opens the dialog from the demo banner and starts: the QR code waits. */
async function startConnect(page) {
  await page.getByTestId('connect-feishu').click();
  await page.getByTestId('connect-start').click();
  await page.getByTestId('connect-waiting').waitFor();
}

for (const [locale, lang] of langs) {
  const w = W[lang];

  test(`the three entry points open the dialog; Esc and Cancel close it (${lang})`, async () => {
    const page = await open({ locale, width: 1440, height: 900 });
    // The demo banner keeps one line at 1440 px, its line whole, its chips and the new button in view.
    const banner = page.getByTestId('demo-banner');
    assert.ok((await banner.boundingBox()).height <= 44, 'the banner is one line');
    const body = await page.locator('[data-testid="demo-banner"] .body').evaluate((el) => el.scrollWidth <= el.clientWidth);
    assert.ok(body, 'the banner line is not cut');
    assert.equal(await page.getByTestId('demo-example').count(), 3);
    for (const chip of await page.getByTestId('demo-example').all()) assert.ok(await chip.isVisible(), 'an example chip was pushed out');
    const btn = await page.getByTestId('connect-feishu').boundingBox();
    assert.ok(btn.x + btn.width <= 1440, 'the button is inside the window');
    assert.equal(await page.getByTestId('connect-feishu').innerText(), w('连接我的飞书', 'Connect my Feishu'));

    // 1. the demo banner
    await page.getByTestId('connect-feishu').click();
    await page.getByTestId('connect-intro').waitFor();
    assert.match(await dialog(page).innerText(), lang === 'zh' ? /飞书会为你创建一个个人应用[\s\S]*用手机上的飞书 App 扫码/ : /Feishu creates a personal app for you[\s\S]*Scan with the Feishu app on your phone/);
    assert.equal(await dialog(page).getAttribute('aria-modal'), 'true');
    // The keyboard stays inside: Tab from the last control comes back to the first.
    assert.ok(await dialog(page).evaluate((d) => d.contains(document.activeElement)), 'focus moved into the dialog');
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press('Tab');
      assert.ok(await dialog(page).evaluate((d) => d.contains(document.activeElement)), 'Tab left the dialog');
    }
    await page.keyboard.press('Shift+Tab');
    assert.ok(await dialog(page).evaluate((d) => d.contains(document.activeElement)), 'Shift+Tab left the dialog');
    await snap(page, `connect-intro-${lang}`);
    await page.keyboard.press('Escape');
    await dialog(page).waitFor({ state: 'detached' });

    // 2. the welcome of a new conversation in demo mode
    await page.getByTestId('connect-feishu-welcome').click();
    await page.getByTestId('connect-intro').waitFor();
    await dialog(page).getByRole('button', { name: w('取消', 'Cancel') }).click();
    await dialog(page).waitFor({ state: 'detached' });

    // 3. Settings → Feishu
    await page.getByTestId('nav-settings').click();
    await page.getByTestId('connect-feishu-settings').click();
    await page.getByTestId('connect-intro').waitFor();
    await page.getByTestId('connect-close').click();
    await dialog(page).waitFor({ state: 'detached' });
    assert.equal((await called(page, 'connect_feishu')).length, 0, 'nothing started without Start');
    assert.deepEqual(page.errors, []);
  });

  test(`waiting shows the QR code, the code and a live countdown; Cancel calls it off (${lang})`, async () => {
    const page = await open({ locale, width: 1440, height: 900 });
    await startConnect(page);
    const qr = page.getByTestId('connect-qr');
    assert.equal(await qr.getAttribute('viewBox'), '-4 -4 37 37', 'the quiet zone around 29 modules');
    assert.equal(await qr.getAttribute('shape-rendering'), 'crispEdges');
    const box = await qr.boundingBox();
    assert.ok(box.width >= 180 && box.width <= 220, `the QR is ${box.width}px`);
    assert.match(await page.getByTestId('connect-code').innerText(), /^[A-Z0-9]{4}-[A-Z0-9]{4}$/);
    const cd = page.getByTestId('connect-countdown');
    const first = await cd.innerText();
    assert.match(first, lang === 'zh' ? /^剩余 (10:00|09:59)$/ : /^Expires in (10:00|09:59)$/);
    await page.waitForFunction((f) => document.querySelector('[data-testid="connect-countdown"]').textContent.trim() !== f, first, { timeout: 3000 });
    await page.getByTestId('connect-open-window').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('open_connect_page').length === 1);
    await snap(page, `connect-waiting-${lang}`);
    await snap(dialog(page), `connect-waiting-dialog-${lang}`);
    // Dark theme: the QR stays black on white, so a phone can scan it.
    assert.equal(await qr.locator('rect').getAttribute('fill'), '#ffffff');
    assert.equal(await qr.locator('path').getAttribute('fill'), '#000000');

    await page.getByTestId('connect-cancel').click();
    await dialog(page).waitFor({ state: 'detached' });
    assert.equal((await called(page, 'cancel_connect')).length, 1);
    // The core's "cancelled" arrives after: opening again starts over.
    await page.waitForTimeout(30);
    await page.getByTestId('connect-feishu').click();
    await page.getByTestId('connect-intro').waitFor();
    await page.keyboard.press('Escape');
    assert.deepEqual(page.errors, []);
  });

  test(`connected, then step 2 scans again to sign in, then done (${lang})`, async () => {
    const page = await open({ locale, width: 1440, height: 900 });
    await startConnect(page);
    await page.evaluate(() => window.__fake.connectDone());
    const done = page.getByTestId('connect-done');
    await done.waitFor();
    assert.equal(await page.getByTestId('connect-app-id').innerText(), 'cli_a7f3c2e1d0b9');
    // The sign-in the core started by itself arrives as a sign_in event with its QR code.
    await page.getByTestId('connect-step2').waitFor();
    assert.match(await page.getByTestId('connect-step2').innerText(), lang === 'zh' ? /第 2 步：再扫一次以登录/ : /Step 2: scan again to sign in/);
    await page.getByTestId('connect-signin-qr').waitFor();
    assert.match(await page.getByTestId('connect-signin-countdown').innerText(), lang === 'zh' ? /剩余 0[45]:\d\d/ : /Expires in 0[45]:\d\d/);
    // The app left demo mode at once.
    await page.getByTestId('demo-banner').waitFor({ state: 'detached' });
    await page.getByTestId('connect-signin-open-window').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('open_sign_in_window').length === 1);
    await snap(page, `connect-step2-${lang}`);

    await page.evaluate(() => window.__fake.completeSignIn());
    await page.getByTestId('connect-signed-in').waitFor();
    assert.match(await page.getByTestId('connect-signed-in').innerText(), lang === 'zh' ? /已连接 张三 的飞书/ : /Connected to 张三’s Feishu/);
    await snap(dialog(page), `connect-signed-in-${lang}`);
    await page.getByTestId('connect-finish').click();
    await dialog(page).waitFor({ state: 'detached' });
    assert.match(await page.getByTestId('account').innerText(), /张三/);
    assert.deepEqual(page.errors, []);
  });

  test(`connected without a model says so and leads to the model settings (${lang})`, async () => {
    const page = await open({ locale, width: 1440, height: 900 });
    await startConnect(page);
    await page.evaluate(() => window.__fake.connectDone({ needsModel: true }));
    await page.getByTestId('connect-needs-model').waitFor();
    assert.match(await page.getByTestId('connect-needs-model').innerText(), lang === 'zh' ? /选择模型[\s\S]*演示模式/ : /choose a model[\s\S]*demo mode/);
    assert.equal(await page.getByTestId('connect-step2').count(), 0, 'no sign-in without a model');
    await snap(dialog(page), `connect-needs-model-${lang}`);
    await page.getByTestId('connect-to-model').click();
    await dialog(page).waitFor({ state: 'detached' });
    await page.getByTestId('settings').waitFor();
    await page.waitForFunction(() => {
      const r = document.getElementById('settings-model').getBoundingClientRect();
      return r.top >= 0 && r.top < 200;
    });
    assert.deepEqual(page.errors, []);
  });

  test(`each failure says what happened and Try again starts over (${lang})`, async () => {
    const page = await open({ locale, width: 1440, height: 900 });
    const titles = {
      expired: w('二维码已过期', 'The QR code has expired'),
      denied: w('已在飞书中拒绝', 'Declined in Feishu'),
      cancelled: w('已取消连接', 'Connecting was cancelled'),
      offline: w('无法连接飞书', 'Feishu cannot be reached'),
      other: w('连接失败', 'Could not connect'),
    };
    await startConnect(page);
    for (const [i, reason] of Object.keys(titles).entries()) {
      const message = { zh: `飞书说：${reason} 的原因`, en: `Feishu says: the reason for ${reason}` };
      await page.evaluate(([r, m]) => window.__fake.connectFail(r, m), [reason, message]);
      const failed = page.locator(`[data-testid="connect-failed"][data-reason="${reason}"]`);
      await failed.waitFor();
      assert.equal(await page.getByTestId('connect-failed-title').innerText(), titles[reason]);
      assert.equal(await page.getByTestId('connect-failed-message').innerText(), message[lang]);
      await snap(dialog(page), `connect-failed-${reason}-${lang}`);
      await page.getByTestId('connect-retry').click();
      await page.getByTestId('connect-waiting').waitFor();
      assert.equal((await called(page, 'connect_feishu')).length, i + 2, 'Try again asks for a new code');
    }
    assert.deepEqual(page.errors, []);
  });

  test(`a code that runs out before anyone confirms reads as expired at once (${lang})`, async () => {
    const page = await open({ locale, opts: { connectExpiresMs: 2200 } });
    await startConnect(page);
    await page.locator('[data-testid="connect-failed"][data-reason="expired"]').waitFor({ timeout: 5000 });
    assert.equal(await page.getByTestId('connect-failed-message').innerText(), w('二维码在确认前已失效，请重新获取后再扫一次。', 'Nobody confirmed before the code ran out. Get a new one and scan again.'));
    await page.getByTestId('connect-retry').click();
    await page.getByTestId('connect-waiting').waitFor();
    assert.deepEqual(page.errors, []);
  });

  test(`the permission card signs in by scanning: QR, open-window, expired and a new code (${lang})`, async () => {
    const page = await open({ locale, opts: { device: true, deviceExpiresMs: 300e3 }, width: 1280, height: 900 });
    await page.getByTestId('composer').fill(lang === 'zh' ? '看看我的待办' : 'show my tasks');
    await page.getByTestId('send').click();
    const card = page.getByTestId('auth-card');
    await card.waitFor();
    await card.getByTestId('sign-in').click();
    await card.getByTestId('auth-qr').waitFor();
    assert.match(await card.innerText(), lang === 'zh' ? /用飞书扫码/ : /Scan with Feishu/);
    assert.match(await card.getByTestId('auth-code').innerText(), /^[A-Z0-9]{4}-[A-Z0-9]{4}$/);
    assert.match(await card.getByTestId('auth-countdown').innerText(), /0[45]:\d\d/);
    assert.equal(await card.getByTestId('open-in-browser').count(), 0, 'no window to expect, no browser button');
    assert.equal(await card.getByTestId('auth-status').getAttribute('data-state'), 'waiting');
    assert.equal((await called(page, 'sign_in')).at(-1).args.embedded, true);
    await card.getByTestId('auth-open-window').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('open_sign_in_window').length === 1);
    await card.scrollIntoViewIfNeeded();
    await snap(card, `auth-device-${lang}`);

    await page.evaluate(() => window.__fake.expireSignIn());
    await card.getByTestId('auth-new-code').waitFor();
    assert.equal(await card.getByTestId('auth-qr').count(), 0);
    assert.equal(await card.getByTestId('auth-status').getAttribute('data-state'), 'expired');
    assert.match(await card.getByTestId('auth-status').innerText(), lang === 'zh' ? /二维码在确认前已失效/ : /The QR code ran out/);
    assert.equal(await card.getByTestId('auth-new-code').innerText(), w('重新获取二维码', 'Get a new code'));
    await snap(card, `auth-device-expired-${lang}`);
    await card.getByTestId('auth-new-code').click();
    await card.getByTestId('auth-qr').waitFor();
    assert.equal((await called(page, 'sign_in')).length, 2);
    // Signed in: the held call goes on.
    await page.evaluate(() => window.__fake.completeSignIn());
    await page.getByTestId('auth-card').waitFor({ state: 'detached' });
    assert.deepEqual(page.errors, []);
  });

  test(`the permission card's QR code reads as expired once its countdown ends (${lang})`, async () => {
    const page = await open({ locale, opts: { device: true, deviceExpiresMs: 2200 } });
    await page.getByTestId('composer').fill('show my tasks');
    await page.getByTestId('send').click();
    const card = page.getByTestId('auth-card');
    await card.getByTestId('sign-in').click();
    await card.getByTestId('auth-qr').waitFor();
    await card.getByTestId('auth-new-code').waitFor({ timeout: 5000 });
    assert.equal(await card.getByTestId('auth-status').getAttribute('data-state'), 'expired');
    assert.deepEqual(page.errors, []);
  });

  test(`the app-scope card applies for the permission and retries once it is approved (${lang})`, async () => {
    const page = await open({ locale, opts: { signedIn: true }, width: 1280, height: 900 });
    const id = await page.evaluate(() =>
      window.__fake.propose({
        tool: 'list_tasks',
        status: 'awaiting_auth',
        requires_approval: false,
        scopes: [{ scope: 'task:task:read', label: { zh: '查看你的待办', en: 'See your tasks' } }],
        scope_apply_url: 'https://open.feishu.cn/app/cli_demo/auth?q=task:task:read&op_from=openapi',
      }),
    );
    const card = page.locator(`[data-testid="auth-card"][data-call-id="${id}"]`);
    const body = card.getByTestId('scope-apply-card');
    await body.waitFor();
    assert.match(await card.innerText(), lang === 'zh' ? /飞书应用缺少权限/ : /The Feishu app lacks a permission/);
    assert.match(await body.innerText(), lang === 'zh' ? /申请后可能需要管理员审批；获批后点“重试”/ : /An administrator may have to approve the request; press Retry once it is approved/);
    assert.equal(await body.locator('li').first().getAttribute('title'), 'task:task:read', 'the raw scope on hover');
    assert.equal(await body.locator('li').first().innerText(), w('查看你的待办', 'See your tasks'));
    assert.equal(await card.getByTestId('sign-in').count(), 0, 'signing in does not help here');
    assert.equal(await card.getByTestId('decline-auth').count(), 1);
    await card.scrollIntoViewIfNeeded();
    await snap(card, `scope-apply-${lang}`);

    await card.getByTestId('scope-apply-open').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('open_scope_apply').length === 1);
    assert.deepEqual((await called(page, 'open_scope_apply'))[0].args, { callId: id });
    // Not approved yet: Retry says so and the card stays.
    await card.getByTestId('scope-apply-retry').click();
    await card.getByTestId('scope-apply-still').waitFor();
    assert.deepEqual((await called(page, 'retry_auth_call'))[0].args, { callId: id });
    await snap(card, `scope-apply-still-${lang}`);
    // Approved: Retry runs the call.
    await page.evaluate((c) => window.__fake.grantScope(c), id);
    await card.getByTestId('scope-apply-retry').click();
    await card.waitFor({ state: 'detached' });
    assert.equal((await called(page, 'retry_auth_call')).length, 2);
    assert.deepEqual(page.errors, []);
  });
}

test('Esc cancels what waits even after a step took away the focused button, and the keyboard stays in the dialog', async () => {
  const page = await open({ locale: 'en-US', width: 900, height: 600 });
  await startConnect(page);
  await page.getByTestId('connect-cancel').focus();
  await page.evaluate(() => window.__fake.connectDone());
  await page.getByTestId('connect-step2').waitFor();
  // The Cancel that had the focus was replaced: the focus is back in the dialog, Tab stays there.
  await page.waitForFunction(() => document.querySelector('[data-testid="connect-dialog"]').contains(document.activeElement));
  await page.keyboard.press('Tab');
  assert.ok(await dialog(page).evaluate((d) => d.contains(document.activeElement)));
  // The whole step fits the smallest window.
  assert.ok(await dialog(page).evaluate((d) => d.scrollHeight <= d.clientHeight), 'the dialog scrolls at 900×600');
  await snap(page, 'connect-step2-900x600-en');
  await page.keyboard.press('Escape');
  await dialog(page).waitFor({ state: 'detached' });
  await page.waitForFunction(() => window.__fake.commandsCalled('cancel_sign_in').length === 1);
  assert.deepEqual(page.errors, []);
});

test('dark theme: the QR codes stay black on white and the dialog reads well', async () => {
  const page = await open({ locale: 'zh-CN', colorScheme: 'dark', width: 1440, height: 900 });
  await startConnect(page);
  const bg = await page.getByTestId('connect-qr').locator('rect').evaluate((r) => getComputedStyle(r).fill);
  assert.equal(bg, 'rgb(255, 255, 255)');
  await snap(page, 'connect-waiting-dark-zh');
  await page.evaluate(() => window.__fake.connectDone());
  await page.getByTestId('connect-step2').waitFor();
  await snap(dialog(page), 'connect-step2-dark-zh');
  assert.deepEqual(page.errors, []);
});

test('a sign-in from the status bar by scanning shows its QR code in the account drawer', async () => {
  const page = await open({ locale: 'en-US', opts: { device: true } });
  await page.getByTestId('status-sign-in').click();
  await page.getByTestId('account-panel').getByTestId('account-qr').waitFor();
  await page.getByTestId('account-open-window').click();
  await page.waitForFunction(() => window.__fake.commandsCalled('open_sign_in_window').length === 1);
  await snap(page.getByTestId('drawer'), 'account-device-en');
  assert.deepEqual(page.errors, []);
});

test('Settings → Feishu: the hand-entered app under Advanced, and the sign-in method saved with its section', async () => {
  // Demo mode, no App ID: Advanced is closed; the fields are there once it opens.
  let page = await open({ locale: 'zh-CN', opts: { appId: '' } });
  await page.getByTestId('nav-settings').click();
  assert.equal(await page.getByTestId('feishu-app-state').getAttribute('data-state'), 'none');
  assert.equal(await page.getByTestId('feishu-advanced').evaluate((d) => d.open), false);
  assert.equal(await page.getByTestId('app-id').isVisible(), false);
  await page.getByTestId('feishu-advanced-toggle').click();
  await page.getByTestId('app-id').waitFor();
  assert.ok(await page.getByTestId('app-secret').isVisible());
  assert.ok(await page.getByTestId('redirect-port').isVisible());
  // Opened by the user, it stays open when Settings is opened again.
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('nav-settings').click();
  assert.equal(await page.getByTestId('feishu-advanced').evaluate((d) => d.open), true);

  // The three sign-in methods, in words; the choice is saved by the Feishu section's Save.
  const flow = page.getByTestId('sign-in-flow');
  assert.deepEqual(await flow.locator('option').allTextContents(), ['自动', '扫码（设备授权）', '浏览器跳转（需登记重定向 URL）']);
  await flow.selectOption('device');
  assert.match(await page.getByTestId('sign-in-flow-hint').innerText(), /扫码登录/);
  await page.getByTestId('save-feishu').click();
  await page.waitForFunction(() => window.__fake.commandsCalled('save_settings').length > 0);
  const saved = (await called(page, 'save_settings')).at(-1).args.settings.feishu;
  assert.equal(saved.sign_in_flow, 'device');
  await page.getByTestId('settings-feishu').screenshot({ path: `${SHOTS}/settings-feishu-zh.png` });

  // An app entered by hand: Advanced is open by default (its fields are what the user uses).
  page = await open({ locale: 'en-US' });
  await page.getByTestId('nav-settings').click();
  assert.equal(await page.getByTestId('feishu-app-state').getAttribute('data-state'), 'own');
  assert.equal(await page.getByTestId('feishu-advanced').evaluate((d) => d.open), true);
  assert.deepEqual(await page.getByTestId('sign-in-flow').locator('option').allTextContents(), ['Auto', 'Scan a QR code', 'Browser redirect (needs a registered redirect URL)']);
  await page.getByTestId('settings-feishu').screenshot({ path: `${SHOTS}/settings-feishu-own-en.png` });

  // An app "Connect my Feishu" created: closed, and the state says whose app it is.
  page = await open({ locale: 'en-US', opts: { appId: 'cli_a7f3c2e1d0b9', createdByApp: true, demo: false } });
  await page.getByTestId('nav-settings').click();
  assert.equal(await page.getByTestId('feishu-app-state').getAttribute('data-state'), 'created');
  assert.match(await page.getByTestId('feishu-app-state').innerText(), /cli_a7f3c2e1d0b9, created by Feishu Companion/);
  assert.equal(await page.getByTestId('feishu-advanced').evaluate((d) => d.open), false);
  await page.getByTestId('settings-feishu').screenshot({ path: `${SHOTS}/settings-feishu-created-en.png` });
  assert.deepEqual(page.errors, []);
});

// The first day with a real tenant, end to end in the real window: Feishu's authorize page
// refusing the sign-in for each console mistake (each failure card looked at), enterprise single
// sign-on handing the same sign-in to the system browser, and the sign-in window refusing to be
// steered elsewhere (another host, an open redirector, `javascript:`). The emulator's console
// endpoints stand in for the developer console; a stand-in `xdg-open` records what would have
// opened in the system browser.

import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { APP, spawnLine, consent, freshDataDir, launch, send, shot, startDriver, step, waitForReply } from './harness.mjs';

const DEMO_APP = 'cli_demo_companion';
const REAL_APP = 'cli_e2e_real_tenant';
const bins = path.dirname(APP);

// What the app opens "in the browser" is recorded here instead.
const bin = mkdtempSync(path.join(tmpdir(), 'fc-e2e-opener-'));
const opened = path.join(bin, 'opened.txt');
writeFileSync(
  path.join(bin, 'xdg-open'),
  `#!/bin/sh\nprintf '%s\\n' "$1" >> '${opened}'\n`,
);
chmodSync(path.join(bin, 'xdg-open'), 0o755);
process.env.PATH = `${bin}:${process.env.PATH}`;

function openedUrls() {
  return existsSync(opened) ? readFileSync(opened, 'utf8').split('\n').filter(Boolean) : [];
}

// A second tenant standing in for the user's real Feishu app, and a model for it: the app
// reaches them once the settings name them.
let driver;
let realTenant;
let realModel;
let switchDir;
before(async () => {
  switchDir = await freshDataDir('switch');
  const port = JSON.parse(readFileSync(path.join(switchDir, 'config', 'settings.json'), 'utf8')).feishu
    .redirect_port;
  realTenant = await spawnLine(path.join(bins, 'feishu-emulator'), [
    '--app',
    `${REAL_APP}:real-secret:http://127.0.0.1:${port}/callback`,
  ]);
  realModel = await spawnLine(path.join(bins, 'model-server'), []);
  process.env.FEISHU_COMPANION_FEISHU_BASE_URL = JSON.parse(realTenant.line).base_url;
  driver = await startDriver();
});
after(() => {
  driver?.stop();
  realTenant?.stop();
  realModel?.stop();
  rmSync(bin, { recursive: true, force: true });
  if (switchDir) rmSync(switchDir, { recursive: true, force: true });
});

async function pendingCount(browser) {
  const badge = browser.$('[data-testid="inbox-count"]');
  if (!(await badge.isExisting())) return 0;
  const text = (await badge.getText()).trim();
  return text === '' ? 0 : Number(text);
}

describe('settings apply at once: demo, then a real app, then demo again', () => {
  let browser;
  before(async () => {
    browser = await launch(driver, switchDir);
  });
  after(async () => {
    await browser?.deleteSession();
  });

  async function openSettings() {
    await browser.$('[data-testid="nav-settings"]').click();
    // The console's App ID and Secret sit under "Advanced" until an app entered by hand is set.
    const appId = browser.$('[data-testid="app-id"]');
    if (!(await appId.isDisplayed())) await browser.$('[data-testid="feishu-advanced-toggle"]').click();
    await appId.waitForDisplayed();
  }
  /** Presses one section's Save and waits until it has saved (its note shows, no error). */
  async function saveSection(section) {
    const bar = browser.$(`[data-testid="savebar-${section}"]`);
    await browser.$(`[data-testid="save-${section}"]`).click();
    await browser.waitUntil(
      async () =>
        (await bar.$('[data-testid="saved-note"]').isExisting()) || (await bar.$('[data-testid="restart-note"]').isExisting()),
      { timeoutMsg: `saving the ${section} section never finished: ${await bar.getText()}` },
    );
  }
  async function proposeMeeting() {
    await browser.$('[data-testid="new-session"]').click();
    await send(browser, '帮我约个产品评审会');
    await browser.$('[data-testid="approval-card"]').waitForDisplayed();
  }

  test('an approval waits in demo mode', async () => {
    await browser.$('[data-testid="demo-banner"]').waitForDisplayed();
    await proposeMeeting();
    await browser.waitUntil(async () => (await pendingCount(browser)) === 1);
    await shot(browser, '30-demo-approval-pending');
  });

  test('entering the real app and model leaves demo mode at once', async () => {
    await openSettings();
    await browser.$('[data-testid="preset"]').selectByAttribute('value', 'custom');
    await browser.$('[data-testid="base-url"]').setValue(realModel.line.trim());
    await browser.$('#s-model').setValue('real-model');
    await saveSection('model');
    // The App ID and its secret, saved together by the Feishu section's one Save.
    await browser.$('[data-testid="app-id"]').setValue(REAL_APP);
    await browser.$('[data-testid="app-secret"]').setValue('real-secret');
    await saveSection('feishu');
    await browser.waitUntil(async () => !(await browser.$('[data-testid="demo-banner"]').isExisting()), {
      timeout: 20000,
      timeoutMsg: 'still in demo mode after the settings were saved',
    });
    await browser.$('[data-testid="check-run"]').click();
    const items = () => browser.$$('[data-testid="check-item"]');
    await browser.waitUntil(async () => (await items().length) === 3, { timeout: 30000, timeoutMsg: 'no check results' });
    const feishuItem = browser.$('[data-testid="check-item"][data-part="feishu_app"]');
    assert.equal(await feishuItem.getAttribute('data-ok'), 'true', await feishuItem.getText());
    const modelItem = browser.$('[data-testid="check-item"][data-part="model"]');
    assert.equal(await modelItem.getAttribute('data-ok'), 'true', await modelItem.getText());
    await shot(browser, '31-real-app-applied-and-checked');
    assert.equal(await pendingCount(browser), 0, 'the demo approval is not the real account\'s');
  });

  test('an approval waits for the real app', async () => {
    await proposeMeeting();
    await browser.waitUntil(async () => (await pendingCount(browser)) === 1);
    await shot(browser, '32-real-approval-pending');
  });

  test('clearing the App ID goes back to demo mode, its approval still there', async () => {
    await openSettings();
    // As a person does it (clearValue fires no input event the form would hear).
    await browser.$('[data-testid="app-id"]').click();
    await browser.keys(['Control', 'a']);
    await browser.keys('Backspace');
    await saveSection('feishu');
    await browser.$('[data-testid="demo-banner"]').waitForDisplayed({ timeout: 20000 });
    await browser.waitUntil(async () => (await pendingCount(browser)) === 1, {
      timeoutMsg: 'the demo approval did not come back',
    });
    await shot(browser, '33-back-to-demo');
  });
});

async function post(url, body) {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!answer.ok && answer.status !== 204) throw new Error(`${url} answered HTTP ${answer.status}`);
}

describe('signing in to a real tenant', () => {
  let browser;
  let dataDir;
  let card;
  let emulator;
  let redirectUrl;

  const console = (body) => post(`${emulator}/_emulator/apps/${DEMO_APP}`, body);
  const identityProvider = (body) => post(`${emulator}/_emulator/identity_provider`, body);

  async function state() {
    return card.$('[data-testid="auth-status"]').getAttribute('data-state');
  }
  async function waitForState(wanted, timeoutMsg) {
    await browser.waitUntil(async () => (await state()) === wanted, { timeout: 20000, timeoutMsg });
  }
  async function signIn() {
    await card.$('[data-testid="sign-in"]').click();
  }
  async function cancel() {
    const button = card.$('[data-testid="auth-status"] button');
    if (await button.isExisting()) await button.click();
    await waitForState('idle', 'the sign-in did not stop');
  }

  before(async () => {
    dataDir = await freshDataDir('tenants');
    const settings = JSON.parse(readFileSync(path.join(dataDir, 'config', 'settings.json'), 'utf8'));
    redirectUrl = `http://127.0.0.1:${settings.feishu.redirect_port}/callback`;
    browser = await launch(driver, dataDir);
    await send(browser, '明天我有什么安排？');
    card = browser.$('[data-testid="auth-card"]');
    await card.waitForDisplayed();
    // One sign-in started and stopped, to learn where the emulator is.
    await signIn();
    const link = card.$('[data-testid="open-in-browser"]');
    await browser.waitUntil(async () => Boolean(await link.getAttribute('data-url')));
    emulator = new URL(await link.getAttribute('data-url')).origin;
    await cancel();
  });
  after(async () => {
    await browser?.deleteSession();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const failures = [
    ['redirect_not_registered', { redirect_uris: [] }, (v) => assert.equal(v, redirectUrl)],
    ['scopes_not_enabled', { enabled_scopes: ['task:task:read'] }, (v) => assert.match(v, /calendar:calendar:readonly/)],
    ['app_not_published', { release: 'unpublished' }, null],
    ['app_disabled', { release: 'disabled' }, null],
    ['outside_availability', { release: 'user_outside_availability' }, null],
  ];
  for (const [kind, change, checkValue] of failures) {
    test(`a sign-in Feishu refuses (${kind}) says what to fix`, async () => {
      await console(change);
      try {
        await signIn();
        const problem = card.$('[data-testid="auth-problem"]');
        await problem.waitForDisplayed({ timeout: 20000, timeoutMsg: `no failure card for ${kind}` });
        assert.equal(await problem.getAttribute('data-kind'), kind);
        assert.equal(await state(), 'refused');
        const value = card.$('[data-testid="auth-problem-value"]');
        if (checkValue) checkValue(await value.getText());
        await shot(browser, `20-refused-${kind}`);
      } finally {
        await console({
          release: 'available',
          redirect_uris: [redirectUrl],
          enabled_scopes: [
            'calendar:calendar.free_busy:read',
            'calendar:calendar:readonly',
            'calendar:calendar.event:create',
            'calendar:calendar.event:update',
            'calendar:calendar.event:delete',
            'contact:contact.base:readonly',
            'contact:user:search',
          ],
        });
      }
    });
  }

  test('the sign-in window refuses a javascript: redirect', async () => {
    const before = openedUrls().length;
    await identityProvider({ url: "javascript:document.title='steered'" });
    try {
      await signIn();
      await waitForState('waiting', 'the sign-in did not start');
      await new Promise((r) => setTimeout(r, 2000));
      await shot(browser, '21-javascript-refused');
      assert.equal(openedUrls().length, before, 'nothing was handed to the browser');
      assert.equal(await state(), 'waiting');
    } finally {
      await cancel();
    }
  });

  test('an open redirector to another host hands the sign-in to the browser', async () => {
    const before = openedUrls().length;
    const elsewhere = `http://127.0.0.1:9/elsewhere`;
    await identityProvider({ url: `${emulator}/_emulator/redirect?to=${encodeURIComponent(elsewhere)}` });
    try {
      await signIn();
      await waitForState('in_browser', 'the redirect hop was not handed to the browser');
      const urls = openedUrls().slice(before);
      assert.equal(urls.length, 1, `one browser opening: ${urls}`);
      assert.ok(urls[0].startsWith(`${emulator}/open-apis/authen/v1/authorize?`), urls[0]);
      assert.ok(!urls.some((u) => u.includes('elsewhere')), 'the redirector target itself is never opened');
      await shot(browser, '22-open-redirector-handed-off');
    } finally {
      await cancel();
    }
  });

  test('enterprise single sign-on continues in the browser and signs in', async () => {
    const before = openedUrls().length;
    await identityProvider({ stand_in: true });
    await signIn();
    await waitForState('in_browser', 'the identity provider was not handed to the browser');
    await new Promise((r) => setTimeout(r, 1000));
    await shot(browser, '23-sso-continues-in-browser');
    const urls = openedUrls().slice(before);
    assert.equal(urls.length, 1, `${urls}`);
    const state = new URL(urls[0]).searchParams.get('state');
    assert.ok(state, 'the same sign-in, with its state');
    // The browser: the authorize page sends it to the identity provider on another port, which
    // sends it back; the consent lands on the same listener.
    await consent(urls[0]);
    step('consent given in the "browser"');
    await waitForReply(browser, '明天的日程我看过了');
    await shot(browser, '24-sso-signed-in');
    await identityProvider({ url: null });
  });
});

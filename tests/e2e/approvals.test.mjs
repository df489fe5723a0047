// Issue 13 through the real window: approvals are never late (expiry), never lost to a new
// message, and conversations belong to the person, not to a sign-in. Demo mode, Chinese UI.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { freshDataDir, launch, send, shot, signInThroughCard, startDriver, step, waitForReply, withApp } from './harness.mjs';

let driver;
before(async () => {
  driver = await startDriver();
});
after(() => driver?.stop());

async function pendingCount(browser) {
  const badge = browser.$('[data-testid="inbox-count"]');
  if (!(await badge.isExisting())) return 0;
  const text = (await badge.getText()).trim();
  return text === '' ? 0 : Number(text);
}

/** Calls a command of the app directly, as a second surface would; answers 'ok' or the error. */
async function invoke(browser, cmd, args) {
  return browser.executeAsync(
    (c, a, done) => {
      window.__TAURI_INTERNALS__.invoke(c, a).then(
        () => done('ok'),
        (e) => done(typeof e === 'string' ? e : JSON.stringify(e)),
      );
    },
    cmd,
    args,
  );
}

/** An element's text as the page has it. WebKitWebDriver answers '' for getText() of an element
 *  inside a <button> (the collapsed call row is one), though it is on screen. */
async function textOf(element) {
  return String(await element.getProperty('textContent')).trim();
}

async function assistantText(browser) {
  const texts = [];
  for (const item of await browser.$$('[data-testid="item-assistant"]')) texts.push(await item.getText());
  return texts.join('\n');
}

describe('an expired approval cannot be approved', () => {
  test('the countdown is right from the first render, the card collapses on time, and a late Approve is refused', async () => {
    await withApp(driver, 'expiry', { approval_expiry_minutes: 1 }, async (browser) => {
      await send(browser, '帮我约个产品评审会');
      const card = browser.$('[data-testid="approval-card"]');
      await card.waitForDisplayed();
      // A one-minute expiry reads one minute (or its last seconds), never "2 minutes".
      const first = (await card.$('[data-testid="countdown"]').getText()).trim();
      assert.match(first, /^(1 分钟|[1-5]?\d 秒)后过期$/, `first countdown: ${first}`);
      await shot(browser, '30-expiry-countdown');
      const callId = await card.getAttribute('data-call-id');
      await browser.waitUntil(
        async () => !(await browser.$(`[data-testid="approval-card"][data-call-id="${callId}"]`).isExisting()),
        { timeout: 75000, interval: 200, timeoutMsg: 'the card still offers Approve after its expiry' },
      );
      step('the card collapsed');
      // At once, before the engine's 30-second sweep is likely to have come round: Approve from
      // another surface (the inbox of another window, a notification) is refused by the engine.
      const answer = await invoke(browser, 'decide', { callId, decision: { kind: 'approve' } });
      assert.notEqual(answer, 'ok', 'an Approve after expiry was accepted');
      // The core's refusal, worded for the user (companion::user_error): expired, or no longer
      // pending if the sweep got there first.
      assert.match(answer, /"code":"(expired|not_pending)"/);
      assert.match(answer, /已过期|不再等待/);
      step(`late Approve refused: ${answer}`);
      const line = browser.$(`[data-testid="item-tool"][data-call-id="${callId}"] [data-testid="decision-line"]`);
      await line.waitForDisplayed();
      await browser.waitUntil(async () => (await textOf(line)).includes('过期'), {
        timeoutMsg: 'the collapsed line does not say expired',
      });
      assert.equal(await browser.$$('[data-testid="approve"]').length, 0);
      assert.equal(await pendingCount(browser), 0);
      assert.doesNotMatch(await assistantText(browser), /已创建/);
      await shot(browser, '31-expired-collapsed');
    });
  });
});

describe('a new message never silently throws a waiting approval away', () => {
  test('kept by default: the card survives the message and approving it later creates the event', async () => {
    await withApp(driver, 'keep', {}, async (browser) => {
      await send(browser, '帮我约个产品评审会');
      const card = browser.$('[data-testid="approval-card"]');
      await card.waitForDisplayed();
      const callId = await card.getAttribute('data-call-id');
      await send(browser, '你好');
      const choice = browser.$('[data-testid="waiting-choice"]');
      await choice.waitForDisplayed();
      assert.match(await choice.getText(), /此对话中有 1 项审批在等待/);
      await shot(browser, '32-waiting-choice');
      await browser.$('[data-testid="waiting-keep"]').click();
      await waitForReply(browser, '这是演示模式');
      const still = browser.$(`[data-testid="approval-card"][data-call-id="${callId}"]`);
      assert.ok(await still.isDisplayed(), 'the waiting card is gone after a new message');
      assert.equal(await pendingCount(browser), 1);
      await shot(browser, '33-kept-after-new-message');
      await still.$('[data-testid="approve"]').click();
      await signInThroughCard(browser, '34-kept');
      await waitForReply(browser, '之前等待你确认的「产品评审会」已经创建好了');
      assert.equal(await pendingCount(browser), 0);
      await shot(browser, '35-kept-then-approved');
    });
  });

  test('cancelled only by choice, and the card says why in Chinese', async () => {
    await withApp(driver, 'cancel', {}, async (browser) => {
      await send(browser, '帮我约个产品评审会');
      const card = browser.$('[data-testid="approval-card"]');
      await card.waitForDisplayed();
      const callId = await card.getAttribute('data-call-id');
      await send(browser, '算了，你好');
      await browser.$('[data-testid="waiting-choice"]').waitForDisplayed();
      await browser.$('[data-testid="waiting-cancel"]').click();
      const line = browser.$(`[data-testid="item-tool"][data-call-id="${callId}"] [data-testid="decision-line"]`);
      await line.waitForDisplayed();
      await browser.waitUntil(async () => (await textOf(line)) === '你发送新消息时选择了取消等待中的审批', {
        timeoutMsg: `the cancelled card says: ${await textOf(line)}`,
      });
      assert.doesNotMatch(await textOf(line), /superseded/i);
      assert.equal(await pendingCount(browser), 0);
      await shot(browser, '36-cancelled-by-choice');
    });
  });
});

describe('conversations belong to the person, not to a token', () => {
  test('signing out and relaunching demo mode keep every conversation, approval and title; the status bar tells the truth', async () => {
    const dataDir = await freshDataDir('person');
    let browser = await launch(driver, dataDir);
    const titles = async () => {
      const rows = await browser.$$('[data-testid="session-row"]');
      const out = [];
      for (const r of rows) out.push((await r.getText()).trim());
      return out;
    };
    try {
      await send(browser, '明天我有什么安排？');
      await signInThroughCard(browser, '37-person');
      await waitForReply(browser, '明天的日程我看过了');
      for (const text of ['帮我约个产品评审会', '看看我的待办']) {
        await browser.$('[data-testid="new-session"]').click();
        await send(browser, text);
        await browser.pause(1500);
      }
      await browser.waitUntil(async () => (await titles()).length === 3, { timeoutMsg: 'three conversations are not listed' });
      const before = await titles();
      assert.ok(before.every((t) => t.length > 0), `untitled rows: ${before}`);
      assert.match(await browser.$('[data-testid="account"]').getText(), /林晓/);
      // The meeting waits for approval, the to-dos for a permission: both are the person's.
      const waiting = await pendingCount(browser);
      assert.equal(waiting, 2, 'an approval and a sign-in wait');

      // Sign out from the account drawer: the sign-in ends, the person and their data stay.
      await browser.$('[data-testid="account"]').click();
      await browser.$('[data-testid="sign-out"]').click();
      const account = browser.$('[data-testid="account"]');
      await browser.waitUntil(async () => (await account.getAttribute('data-signed-in')) === 'false', {
        timeoutMsg: 'the status bar still claims the sign-in after signing out',
      });
      assert.match(await account.getText(), /林晓 · 已退出登录/);
      assert.deepEqual(await titles(), before);
      assert.equal(await pendingCount(browser), waiting, 'what waits survives the sign-out');
      await shot(browser, '38-signed-out-kept');
      await browser.deleteSession();

      // Relaunch demo mode: its emulator forgets every token, nothing else is forgotten.
      browser = await launch(driver, dataDir);
      await browser.waitUntil(async () => (await titles()).length === 3, {
        timeoutMsg: 'the conversations dropped after a relaunch',
      });
      assert.deepEqual((await titles()).sort(), [...before].sort());
      const relaunched = browser.$('[data-testid="account"]');
      assert.equal(await relaunched.getAttribute('data-signed-in'), 'false', 'a relaunch claims a sign-in that has ended');
      assert.match(await relaunched.getText(), /林晓/);
      assert.equal(await pendingCount(browser), waiting);
      await browser.$('[data-testid="nav-inbox"]').click();
      await browser.$('[data-testid="inbox-row"]').waitForDisplayed();
      const rows = [];
      for (const r of await browser.$$('[data-testid="inbox-row"]')) rows.push(await textOf(r));
      assert.ok(rows.some((t) => /约个产品评审会/.test(t)), `the inbox rows lost their conversation titles: ${rows}`);
      await shot(browser, '39-relaunched-kept');
    } finally {
      await browser.deleteSession();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

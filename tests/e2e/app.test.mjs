// The real app, end to end, in demo mode: what a new user does in their first minutes.
// Screenshots of each step land in tests/e2e/artifacts/.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import {
  freshDataDir,
  launch,
  send,
  shot,
  signInThroughCard,
  startDriver,
  waitForReply,
} from './harness.mjs';

let driver;
before(async () => {
  driver = await startDriver();
});
after(() => driver?.stop());

async function newConversation(browser) {
  await browser.$('[data-testid="new-session"]').click();
  await browser.waitUntil(async () => (await browser.$$('[data-testid="item-user"]').length) === 0, {
    timeoutMsg: 'the new conversation is not empty',
  });
}

async function pendingCount(browser) {
  const badge = browser.$('[data-testid="inbox-count"]');
  if (!(await badge.isExisting())) return 0;
  const text = (await badge.getText()).trim();
  return text === '' ? 0 : Number(text);
}

describe('a new user in demo mode', () => {
  let browser;
  let dataDir;
  before(async () => {
    dataDir = await freshDataDir('flow');
    browser = await launch(driver, dataDir);
  });
  after(async () => {
    await browser?.deleteSession();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the demo banner says it runs on the emulator', async () => {
    const banner = browser.$('[data-testid="demo-banner"]');
    await banner.waitForDisplayed();
    assert.match(await banner.getText(), /演示|Demo/);
    await shot(browser, '01-first-start');
  });

  test('the agenda asks for a permission; signing in resumes the call', async () => {
    await send(browser, '明天我有什么安排？');
    await signInThroughCard(browser, '02-agenda');
    await waitForReply(browser, '明天的日程我看过了');
    const status = await browser.$('[data-testid="account"]').getText();
    assert.match(status, /林晓/, 'the status bar names the signed-in user');
    await shot(browser, '03-agenda-after-sign-in');
  });

  test('a proposed meeting waits for approval; approving creates it', async () => {
    await send(browser, '帮我约个产品评审会');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed();
    assert.match(await card.getText(), /产品评审会/);
    assert.match(await card.getText(), /张伟/, 'attendees by name, not open_id');
    await shot(browser, '04-approval-card');
    await card.$('[data-testid="approve"]').click();
    // Creating an event needs one more permission than reading: a second auth card.
    await signInThroughCard(browser, '05-create');
    await waitForReply(browser, '已创建「产品评审会」');
    await shot(browser, '06-approved-and-created');
  });

  test('a rejection with a reason reaches the assistant', async () => {
    await newConversation(browser);
    await send(browser, '帮我约个产品评审会');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed();
    await card.$('[data-testid="reject"]').click();
    const reason = card.$('[data-testid="reject-reason"]');
    await reason.waitForDisplayed();
    await reason.setValue('改到周五再约');
    await shot(browser, '07-reject-with-reason');
    await card.$('[data-testid="reject-confirm"]').click();
    await waitForReply(browser, '这次先不创建');
    await shot(browser, '08-rejected');
  });

  test('two proposals approved at once from the inbox', async () => {
    for (let i = 0; i < 2; i++) {
      await newConversation(browser);
      await send(browser, '帮我约个产品评审会');
      await browser.$('[data-testid="approval-card"]').waitForDisplayed();
    }
    await browser.waitUntil(async () => (await pendingCount(browser)) === 2, {
      timeoutMsg: 'the inbox badge does not count two',
    });
    await browser.$('[data-testid="nav-inbox"]').click();
    const rows = await browser.$$('[data-testid="inbox-row"]');
    assert.equal(rows.length, 2);
    for (const row of rows) await row.$('[data-testid="inbox-select"]').click();
    await shot(browser, '09-inbox-two-selected');
    await browser.$('[data-testid="approve-selected"]').click();
    await browser.waitUntil(
      async () => (await browser.$$('[data-testid="inbox-row"]').length) === 0,
      { timeoutMsg: 'the approved rows are still in the inbox' },
    );
    assert.equal(await pendingCount(browser), 0);
    await shot(browser, '10-inbox-empty');
  });
});

describe('a pending approval survives quitting the app', () => {
  test('quit with an approval pending, relaunch, approve, and it completes', async () => {
    const dataDir = await freshDataDir('restart');
    let browser = await launch(driver, dataDir);
    await send(browser, '帮我约个产品评审会');
    await browser.$('[data-testid="approval-card"]').waitForDisplayed();
    await shot(browser, '11-pending-before-quit');
    await browser.deleteSession();

    browser = await launch(driver, dataDir);
    try {
      const card = browser.$('[data-testid="approval-card"]');
      await card.waitForDisplayed();
      assert.match(await card.getText(), /产品评审会/);
      assert.equal(await pendingCount(browser), 1);
      await shot(browser, '12-pending-after-relaunch');
      await card.$('[data-testid="approve"]').click();
      await signInThroughCard(browser, '13-after-relaunch');
      await waitForReply(browser, '已创建「产品评审会」');
      assert.equal(await pendingCount(browser), 0);
      await shot(browser, '14-completed-after-relaunch');
    } finally {
      await browser.deleteSession();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

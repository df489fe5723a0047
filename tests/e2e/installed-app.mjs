// The app as a user installs it (scripts/test-installed): the binary the .deb put on the system
// (FEISHU_COMPANION_APP, /usr/bin/feishu-companion), started with no arguments, so it keeps its
// data where an installed app does (HOME, which the script points at a fresh folder), in demo
// mode as on any first start. A short walk: the first paint, a question, an approval.
//
// Not named *.test.mjs: scripts/e2e runs the development build's tests, this file runs only
// against an installed package.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  APP,
  launch,
  send,
  shot,
  signInThroughCard,
  startDriver,
  waitForReply,
  writeSettings,
} from './harness.mjs';

const DESKTOP_FILE = process.env.FEISHU_COMPANION_DESKTOP_FILE;

/** The X windows of the display, as xwininfo lists them: `"title": ("instance" "Class")`. */
function windowClasses() {
  return new Promise((resolve, reject) => {
    execFile('xwininfo', ['-root', '-tree'], (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
  });
}

describe('the installed app, on its first start', () => {
  let driver;
  let browser;
  before(async () => {
    assert.ok(APP.startsWith('/usr/'), `run against the installed binary, not ${APP}`);
    // Only the redirect port and the time zone are set beforehand; everything else is the
    // installed app's own first start.
    await writeSettings(path.join(homedir(), '.config', 'feishu-companion'));
    driver = await startDriver();
    browser = await launch(driver, null);
  });
  after(async () => {
    await browser?.deleteSession();
    driver?.stop();
  });

  test('the first window paints, in demo mode', async () => {
    const banner = browser.$('[data-testid="demo-banner"]');
    await banner.waitForDisplayed();
    assert.match(await banner.getText(), /演示|Demo/);
    await shot(browser, 'installed-01-first-start');
  });

  test("the window's class is the desktop entry's StartupWMClass", async () => {
    assert.ok(DESKTOP_FILE, 'FEISHU_COMPANION_DESKTOP_FILE names the installed desktop entry');
    const entry = readFileSync(DESKTOP_FILE, 'utf8');
    const wmClass = entry.match(/^StartupWMClass=(.+)$/m)?.[1];
    assert.ok(wmClass, 'the desktop entry has a StartupWMClass');
    const tree = await windowClasses();
    const line = tree.split('\n').find((l) => l.includes('Feishu Companion'));
    assert.ok(line, `no window titled Feishu Companion in:\n${tree}`);
    const [, instance, klass] = line.match(/\("([^"]*)" "([^"]*)"\)/) ?? [];
    assert.ok(
      [instance, klass].includes(wmClass),
      `the window's WM_CLASS is ("${instance}" "${klass}"), the desktop entry says ${wmClass}`,
    );
  });

  test('ask, approve, and the meeting is created', async () => {
    await send(browser, '帮我约个产品评审会');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed();
    assert.match(await card.getText(), /产品评审会/);
    await shot(browser, 'installed-02-approval-card');
    await card.$('[data-testid="approve"]').click();
    await signInThroughCard(browser, 'installed-03');
    await waitForReply(browser, '已创建「产品评审会」');
    await shot(browser, 'installed-04-created');
  });
});

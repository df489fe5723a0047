// MCP servers in the real app, demo mode: Settings → Tools · MCP servers lists the built-in
// Feishu Docs server; a local server (the official filesystem server from the npm registry) is
// added with a secret, started and its tools listed; then the assistant's MCP write (a weekly
// report written through Feishu's docs server) waits on an approval card, is approved, asks for
// the permission it needs on the same call, and is written once after the sign-in.
// Screenshots: tests/e2e/artifacts/mcp-*.png.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { freshDataDir, launch, send, shot, signInThroughCard, startDriver, step, waitForReply } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const FILESYSTEM = path.join(here, '../mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');

let driver;
before(async () => {
  driver = await startDriver();
});
after(() => driver?.stop());

describe('MCP servers', () => {
  test('a server is added and started; an MCP write is approved, signed in for and written once', async () => {
    const dataDir = await freshDataDir('mcp');
    const files = mkdtempSync(path.join(tmpdir(), 'fc-e2e-mcp-files-'));
    const browser = await launch(driver, dataDir);
    try {
      await browser.$('[data-testid="nav-settings"]').click();
      const section = browser.$('[data-testid="mcp-settings"]');
      await section.waitForExist();
      await section.scrollIntoView();
      const builtin = browser.$('[data-testid="mcp-server"][data-id="feishu"]');
      await builtin.waitForDisplayed();
      assert.match(await builtin.getText(), /飞书文档/);

      // Add the filesystem server: node, its script and the folder it may touch; one secret.
      await browser.$('[data-testid="mcp-add"]').click();
      const form = browser.$('[data-testid="mcp-form"]');
      await form.waitForDisplayed();
      await form.$('[data-testid="mcp-name"]').setValue('Files');
      await form.$('[data-testid="mcp-command"]').setValue('node');
      // One argument a line; WebKitWebDriver drops a newline inside setValue, so Enter is a key.
      const argsBox = form.$('[data-testid="mcp-args"]');
      await argsBox.setValue(FILESYSTEM);
      await browser.keys('Enter');
      await argsBox.addValue(files);
      await form.$('[data-testid="mcp-env-add"]').click();
      await form.$('[data-testid="mcp-secret-name"]').setValue('FILES_TOKEN');
      await form.$('[data-testid="mcp-secret-value"]').setValue('e2e-secret');
      await shot(browser, 'mcp-01-add-form');
      await form.$('[data-testid="mcp-save"]').click();
      const row = browser.$('[data-testid="mcp-server"][data-id="files"]');
      await row.waitForDisplayed();
      step('server saved');

      await row.$('[data-testid="mcp-start"]').click();
      await browser.waitUntil(async () => (await row.getAttribute('data-phase')) === 'running', {
        timeout: 30000,
        timeoutMsg: 'the filesystem server never ran',
      });
      const count = await row.$('[data-testid="mcp-tool-count"]').getText();
      assert.match(count, /\d+/);
      assert.ok(Number(count.match(/\d+/)[0]) >= 10, count);
      // A start that lists tools opens the list by itself.
      await row.$('[data-testid="mcp-tools"]').waitForDisplayed();
      await row.scrollIntoView();
      await shot(browser, 'mcp-02-server-running');

      // The assistant writes through Feishu's docs server: an MCP write, held for approval.
      await browser.$('[data-testid="new-session"]').click();
      await send(browser, '帮我写一份周报');
      const card = browser.$('[data-testid="approval-card"]');
      await card.waitForDisplayed({ timeout: 30000 });
      const words = await card.getText();
      assert.match(words, /MCP/);
      assert.match(words, /飞书文档|feishu/);
      await shot(browser, 'mcp-03-approval-card');
      await card.$('[data-testid="approve"]').click();
      step('approved');

      // The same call then needs the docs permission: the auth card, the sign-in, and it runs.
      await signInThroughCard(browser, 'mcp-04');
      await waitForReply(browser, '周报已经写进你的飞书文档', 40000);
      await shot(browser, 'mcp-05-written');
    } finally {
      await browser.deleteSession();
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(files, { recursive: true, force: true });
    }
  });
});

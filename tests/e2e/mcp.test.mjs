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

/** The official conformance suite's OAuth-protected MCP server (its authorization page answers at
 *  once with a code, as a user who already consented would see), on Node.js 22 from bootstrap. */
async function protectedServer() {
  const { spawn } = await import('node:child_process');
  const { existsSync } = await import('node:fs');
  const node = [path.join(here, '../../tools/node22/bin/node'), path.join(here, '../../tools/node/bin/node')].find(existsSync) ?? 'node';
  const cli = path.join(here, '../mcp/node_modules/@modelcontextprotocol/conformance/dist/index.js');
  const child = spawn(node, [cli, 'client', '--scenario', 'auth/metadata-default'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/Server URL: (\S+)/);
      if (m) resolve(m[1]);
    });
    child.on('exit', () => reject(new Error(`the suite's server stopped: ${out}`)));
  });
  return { url, stop: () => child.kill('SIGTERM') };
}

describe('a remote MCP server that asks for a sign-in', () => {
  test('is added, asks to sign in, is signed in through the sign-in window and lists its tools', async () => {
    const server = await protectedServer();
    const dataDir = await freshDataDir('mcp-remote');
    const browser = await launch(driver, dataDir);
    try {
      await browser.$('[data-testid="nav-settings"]').click();
      await browser.$('[data-testid="mcp-settings"]').waitForExist();
      await browser.$('[data-testid="mcp-add"]').click();
      const form = browser.$('[data-testid="mcp-form"]');
      await form.waitForDisplayed();
      await form.$('[data-testid="mcp-name"]').setValue('Notes');
      await form.$('[data-testid="mcp-transport-http"]').click();
      await form.$('[data-testid="mcp-url"]').setValue(server.url);
      await form.$('[data-testid="mcp-save"]').click();
      const row = browser.$('[data-testid="mcp-server"][data-id="notes"]');
      await row.waitForDisplayed();
      // Started at once to list its tools, it answers 401: the row offers its sign-in.
      const signIn = row.$('[data-testid="mcp-sign-in"]');
      await signIn.waitForDisplayed({ timeout: 30000 });
      await row.scrollIntoView();
      await shot(browser, 'mcp-06-remote-asks-to-sign-in');
      await signIn.click();
      step('sign-in started');
      // The sign-in window shows the server's authorization page, which hands the code to the
      // app's listener; then the server lists its tool.
      await browser.waitUntil(async () => (await row.getAttribute('data-phase')) === 'running', {
        timeout: 40000,
        timeoutMsg: 'the remote server never ran after the sign-in',
      });
      assert.match(await row.$('[data-testid="mcp-tool-count"]').getText(), /1/);
      await row.scrollIntoView();
      await shot(browser, 'mcp-07-remote-signed-in');
    } finally {
      await browser.deleteSession();
      server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

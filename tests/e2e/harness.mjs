// Drives the real desktop app: tauri-driver in front of WebKitWebDriver, the app binary launched
// per scenario on a fresh data folder in demo mode (the built-in Feishu emulator and scripted
// model), under the Xvfb display the caller provides (scripts/e2e runs this under xvfb-run).
//
// Only the main webview is reachable over WebDriver, so a sign-in is completed the way the
// user's click on 授权 would: over HTTP against the emulator's consent page, whose redirect lands
// on the app's loopback listener. The embedded window's own restrictions are tested in Rust.

import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { remote } from 'webdriverio';

const here = import.meta.dirname;
const root = path.resolve(here, '../..');
export const APP =
  process.env.FEISHU_COMPANION_APP ?? path.join(root, 'target/debug/feishu-companion');
export const ARTIFACTS = path.join(here, 'artifacts');
const NATIVE_DRIVER = process.env.WEBKIT_WEBDRIVER ?? '/usr/bin/WebKitWebDriver';

const started = Date.now();
/** Logs a step with the seconds since the run started, so a slow step shows in CI's log. */
export function step(message) {
  console.log(`  [${((Date.now() - started) / 1000).toFixed(1)} s] ${message}`);
}

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port, ms = 15000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${ms} ms`);
}

/** Starts tauri-driver; `stop()` ends it. */
export async function startDriver() {
  const port = await freePort();
  const nativePort = await freePort();
  const child = spawn(
    'tauri-driver',
    ['--port', String(port), '--native-port', String(nativePort), '--native-driver', NATIVE_DRIVER],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
      // WebKitGTK under Xvfb: no GPU, so no DMA-BUF renderer and no compositing.
      env: {
        ...process.env,
        WEBKIT_DISABLE_DMABUF_RENDERER: '1',
        WEBKIT_DISABLE_COMPOSITING_MODE: '1',
        RUST_LOG: process.env.RUST_LOG ?? 'info',
      },
    },
  );
  // tauri-driver spawns WebKitWebDriver on the native port at start, and a session requested
  // before that one listens fails with "Connection refused" (seen on a loaded CI machine).
  await waitForPort(port);
  await waitForPort(nativePort);
  return {
    port,
    stop: () => child.kill('SIGTERM'),
  };
}

/** Starts a helper binary (an emulator, the model server) and answers its first line of output;
 *  `stop()` ends it. */
export function spawnLine(program, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.once('error', reject);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve({ line: out.split('\n')[0], stop: () => child.kill('SIGTERM') });
    });
  });
}

/** A fresh data folder whose settings pin the redirect port and the time zone (plus `extra`). */
export async function freshDataDir(name, extra = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), `fc-e2e-${name}-`));
  await writeSettings(path.join(dir, 'config'), extra);
  return dir;
}

/** Writes settings.json into `configDir`: a free redirect port, Chinese, Shanghai time (plus `extra`). */
export async function writeSettings(configDir, extra = {}) {
  mkdirSync(configDir, { recursive: true });
  const redirectPort = await freePort();
  writeFileSync(
    path.join(configDir, 'settings.json'),
    JSON.stringify({
      language: 'zh',
      feishu: { redirect_port: redirectPort },
      time_zone: 'Asia/Shanghai',
      ...extra,
    }),
  );
}

/**
 * Launches the app on `dataDir` and returns the WebDriver session on its main window. With
 * `dataDir` null the app keeps its data where an installed app does: the user's config and data
 * folders under HOME. `application` is the binary (an installed one, for the packaging test).
 */
export async function launch(driver, dataDir, { application = APP } = {}) {
  const browser = await remote({
    hostname: '127.0.0.1',
    port: driver.port,
    logLevel: 'error',
    connectionRetryCount: 0,
    waitforTimeout: 20000,
    capabilities: {
      'tauri:options': { application, args: dataDir ? ['--data-dir', dataDir] : [] },
      // WebKitWebDriver speaks classic WebDriver; no BiDi session.
      'wdio:enforceWebDriverClassic': true,
    },
  });
  try {
    await browser.$('[data-testid="composer"]').waitForDisplayed({ timeout: 30000 });
  } catch (e) {
    // The caller never gets the session to end: end it here, or the app and the driver stay up
    // and the test run never exits (it hung until killed when the UI was missing from the build).
    await browser.deleteSession().catch(() => {});
    throw e;
  }
  return browser;
}

/**
 * Saves a screenshot of the whole X display as an artifact: the app's real windows as a person
 * sees them, the embedded sign-in window included when it is open. (WebKitWebDriver's own
 * screenshot also stalls for a minute once a second webview of the app has closed.)
 */
/** Runs `body` against the app launched on a fresh data folder (`extra` settings merged in), then
 *  ends the session and deletes the folder, whatever happened. */
export async function withApp(driver, name, extra, body) {
  const dataDir = await freshDataDir(name, extra);
  const browser = await launch(driver, dataDir);
  try {
    await body(browser);
  } finally {
    await browser.deleteSession();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function shot(browser, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  try {
    await run('import', ['-window', 'root', file]);
  } catch {
    await browser.saveScreenshot(file);
  }
  step(`screenshot ${name}`);
}

function run(command, args) {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: 15000 }, (error) => (error ? reject(error) : resolve()));
  });
}

/** Presses Allow on the emulator's consent page and follows the redirect to the app. */
export async function consent(authorizeUrl) {
  const page = await fetch(authorizeUrl);
  if (!page.ok) throw new Error(`the authorize page answered HTTP ${page.status}`);
  const html = await page.text();
  const requestId = html.match(/name="request_id" value="([^"]+)"/)?.[1];
  if (!requestId) throw new Error('the authorize page has no consent form');
  const decision = await fetch(new URL('/open-apis/authen/v1/authorize/decision', authorizeUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `request_id=${encodeURIComponent(requestId)}&decision=allow`,
    redirect: 'manual',
  });
  const location = decision.headers.get('location');
  if (!location) throw new Error(`the consent answered HTTP ${decision.status} without a redirect`);
  const back = await fetch(location);
  if (!back.ok) throw new Error(`the app's listener answered HTTP ${back.status}`);
}

/** Types a message in the composer and sends it. */
export async function send(browser, text) {
  const composer = browser.$('[data-testid="composer"]');
  await composer.waitForEnabled();
  await composer.setValue(text);
  await browser.$('[data-testid="send"]').click();
  step(`sent «${text}»`);
}

/** Waits until some assistant entry contains `text`; returns all assistant text. */
export async function waitForReply(browser, text, timeout = 30000) {
  let seen = '';
  await browser.waitUntil(
    async () => {
      const items = await browser.$$('[data-testid="item-assistant"]');
      const texts = [];
      for (const item of items) texts.push(await item.getText());
      seen = texts.join('\n---\n');
      return seen.includes(text);
    },
    { timeout, timeoutMsg: `no assistant reply containing «${text}»; saw:\n${seen}` },
  );
  step(`reply «${text}» seen`);
  return seen;
}

/** Signs in through the auth card on screen, completing the consent over HTTP. */
export async function signInThroughCard(browser, name) {
  const card = browser.$('[data-testid="auth-card"]');
  await card.waitForDisplayed();
  await shot(browser, `${name}-auth-card`);
  await card.$('[data-testid="sign-in"]').click();
  const link = card.$('[data-testid="open-in-browser"]');
  await browser.waitUntil(async () => Boolean(await link.getAttribute('data-url')), {
    timeoutMsg: 'the auth card never showed the sign-in URL',
  });
  // Let the sign-in window paint the consent page, which WebDriver cannot see, before the shot.
  await new Promise((r) => setTimeout(r, 1500));
  await shot(browser, `${name}-auth-waiting`);
  await consent(await link.getAttribute('data-url'));
  step('consent given');
}

/**
 * Signs in the way cards from Feishu need (they go to the signed-in person): asks for the agenda,
 * whose auth card appears, and gives consent over HTTP. Answers the demo's Feishu (the emulator's
 * origin), where those cards arrive.
 */
export async function signInForCards(browser) {
  await send(browser, '明天我有什么安排？');
  const auth = browser.$('[data-testid="auth-card"]');
  await auth.waitForDisplayed();
  await auth.$('[data-testid="sign-in"]').click();
  const link = auth.$('[data-testid="open-in-browser"]');
  await browser.waitUntil(async () => Boolean(await link.getAttribute('data-url')), {
    timeoutMsg: 'the auth card never showed the sign-in URL',
  });
  const authorizeUrl = await link.getAttribute('data-url');
  const emulator = new URL(authorizeUrl).origin;
  step(`the demo's Feishu is at ${emulator}`);
  await consent(authorizeUrl);
  await waitForReply(browser, '明天的日程我看过了');
  return emulator;
}

// Serves ui/dist on a random loopback port and opens the app in the system Chromium with the fake
// backend injected before any app script runs.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, after } from 'node:test';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const dist = path.resolve(here, '../dist');
export const artifacts = path.resolve(here, 'artifacts');
const fakeSource = fs.readFileSync(path.join(here, 'fake-backend.js'), 'utf8');

const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png', '.json': 'application/json' };

export async function startServer() {
  if (!fs.existsSync(path.join(dist, 'index.html'))) throw new Error('ui/dist is missing: run `npm run build` first');
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    let file = path.normalize(path.join(dist, decodeURIComponent(url.pathname)));
    if (url.pathname === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (!file.startsWith(dist)) {
      res.writeHead(403).end();
      return;
    }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
    fs.readFile(file, (err, data) => {
      if (err) {
        res.writeHead(404).end('not found');
        return;
      }
      res.writeHead(200, {
        'content-type': types[path.extname(file)] ?? 'application/octet-stream',
        // The CSP the desktop shell will use, roughly: nothing inline may run.
        'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
      });
      res.end(data);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return { server, url: `http://127.0.0.1:${port}/` };
}

export async function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** A page with the fake backend (`opts` go to window.__FAKE_OPTS__), loaded and ready. */
export async function openApp(browser, url, { opts = {}, locale = 'zh-CN', colorScheme = 'light', width = 1280, height = 800 } = {}) {
  const context = await browser.newContext({ locale, colorScheme, viewport: { width, height }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  await page.addInitScript((o) => {
    window.__FAKE_OPTS__ = o;
  }, opts);
  await page.addInitScript({ content: fakeSource });
  await page.goto(url);
  await page.waitForSelector('[data-ready="true"]');
  page.errors = errors;
  return page;
}

/** Serves the app and launches Chromium before the calling test file's tests, closes both after them, and
 *  returns `open(options)`: `openApp` on that browser and server, with the same options. */
export function useApp() {
  let srv, browser;
  before(async () => {
    srv = await startServer();
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    srv?.server.close();
  });
  return (options) => openApp(browser, srv.url, options);
}

export async function shot(page, name) {
  fs.mkdirSync(artifacts, { recursive: true });
  await page.screenshot({ path: path.join(artifacts, name + '.png') });
}

/** Polls `fn` in the page until it returns a truthy value. */
export async function until(page, fn, arg, timeout = 5000) {
  await page.waitForFunction(fn, arg, { timeout });
}

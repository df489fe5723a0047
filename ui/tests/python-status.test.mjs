// The Python sandbox is prepared at start when there are Python files: someone with them sees it in the
// status bar wherever they are (their tools reach the assistant only once it is ready), and the
// word goes away when it is; someone without Python files is never told about it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

test('while the sandbox is prepared, the status bar says so, then stops saying it', async () => {
  const page = await open({ opts: { python: { preparingMs: 4000 } } });
  const status = page.getByTestId('python-status');
  await status.waitFor();
  assert.match(await status.innerText(), /正在准备 Python… \d+ 秒/);
  assert.equal(await status.getAttribute('data-state'), 'preparing');
  await shot(page, '44-python-preparing-zh');
  await status.waitFor({ state: 'detached', timeout: 10000 });
  assert.deepEqual(page.errors, []);
});

test('clicking it opens Settings; a failure stays, in English too', async () => {
  const page = await open({ opts: { python: { failed: true } }, locale: 'en-US' });
  const status = page.getByTestId('python-status');
  await status.waitFor();
  assert.match(await status.innerText(), /Python unavailable/);
  assert.match(await status.getAttribute('title'), /wasm component is damaged/);
  await status.click();
  await page.getByTestId('sandbox-state').waitFor();
  assert.match(await page.getByTestId('sandbox-state').innerText(), /cannot start: wasm component is damaged/);
  await shot(page, '44-python-failed-en');
  assert.deepEqual(page.errors, []);
});

test('without Python files nothing is said about the sandbox', async () => {
  const page = await open({});
  await page.getByTestId('model').waitFor();
  // The bar has asked about the sandbox and had its answer rendered before we look.
  await page.waitForFunction(() => window.__fake.commandsCalled('assistant').length > 0);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  assert.equal(await page.getByTestId('python-status').count(), 0);
});

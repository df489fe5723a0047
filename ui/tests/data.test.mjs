import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

const locked = {
  secrets_locked:
    'the secrets in /home/u/.local/share/feishu-companion/companion.db were encrypted with master key k1-0123456789abcdef, but the key file holds only k1-fedcba9876543210.',
  unreadable: [
    { name: 'feishu.app_secret', label: { zh: '飞书应用的 App Secret', en: 'Feishu App Secret' }, problem: 'locked' },
    { name: 'deepseek_api_key', label: { zh: 'DeepSeek 的 API 密钥', en: 'DeepSeek API key' }, problem: 'locked' },
  ],
  sign_in_problem: null,
  database: { state: 'ok' },
  reset_deletes: [
    { what: { zh: '数据库', en: 'The database: every conversation' }, path: '/home/u/.local/share/feishu-companion/companion.db' },
    { what: { zh: '设置', en: 'Settings' }, path: '/home/u/.config/feishu-companion/settings.json' },
  ],
};

test('a locked vault is explained in Settings and forgetting the secrets clears it', async () => {
  const page = await open({ locale: 'en-US', opts: { data: locked } });
  await page.getByTestId('nav-settings').click();
  const alert = page.getByTestId('secrets-locked');
  await alert.waitFor();
  assert.match(await alert.innerText(), /cannot be read/);
  assert.match(await alert.innerText(), /k1-0123456789abcdef/);
  await page.getByTestId('data-section').scrollIntoViewIfNeeded();
  await shot(page, '20-settings-data-locked-en');
  await page.getByTestId('forget-secrets').click();
  const confirm = page.getByTestId('forget-confirm');
  assert.match(await confirm.innerText(), /Conversations, pending approvals, rules and the audit trail are kept/);
  await page.getByTestId('forget-do').click();
  await page.getByTestId('data-note').waitFor();
  assert.match(await page.getByTestId('data-note').innerText(), /secrets forgotten/);
  assert.equal(await page.getByTestId('secrets-locked').count(), 0);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('forget_secrets'))).length, 1);
  assert.deepEqual(page.errors, []);
});

test('reset names every file it deletes before anything is deleted', async () => {
  const page = await open({ locale: 'zh-CN' });
  await page.getByTestId('nav-settings').click();
  await page.getByTestId('database-check').waitFor();
  assert.match(await page.getByTestId('database-check').innerText(), /数据库完好/);
  await page.getByTestId('reset-app').click();
  const confirm = page.getByTestId('reset-confirm');
  await confirm.waitFor();
  const text = await confirm.innerText();
  assert.match(text, /companion\.db/);
  assert.match(text, /settings\.json/);
  assert.match(text, /master\.key/);
  assert.equal(await page.evaluate(() => window.__fake.resetRequested()), false, 'nothing before the confirmation');
  await confirm.scrollIntoViewIfNeeded();
  await shot(page, '21-settings-reset-confirm-zh');
  await page.getByTestId('reset-do').click();
  await page.waitForFunction(() => window.__fake.resetRequested());
  assert.deepEqual(page.errors, []);
});

test('when the data cannot be opened, the error screen offers a reset behind a confirmation', async () => {
  const page = await open({ locale: 'en-US', opts: { startupError: 'the database /data/companion.db is not a Feishu Companion database: it holds tables this app never makes: moz_places.' } });
  await page.getByTestId('startup-error').waitFor();
  await page.getByTestId('startup-reset').click();
  const confirm = page.getByTestId('startup-reset-confirm');
  assert.match(await confirm.innerText(), /database .* settings file .* key file/s);
  assert.equal(await page.evaluate(() => window.__fake.resetRequested()), false);
  await shot(page, '22-startup-error-reset-en');
  await page.getByTestId('startup-reset-do').click();
  await page.waitForFunction(() => window.__fake.resetRequested());
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

test('the language switch changes the strings at once and is saved', async () => {
  const page = await open({ locale: 'zh-CN' });
  assert.match(await page.getByTestId('nav-inbox').innerText(), /待审批/);
  await page.getByTestId('nav-settings').click();
  await page.getByTestId('language').selectOption('en');
  await page.waitForFunction(() => document.querySelector('[data-testid="nav-inbox"]').textContent.includes('Approvals'));
  assert.match(await page.getByTestId('new-session').innerText(), /New conversation/);
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'en');
  const saves = await page.evaluate(() => window.__fake.commandsCalled('save_settings'));
  assert.equal(saves.at(-1).args.settings.language, 'en');
  await page.getByTestId('language').selectOption('zh');
  await page.waitForFunction(() => document.querySelector('[data-testid="nav-inbox"]').textContent.includes('待审批'));
});

test('the theme switch applies dark at once', async () => {
  const page = await open({ locale: 'en-US', colorScheme: 'light' });
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');
  await page.getByTestId('nav-settings').click();
  await page.getByTestId('theme').selectOption('dark');
  await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
  assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), 'rgb(26, 26, 26)');
  await shot(page, '12-settings-dark-en');
});

test('settings validate inline, compute the redirect URL live, and save section by section with one Save each', async () => {
  const page = await open({ locale: 'en-US' });
  await page.getByTestId('nav-settings').click();
  const url = page.getByTestId('redirect-url');
  assert.equal(await url.inputValue(), 'http://127.0.0.1:53682/callback');
  // Nothing changed: nothing to save.
  for (const section of ['model', 'feishu', 'approvals']) assert.equal(await page.getByTestId(`save-${section}`).isDisabled(), true, section);
  await page.getByTestId('redirect-port').fill('8080');
  assert.equal(await url.inputValue(), 'http://127.0.0.1:8080/callback');
  await page.getByTestId('redirect-port').fill('80');
  await page.getByText('Choose a port between 1024 and 65535').waitFor();
  assert.equal(await page.getByTestId('save-feishu').isDisabled(), true, 'an invalid field blocks its own section');
  await page.getByTestId('redirect-port').fill('8080');
  await page.getByTestId('app-id').fill('app_123');
  await page.getByText('An App ID starts with cli_').waitFor();
  await page.getByTestId('app-id').fill('cli_abc');
  await page.getByTestId('preset').selectOption('custom');
  await page.getByText('A base URL is required for a custom provider').waitFor();
  assert.equal(await page.getByTestId('save-model').isDisabled(), true);
  assert.equal(await page.getByTestId('save-feishu').isDisabled(), false, "the model's error does not block Feishu's Save");
  await page.getByTestId('base-url').fill('http://127.0.0.1:9000/v1');
  await page.getByTestId('savebar-model').getByTestId('unsaved').waitFor();
  await shot(page, '13a-settings-unsaved-en');

  // Saving the Feishu section saves only its fields (and the secret typed into it).
  await page.getByTestId('app-secret').fill('s3cret');
  await page.getByTestId('save-feishu').click();
  await page.getByTestId('savebar-feishu').getByTestId('saved-note').waitFor();
  let s = (await page.evaluate(() => window.__fake.commandsCalled('save_settings'))).at(-1).args.settings;
  assert.equal(s.feishu.redirect_port, 8080);
  assert.equal(s.feishu.app_id, 'cli_abc');
  assert.equal(s.model.preset, 'deepseek', 'the model section is not saved by Feishu\'s Save');
  assert.deepEqual((await page.evaluate(() => window.__fake.commandsCalled('set_app_secret')))[0].args, { secret: 's3cret' });
  await page.waitForFunction(() => document.querySelector('[data-testid="secret-state"]').textContent.includes('Saved'));
  assert.equal(await page.getByTestId('app-secret').inputValue(), '', 'the secret leaves the form once stored');
  // The model section still holds its unsaved edit, and saves it with its key.
  await page.getByTestId('savebar-model').getByTestId('unsaved').waitFor();
  await page.getByTestId('api-key').fill('sk-test');
  await page.getByTestId('save-model').click();
  await page.getByTestId('savebar-model').getByTestId('saved-note').waitFor();
  s = (await page.evaluate(() => window.__fake.commandsCalled('save_settings'))).at(-1).args.settings;
  assert.equal(s.model.preset, 'custom');
  assert.equal(s.model.base_url, 'http://127.0.0.1:9000/v1');
  assert.equal(s.feishu.app_id, 'cli_abc', 'what was saved before stays');
  assert.equal(s.approval_expiry_minutes, 1440);
  assert.deepEqual((await page.evaluate(() => window.__fake.commandsCalled('set_model_key')))[0].args, { preset: 'custom', key: 'sk-test' });
  assert.equal(await page.getByTestId('save-model').isDisabled(), true, 'saved: nothing left to save');
  // Rules: revoke greys the row.
  await page.getByTestId('revoke').click();
  await page.locator('[data-testid="rule-row"].revoked').waitFor();
  await shot(page, '13-settings-en');
});

test('audit: filter by kind, open an entry, export CSV and show it in the folder', async () => {
  const page = await open({ locale: 'zh-CN' });
  await page.getByTestId('nav-audit').click();
  await page.getByTestId('audit-row').first().waitFor();
  await page.getByTestId('kind-approval.').click();
  // Rows name the kind in words; the raw kind stays in the chip's tooltip.
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="audit-row"] .chip')].every((c) => c.title.startsWith('approval.')));
  const chip = await page.locator('[data-testid="audit-row"] .chip').first().innerText();
  assert.ok(['请求批准', '已批准', '已拒绝', 'Approval requested', 'Approved', 'Rejected'].includes(chip), chip);
  const q = (await page.evaluate(() => window.__fake.commandsCalled('audit'))).at(-1).args.query;
  assert.equal(q.kind_prefix, 'approval.');
  await page.getByTestId('audit-row').first().click();
  await page.getByTestId('audit-detail').waitFor();
  assert.match(await page.getByTestId('audit-detail').innerText(), /"kind": "approval\./);
  await page.getByTestId('export-csv').click();
  await page.getByTestId('export-result').waitFor();
  assert.match(await page.getByTestId('export-result').innerText(), /feishu-companion-audit\.csv/);
  await page.getByTestId('reveal').click();
  await page.waitForFunction(() => window.__fake.commandsCalled('reveal_path').length === 1);
  const ex = (await page.evaluate(() => window.__fake.commandsCalled('export_audit')))[0].args;
  assert.equal(ex.format, 'csv');
  assert.equal(ex.query.kind_prefix, 'approval.');
  await shot(page, '14-audit-zh');
  await page.keyboard.press('Escape');
  assert.equal(await page.getByTestId('drawer').count(), 0);
});

test('account drawer after sign-in shows the permissions', async () => {
  const page = await open({ locale: 'zh-CN', opts: { signedIn: true } });
  assert.match(await page.getByTestId('account').innerText(), /张三/);
  await page.getByTestId('account').click();
  await page.getByTestId('account-panel').waitFor();
  assert.match(await page.getByTestId('account-panel').innerText(), /保持登录状态/);
  await shot(page, '15-account-zh');
  await page.getByTestId('sign-out').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="account"]').textContent.includes('未登录'));
});

test('a core that cannot open shows why instead of the app', async () => {
  const page = await open({ locale: 'en-US', opts: { startupError: 'the database at /data/companion.db is from a newer version' } });
  assert.match(await page.getByTestId('startup-error').innerText(), /could not start[\s\S]*newer version/);
  assert.equal(await page.getByTestId('composer').count(), 0);
});

test('the shell hears that the first frame is painted', async () => {
  const page = await open();
  await page.waitForFunction(() => window.__fake.commandsCalled('ui_ready').length === 1);
});

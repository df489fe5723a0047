// Updating the app: the status bar says a new version exists, the dialog shows its notes, and
// nothing is installed until the user presses Install; checks can be turned off in Settings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

const notes = '- 审批卡片显示参会人的姓名\n- Fixes the inbox count after a restart\n<img src=x onerror="window.__pwned=1">';

test('a new version shows in the status bar; its notes come before any install', async () => {
  const page = await open({ opts: { update: '0.2.0', updateNotes: notes } });
  const notice = page.getByTestId('update-available');
  await notice.waitFor();
  assert.match(await notice.innerText(), /新版本 0\.2\.0 可用/);
  await notice.click();
  const dialog = page.getByTestId('update-dialog');
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /当前版本 0\.1\.0，可更新到 0\.2\.0/);
  // The notes are shown as the release wrote them, as text: markup in them is not rendered.
  assert.equal(await page.getByTestId('update-notes').innerText(), notes);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await shot(page, '30-update-prompt');
  // Opening the dialog installed nothing.
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('install_update'))).length, 0);

  await page.getByTestId('update-install').click();
  const restart = page.getByTestId('update-restart');
  await restart.waitFor();
  assert.match(await restart.innerText(), /已安装 0\.2\.0，重启后生效/);
  assert.equal(await dialog.count(), 0, 'the dialog closes once installed');
  await shot(page, '31-update-installed');
  await restart.click();
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('restart_to_update'))).length, 1);
  assert.deepEqual(page.errors, []);
});

test('Later closes the dialog and keeps the notice; nothing is downloaded', async () => {
  const page = await open({ opts: { update: '0.2.0' }, locale: 'en-US' });
  await page.getByTestId('update-available').click();
  await page.getByTestId('update-dialog').waitFor();
  assert.match(await page.getByTestId('update-notes').innerText(), /comes without notes/);
  await page.getByTestId('update-later').click();
  assert.equal(await page.getByTestId('update-dialog').count(), 0);
  assert.match(await page.getByTestId('update-available').innerText(), /Version 0\.2\.0 is available/);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('install_update'))).length, 0);
  assert.deepEqual(page.errors, []);
});

test('nothing newer: the status bar says nothing about updates', async () => {
  const page = await open({});
  await page.getByTestId('model').waitFor();
  assert.equal(await page.getByTestId('update-available').count(), 0);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('update_status'))).length, 1);
});

test('update checks can be turned off in Settings, and the choice is saved', async () => {
  const page = await open({});
  await page.getByTestId('nav-settings').click();
  const box = page.getByTestId('check-for-updates');
  await box.waitFor();
  assert.equal(await box.isChecked(), true, 'on by default');
  await box.uncheck();
  await page.waitForFunction(() => window.__fake.commandsCalled('save_settings').length > 0);
  const saved = await page.evaluate(() => window.__fake.commandsCalled('save_settings').at(-1).args.settings);
  assert.equal(saved.check_for_updates, false);
  assert.deepEqual(page.errors, []);
});

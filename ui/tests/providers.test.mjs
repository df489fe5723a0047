// The model-provider features as the user sees them: a thinking model's reasoning collapsed
// under 思考过程 and never in the answer, an answer cut off at its limit said in words, the
// turn's token usage, a rate limit's countdown, and the model picker of Settings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

test('reasoning is collapsed apart from the answer; a cut-off answer and the turn usage are said in words', async () => {
  const page = await open();
  await page.getByTestId('composer').fill('明天的安排（思考）');
  await page.getByTestId('composer').press('Enter');
  const reasoning = page.getByTestId('item-reasoning');
  await reasoning.waitFor();
  assert.match(await reasoning.innerText(), /思考过程/);
  // Collapsed: the reasoning text is not visible until opened, and is not in the answer.
  assert.equal(await reasoning.evaluate((d) => d.open), false);
  assert.equal(await page.getByText('先查日历').isVisible(), false);
  const answer = page.getByTestId('item-assistant');
  assert.doesNotMatch(await answer.innerText(), /先查日历/);
  assert.match(await page.getByTestId('item-stopped').innerText(), /长度上限/);
  assert.match(await page.getByTestId('turn-usage').innerText(), /输入 1,200 tokens，输出 512（其中思考 380）/);
  await shot(page, '40-reasoning-collapsed-zh');
  await reasoning.locator('summary').click();
  await page.getByText('先查日历').waitFor();
  await shot(page, '41-reasoning-open-zh');
  assert.deepEqual(page.errors, []);
});

test('a rate limit counts down to when the user can try again', async () => {
  const page = await open({ locale: 'en-US', opts: { retryMs: 2500 } });
  await page.getByTestId('composer').fill('rate limit please');
  await page.getByTestId('composer').press('Enter');
  const notice = page.getByTestId('item-model-error');
  await notice.waitFor();
  assert.match(await notice.innerText(), /limiting requests/);
  assert.match(await page.getByTestId('retry-countdown').innerText(), /try again in [123] s/);
  await shot(page, '42-rate-limited-en');
  await page.getByText('You can try again now.').waitFor({ timeout: 5000 });
  assert.deepEqual(page.errors, []);
});

test('the model picker lists the service’s models with the default preselected', async () => {
  const page = await open();
  await page.getByTestId('nav-settings').click();
  await page.getByTestId('preset').selectOption('openai');
  await page.getByTestId('load-models').click();
  const picker = page.getByTestId('model-picker');
  await picker.waitFor();
  assert.equal(await picker.inputValue(), 'gpt-4o-mini');
  assert.match(await picker.innerText(), /gpt-4o-mini（默认）/);
  await shot(page, '43-model-picker-zh');
  await picker.selectOption('another-model');
  const calls = await page.evaluate(() => window.__fake.commandsCalled('list_models'));
  assert.deepEqual(calls[0].args, { preset: 'openai', baseUrl: null });
  await page.getByTestId('save-model').click();
  await page.getByTestId('savebar-model').getByTestId('saved-note').waitFor();
  const saved = (await page.evaluate(() => window.__fake.commandsCalled('save_settings'))).at(-1).args.settings;
  assert.equal(saved.model.model, 'another-model');
  assert.equal(saved.model.preset, 'openai');
  assert.deepEqual(page.errors, []);
});

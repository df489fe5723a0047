import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

test('the inbox holds 1,000 approvals, renders a window of them, and J/K/A work', async () => {
  const page = await open({ opts: { pending: 1000, sessions: 3 } });
  assert.equal(await page.getByTestId('inbox-count').innerText(), '1000');
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().waitFor();
  const rendered = await page.getByTestId('inbox-row').count();
  assert.ok(rendered > 5 && rendered < 60, `rendered ${rendered} rows`);
  await shot(page, '10-inbox-1000-zh');

  // Scroll far down: still a window, and rows from the middle of the list.
  const t0 = Date.now();
  await page.getByTestId('inbox-list').evaluate((el) => (el.scrollTop = 64 * 600));
  await page.waitForFunction(() => document.querySelector('[data-testid="inbox-row"][data-call-id="p600"]'));
  assert.ok(Date.now() - t0 < 2000);
  assert.ok((await page.getByTestId('inbox-row').count()) < 60);
  await page.getByTestId('inbox-list').evaluate((el) => (el.scrollTop = 0));
  await page.waitForFunction(() => document.querySelector('[data-testid="inbox-row"][data-call-id="p0"]'));

  // Keyboard: J moves down twice, K up once, A approves the row under the cursor.
  // A click on nothing in particular (the banner's tag; at 700 px the banner now has example chips).
  await page.locator('[data-testid="demo-banner"] .tag').click();
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  await page.keyboard.press('k');
  assert.equal(await page.locator('[data-testid="inbox-row"][data-cursor="true"]').getAttribute('data-call-id'), 'p1');
  await page.keyboard.press('a');
  await page.waitForFunction(() => !document.querySelector('[data-testid="inbox-row"][data-call-id="p1"]'));
  const decide = await page.evaluate(() => window.__fake.commandsCalled('decide'));
  assert.equal(decide.length, 1);
  assert.equal(decide[0].args.callId, 'p1');
  assert.deepEqual(decide[0].args.decision, { kind: 'approve' });
  assert.equal(await page.getByTestId('inbox-count').innerText(), '999');
  // The cursor stays in place: now on the next row.
  assert.equal(await page.locator('[data-testid="inbox-row"][data-cursor="true"]').getAttribute('data-call-id'), 'p2');
  assert.deepEqual(page.errors, []);
});

test('batch approve sends the selected ids through decide_many', async () => {
  const page = await open({ opts: { pending: 30, sessions: 3 }, locale: 'en-US' });
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().waitFor();
  await page.getByTestId('inbox-select').nth(0).check();
  await page.getByTestId('inbox-select').nth(2).check();
  // X toggles the cursor row (the first): it was checked, so X unchecks it; J then X checks the second.
  // A click on nothing in particular (the banner's tag; at 700 px the banner now has example chips).
  await page.locator('[data-testid="demo-banner"] .tag').click();
  await page.keyboard.press('x');
  await page.keyboard.press('j');
  await page.keyboard.press('x');
  assert.match(await page.getByTestId('approve-selected').innerText(), /Approve selected \(2\)/);
  await page.getByTestId('inbox-row').nth(1).click();
  await page.getByTestId('drawer').waitFor();
  await page.getByTestId('drawer').getByTestId('approval-card').waitFor();
  await shot(page, '11-inbox-selected-drawer-en');
  await page.keyboard.press('Escape');
  assert.equal(await page.getByTestId('drawer').count(), 0);
  await page.getByTestId('approve-selected').click();
  await page.waitForFunction(() => window.__fake.commandsCalled('decide_many').length === 1);
  const dm = await page.evaluate(() => window.__fake.commandsCalled('decide_many'));
  assert.deepEqual(
    dm[0].args.decisions.map((d) => d.call_id).sort(),
    ['p1', 'p2'],
  );
  assert.deepEqual(dm[0].args.decisions[0].decision, { kind: 'approve' });
  await page.waitForFunction(() => document.querySelector('[data-testid="inbox-count"]').textContent.trim() === '28');
});

test('R in the inbox asks for a reason in the drawer and rejects with it', async () => {
  const page = await open({ opts: { pending: 5, sessions: 3 }, locale: 'en-US' });
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().waitFor();
  // A click on nothing in particular (the banner's tag; at 700 px the banner now has example chips).
  await page.locator('[data-testid="demo-banner"] .tag').click();
  await page.keyboard.press('r');
  const reason = page.getByTestId('drawer').getByTestId('reject-reason');
  await reason.waitFor();
  await reason.fill('not now');
  await reason.press('Enter');
  await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 1);
  const d = await page.evaluate(() => window.__fake.commandsCalled('decide'));
  assert.deepEqual(d[0].args, { callId: 'p0', decision: { kind: 'reject', reason: 'not now' } });
});

test('an empty inbox says nothing waits', async () => {
  const page = await open({ locale: 'en-US' });
  await page.getByTestId('nav-inbox').click();
  assert.match(await page.getByTestId('inbox-empty').innerText(), /Nothing waits for you/);
});

test('a long conversation (10,000 entries) renders only a window', async () => {
  const page = await open({ opts: { longTimeline: 10000 } });
  await page.getByTestId('timeline').waitFor();
  await page.waitForTimeout(200);
  const n = await page.locator('[data-vkey]').count();
  assert.ok(n > 3 && n < 120, `rendered ${n}`);
  // It opens at the bottom: the last message is on screen.
  await page.getByText('消息 #9999', { exact: true }).waitFor();
});

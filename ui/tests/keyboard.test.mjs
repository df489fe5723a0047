// Keyboard: Esc closes one thing at a time (menu, reason field, editor, drawer) and never loses typed text;
// focus moves into the menu and back, and comes back from the drawer; the focus ring shows on every state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

const focused = (page) => page.evaluate(() => document.activeElement?.dataset.testid ?? document.activeElement?.tagName);

async function withCard(page) {
  await page.getByTestId('composer').fill('tell the team');
  await page.getByTestId('composer').press('Enter');
  const card = page.getByTestId('approval-card');
  await card.waitFor();
  return card;
}

test('the always-allow menu takes focus, moves with arrows, and Esc closes it back onto its button', async () => {
  const page = await open({ locale: 'en-US' });
  const card = await withCard(page);
  await card.getByTestId('always-allow').focus();
  await page.keyboard.press('Enter');
  await card.getByRole('menu').waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.choice), 'tool');
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.choice), 'key:chat_id');
  await page.keyboard.press('ArrowUp');
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.choice), 'tool');
  await shot(page, '20-menu-keyboard-en');
  await page.keyboard.press('Escape');
  assert.equal(await card.getByRole('menu').count(), 0);
  assert.equal(await focused(page), 'always-allow');
  // Opened with the mouse, Esc closes it too (focus is in the menu, not left on the button).
  await card.getByTestId('always-allow').click();
  await card.getByRole('menu').waitFor();
  await page.keyboard.press('Escape');
  assert.equal(await card.getByRole('menu').count(), 0);
  // Tabbing out of the menu closes it.
  await card.getByTestId('always-allow').click();
  await card.getByRole('menu').waitFor();
  for (let i = 0; i < 6; i++) await page.keyboard.press('Tab');
  assert.equal(await card.getByRole('menu').count(), 0);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('decide'))).length, 0);
});

test('Esc closes the reason field and keeps its text, the edited arguments and the composer', async () => {
  const page = await open({ locale: 'en-US' });
  const card = await withCard(page);
  await page.getByTestId('composer').fill('a draft for later');
  await card.getByTestId('edit').click();
  await card.getByTestId('edit-tab-json').click();
  await card.getByTestId('edit-args').fill('{ "chat_id": "oc_product", "text": "Edited" }');
  await card.getByTestId('reject').click();
  await card.getByTestId('reject-reason').fill('Move it to Friday');
  await page.keyboard.press('Escape');
  assert.equal(await card.getByTestId('reject-reason').count(), 0);
  assert.equal(await focused(page), 'reject');
  // The editor stayed open with its text; the composer kept its draft.
  assert.equal(await card.getByTestId('edit-args').inputValue(), '{ "chat_id": "oc_product", "text": "Edited" }');
  assert.equal(await page.getByTestId('composer').inputValue(), 'a draft for later');
  // Reject again: the reason is still there.
  await card.getByTestId('reject').click();
  assert.equal(await card.getByTestId('reject-reason').inputValue(), 'Move it to Friday');
  await page.keyboard.press('Escape');
  // Esc in the editor leaves it; Edit brings the edited text back, and Approve sends it.
  await card.getByTestId('edit-args').focus();
  await page.keyboard.press('Escape');
  assert.equal(await card.getByTestId('edit-args').count(), 0);
  assert.equal(await focused(page), 'edit');
  assert.match(await card.getByTestId('approve').innerText(), /^Approve$/);
  await card.getByTestId('edit').click();
  assert.equal(await card.getByTestId('edit-args').inputValue(), '{ "chat_id": "oc_product", "text": "Edited" }');
  await card.getByTestId('approve').click();
  await page.getByTestId('decision-line').waitFor();
  const d = (await page.evaluate(() => window.__fake.commandsCalled('decide')))[0].args.decision;
  assert.deepEqual(d, { kind: 'approve_edited', args: { chat_id: 'oc_product', text: 'Edited' } });
  assert.equal(await page.getByTestId('composer').inputValue(), 'a draft for later');
});

test('in the drawer, Esc closes the reason field first, then the drawer; edits survive the drawer closing', async () => {
  const page = await open({ opts: { pending: 3, sessions: 3 }, locale: 'en-US' });
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().waitFor();
  await page.locator('body').click({ position: { x: 700, y: 10 } });
  await page.keyboard.press('r');
  const drawer = page.getByTestId('drawer');
  await drawer.getByTestId('reject-reason').waitFor();
  await page.keyboard.type('not now');
  await page.keyboard.press('Escape');
  assert.equal(await drawer.getByTestId('reject-reason').count(), 0);
  assert.equal(await drawer.count(), 1);
  await page.keyboard.press('Escape');
  assert.equal(await drawer.count(), 0);
  // E: edit in the drawer; Esc twice closes the editor and the drawer; E again brings the text back.
  await page.keyboard.press('e');
  await drawer.getByTestId('edit-tab-json').click();
  await drawer.getByTestId('edit-args').waitFor();
  await drawer.getByTestId('edit-args').fill('{ "chat_id": "oc_9", "text": "changed" }');
  await page.keyboard.press('Escape');
  await page.keyboard.press('Escape');
  assert.equal(await drawer.count(), 0);
  await page.keyboard.press('e');
  await drawer.getByTestId('edit-args').waitFor();
  assert.equal(await drawer.getByTestId('edit-args').inputValue(), '{ "chat_id": "oc_9", "text": "changed" }');
  await page.keyboard.press('Escape');
  await page.keyboard.press('r');
  assert.equal(await drawer.getByTestId('reject-reason').inputValue(), 'not now');
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('decide'))).length, 0);
});

test('Esc closes the account drawer without touching the composer, and focus returns to the account button', async () => {
  const page = await open({ opts: { signedIn: true }, locale: 'zh-CN' });
  await page.getByTestId('composer').fill('还没写完的话');
  await page.getByTestId('account').focus();
  await page.keyboard.press('Enter');
  await page.getByTestId('account-panel').waitFor();
  await page.getByTestId('drawer-close').focus();
  await page.keyboard.press('Escape');
  assert.equal(await page.getByTestId('drawer').count(), 0);
  assert.equal(await focused(page), 'account');
  assert.equal(await page.getByTestId('composer').inputValue(), '还没写完的话');
  // From the composer too: the drawer closes, the text stays.
  await page.getByTestId('account').click();
  await page.getByTestId('account-panel').waitFor();
  await page.getByTestId('composer').focus();
  await page.keyboard.press('Escape');
  assert.equal(await page.getByTestId('drawer').count(), 0);
  assert.equal(await page.getByTestId('composer').inputValue(), '还没写完的话');
});

test('Tab walks the approval card in reading order, with a ring that no state hides', async () => {
  const page = await open({ opts: { sessions: 2 }, locale: 'zh-CN' });
  const card = await withCard(page);
  await card.locator('.toggle').focus();
  const order = [];
  for (let i = 0; i < 5; i++) {
    order.push(await page.evaluate(() => document.activeElement?.dataset.testid ?? document.activeElement?.className.split(' ')[0]));
    await page.keyboard.press('Tab');
  }
  assert.deepEqual(order, ['toggle', 'approve', 'edit', 'reject', 'always-allow']);
  // The active conversation row shows the ring when focused from the keyboard.
  await page.getByTestId('new-session').focus();
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  const ring = await page.evaluate(() => {
    const el = document.activeElement;
    const cs = getComputedStyle(el);
    return { id: el.dataset.sessionId, current: el.getAttribute('aria-current'), style: cs.outlineStyle, width: cs.outlineWidth };
  });
  assert.equal(ring.current, 'true');
  assert.equal(ring.style, 'solid');
  assert.equal(ring.width, '2px');
  await shot(page, '21-focus-ring-zh');
});

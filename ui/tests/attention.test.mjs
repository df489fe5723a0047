// The sticky notice for a call that starts to wait where the user is not looking.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

const toast = (page) => page.getByTestId('attention-toast');
const gone = (page) => page.waitForFunction(() => !document.querySelector('[data-testid="attention-toast"]'));
const current = (page, sid) => page.locator(`[data-testid="session-row"][data-session-id="${sid}"][aria-current="true"]`);

test('a call that waits in another conversation shows a notice; its button jumps to the card', async () => {
  const page = await open({ opts: { sessions: 3 } });
  assert.equal(await current(page, 's1').count(), 1);
  const id = await page.evaluate(() => window.__fake.propose({ session_id: 's2' }));
  await toast(page).waitFor();
  assert.match(await toast(page).innerText(), /「本周周报」有一项需要你批准/);
  assert.match(await page.getByTestId('attention-jump').innerText(), /查看/);
  await shot(page, '18-attention-zh');
  await page.getByTestId('attention-jump').click();
  await current(page, 's2').waitFor();
  const card = page.locator(`[data-testid="approval-card"][data-call-id="${id}"]`);
  await card.waitFor();
  assert.ok(await card.isVisible());
  // The card is highlighted, and the notice is gone: the user is looking at it now.
  assert.equal(await page.locator('.entry.hl [data-testid="approval-card"]').getAttribute('data-call-id'), id);
  await gone(page);
  assert.deepEqual(page.errors, []);
});

test('the notice goes away once the call is decided anywhere', async () => {
  const page = await open({ opts: { sessions: 3 }, locale: 'en-US' });
  // Decided elsewhere (another window, a rule): the notice follows.
  const a = await page.evaluate(() => window.__fake.propose({ session_id: 's3' }));
  await toast(page).waitFor();
  assert.match(await toast(page).innerText(), /“安排下周一例会” needs your approval/);
  await page.evaluate((id) => window.__fake.resolve(id), a);
  await gone(page);

  // Shown on the inbox page too; approving it there dismisses it.
  await page.getByTestId('nav-inbox').click();
  const b = await page.evaluate(() => window.__fake.propose({ session_id: 's2' }));
  await toast(page).waitFor();
  assert.match(await toast(page).innerText(), /“本周周报” needs your approval/);
  await page.locator(`[data-testid="inbox-row"][data-call-id="${b}"]`).waitFor();
  await page.locator('body').click({ position: { x: 700, y: 10 } });
  await page.keyboard.press('a');
  await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 1);
  await gone(page);
  assert.equal((await page.evaluate(() => window.__fake.commandsCalled('decide')))[0].args.callId, b);
});

test('no notice for the conversation on screen; other pages do get one', async () => {
  const page = await open({ opts: { sessions: 3 } });
  const a = await page.evaluate(() => window.__fake.propose({ session_id: 's1' }));
  await page.locator(`[data-testid="approval-card"][data-call-id="${a}"]`).waitFor();
  await page.waitForTimeout(300);
  assert.equal(await toast(page).count(), 0);

  // On the settings page the same conversation is out of sight: a notice; going there clears it.
  await page.getByTestId('nav-settings').click();
  await page.evaluate(() => window.__fake.propose({ session_id: 's1', call_id: 'later' }));
  await toast(page).waitFor();
  assert.match(await toast(page).innerText(), /「新对话」有一项需要你批准/);
  await page.locator('[data-testid="session-row"][data-session-id="s1"]').click();
  await gone(page);
  // Leaving again does not bring it back: the user has seen it.
  await page.getByTestId('nav-audit').click();
  await page.waitForTimeout(200);
  assert.equal(await toast(page).count(), 0);
});

test('several waiting calls coalesce into one notice that opens the inbox', async () => {
  const page = await open({ opts: { sessions: 3 } });
  await page.evaluate(() => {
    window.__fake.propose({ session_id: 's2' });
    window.__fake.propose({ session_id: 's3' });
  });
  await page.waitForFunction(() => document.querySelector('[data-testid="attention-toast"]')?.dataset.count === '2');
  assert.equal(await toast(page).count(), 1);
  assert.match(await toast(page).innerText(), /2 项需要你处理/);
  assert.match(await page.getByTestId('attention-jump').innerText(), /打开待审批/);
  await page.getByTestId('attention-jump').click();
  await page.locator('[data-testid="nav-inbox"][aria-current="page"]').waitFor();
  await gone(page);
  assert.equal(await page.getByTestId('inbox-row').count(), 2);
});

test('a sign-in request elsewhere says so; Ctrl+Shift+J jumps to it; long titles are clipped', async () => {
  const page = await open({ opts: { sessions: 3 }, locale: 'en-US', colorScheme: 'dark' });
  await page.evaluate(() => {
    window.__fake.sessions[1].title = '请帮我整理一下第三季度产品路线图评审会议的全部纪要并发给所有参会人员';
    window.__fake.propose({
      session_id: 's2',
      tool: 'list_tasks',
      title: { zh: '查看待办', en: 'Read your tasks' },
      args: {},
      status: 'awaiting_auth',
      requires_approval: false,
      preview: null,
      expires_at: null,
      scopes: [{ scope: 'task:task:read', label: { zh: '查看你的待办', en: 'See your tasks' } }],
    });
  });
  await toast(page).waitFor();
  // The session list refreshes with the long title; the notice clips it and keeps it whole in the tooltip.
  await page.waitForFunction(() => document.querySelector('[data-testid="attention-toast"] .msg')?.textContent.includes('…'));
  const msg = toast(page).locator('.msg');
  assert.match(await msg.innerText(), /^“请帮我整理一下.*…” needs you to sign in$/);
  assert.match(await msg.getAttribute('title'), /发给所有参会人员” needs you to sign in/);
  await shot(page, '19-attention-auth-dark-en');
  const box = await toast(page).boundingBox();
  assert.ok(box.height < 60, `one line: ${box.height}px`);
  await page.keyboard.press('Control+Shift+J');
  await current(page, 's2').waitFor();
  await page.getByTestId('auth-card').waitFor();
  await gone(page);
});

test('jumping to a card in the middle of a long conversation scrolls it into view', async () => {
  const page = await open({ opts: { sessions: 3, longTimeline: 600 } });
  await page.locator('[data-testid="session-row"][data-session-id="s2"]').click();
  await current(page, 's2').waitFor();
  // A call waits in s1, its entry in the middle of 600 messages (as after a restart and a long chat).
  await page.evaluate(() => {
    const f = window.__fake;
    const id = f.propose({ session_id: 's1', call_id: 'mid' });
    const tl = f.timelines.s1;
    const i = tl.findIndex((e) => e.kind === 'tool' && e.call_id === id);
    const [entry] = tl.splice(i, 1);
    tl.splice(300, 0, entry);
  });
  await toast(page).waitFor();
  await page.getByTestId('attention-jump').click();
  await current(page, 's1').waitFor();
  const card = page.locator('[data-testid="approval-card"][data-call-id="mid"]');
  await card.waitFor();
  await page.waitForTimeout(300);
  const inView = await card.evaluate((el) => {
    const r = el.getBoundingClientRect();
    const v = document.querySelector('[data-testid="timeline"]').getBoundingClientRect();
    return r.top >= v.top - 1 && r.bottom <= v.bottom + 1;
  });
  assert.ok(inView, 'the card is on screen');
  assert.equal(await page.locator('.entry.hl [data-testid="approval-card"]').getAttribute('data-call-id'), 'mid');
});

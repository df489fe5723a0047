// Long Chinese titles and a narrow (1024 px) window: nothing overflows its pane, titles clip with an
// ellipsis on one line, and the audit's time column is not cut.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp, shot } from './harness.mjs';

const open = useApp();

const LONG = '请帮我整理一下第三季度产品路线图评审会议的全部纪要并发给所有参会人员，顺便约下周的复盘会';
const titles = [LONG, '本周周报：销售、市场、研发、客服四个部门的进展与下周计划汇总', '安排下周一例会'];

/** Elements whose content is wider than they are without clipping it (real overflow), in the page. */
const overflowing = (page) =>
  page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll('.app *')) {
      const cs = getComputedStyle(el);
      if (cs.display === 'inline' || cs.position === 'fixed' || cs.position === 'absolute') continue;
      if (el.scrollWidth > el.clientWidth + 1 && cs.overflowX === 'visible' && cs.textOverflow !== 'ellipsis') {
        const r = el.getBoundingClientRect();
        if (r.width > 0) bad.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')} ${el.scrollWidth}>${el.clientWidth}`);
      }
    }
    return bad;
  });
const oneLine = (loc) => loc.evaluate((el) => el.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(el).lineHeight));

test('long titles in the sidebar, the conversation header and the inbox stay on one line', async () => {
  const page = await open({ opts: { sessions: 3, titles, pending: 6 }, width: 1024, height: 700 });
  await page.locator('[data-testid="session-row"][data-session-id="s1"]').click();
  const h1 = page.locator('.conv-head h1');
  assert.equal(await h1.innerText(), LONG);
  assert.ok(await oneLine(h1), 'header on one line');
  for (const t of await page.locator('.s-title').all()) assert.ok(await oneLine(t), 'session title on one line');
  assert.deepEqual(await overflowing(page), []);
  await shot(page, '22-long-titles-chat-zh');

  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').first().click();
  await page.getByTestId('drawer').getByTestId('approval-card').waitFor();
  for (const s of await page.locator('.inbox .sum, .inbox .line2').all()) assert.ok(await oneLine(s), 'inbox row lines');
  assert.deepEqual(await overflowing(page), []);
  await shot(page, '23-long-titles-inbox-drawer-zh');
});

test('the audit time column shows the whole time beside the drawer, in Chinese', async () => {
  const page = await open({ opts: { sessions: 3, titles }, width: 1024, height: 700 });
  await page.getByTestId('nav-audit').click();
  await page.getByTestId('audit-row').first().click();
  await page.getByTestId('audit-detail').waitFor();
  const cut = await page.evaluate(() => [...document.querySelectorAll('[data-testid="audit-row"] .c-time')].filter((c) => c.scrollWidth > c.clientWidth).length);
  assert.equal(cut, 0);
  assert.match(await page.locator('[data-testid="audit-row"] .c-time').first().getAttribute('title'), /\d{4}年/);
  await shot(page, '24-audit-drawer-narrow-zh');
});

test('dark theme, English: the inbox with the drawer and the attention notice', async () => {
  const page = await open({ opts: { sessions: 3, titles, pending: 4 }, locale: 'en-US', colorScheme: 'dark', width: 1024, height: 700 });
  await page.getByTestId('nav-inbox').click();
  await page.getByTestId('inbox-row').nth(1).click();
  await page.getByTestId('drawer').getByTestId('approval-card').waitFor();
  await page.evaluate(() => window.__fake.propose({ session_id: 's3' }));
  await page.getByTestId('attention-toast').waitFor();
  assert.deepEqual(await overflowing(page), []);
  await shot(page, '25-inbox-drawer-dark-en');
});

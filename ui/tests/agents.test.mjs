// Connected agents (issue 24) against the fake backend: Settings → Connected agents adds "Claude
// Code", shows its token once with the lines that set it up, forgets it on closing, pauses, chooses
// tools and revokes; then what such an agent asks for, in the inbox and on its approval card (the
// agent named, the command as code, a file edit as a diff), approved, and always allowed for its
// command in its project for a day.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { useApp, shot, artifacts } from './harness.mjs';

const open = useApp();

const lastArgs = (page, cmd) => page.evaluate((c) => window.__fake.commandsCalled(c).at(-1)?.args, cmd);
/** A screenshot of one element (the section, the card), beside the harness's page shots. */
const snap = (locator, name) => locator.screenshot({ path: path.join(artifacts, name + '.png') });

async function openSection(page) {
  await page.getByTestId('nav-settings').click();
  const section = page.getByTestId('agents-settings');
  await section.waitFor();
  await section.scrollIntoViewIfNeeded();
  return section;
}

for (const [locale, lang, scheme] of [
  ['en-US', 'en', 'light'],
  ['zh-CN', 'zh', 'dark'],
]) {
  test(`an agent is added, its token shown once with its setups, then paused, given tools and revoked (${lang}, ${scheme})`, async () => {
    const page = await open({ locale, colorScheme: scheme, height: 1000 });
    const w = lang === 'en'
      ? { warn: /shown this once and never again/, paused: 'Paused', resume: 'Resume', revoked: 'Revoked', custom: 'Chosen by you', def: 'Default: Feishu’s own tools' }
      : { warn: /令牌只显示这一次/, paused: '已暂停', resume: '恢复', revoked: '已撤销', custom: '由你选择', def: '默认：飞书自带工具' };
    const section = await openSection(page);
    assert.equal(await section.getByTestId('agents-url').innerText(), 'http://127.0.0.1:47821/mcp');
    await section.getByTestId('agents-empty').waitFor();

    // Add: a name, then the token, shown once.
    await section.getByTestId('agent-add').click();
    const name = section.getByTestId('agent-name-input');
    assert.equal(await name.getAttribute('placeholder'), 'Claude Code');
    assert.equal(await section.getByTestId('agent-create').isDisabled(), true, 'no agent without a name');
    await name.fill('Claude Code');
    await section.getByTestId('agent-create').click();
    const panel = section.getByTestId('agent-token-panel');
    await panel.waitFor();
    assert.deepEqual(await lastArgs(page, 'add_connected_agent'), { name: 'Claude Code' });
    const token = (await panel.getByTestId('agent-token').innerText()).trim();
    assert.match(token, /^fct_FAKE-TOKEN-NOT-REAL-/);
    assert.match(await panel.getByTestId('agent-token-warning').innerText(), w.warn);
    // The Claude Code setup first, with the token in it.
    const setup = panel.getByTestId('agent-setup');
    assert.equal(await setup.getAttribute('data-client'), 'claude-code');
    const claude = await setup.innerText();
    assert.ok(claude.includes(token), 'the Claude Code lines carry the token');
    assert.match(claude, /claude mcp add --transport http feishu-companion http:\/\/127\.0\.0\.1:47821\/mcp/);
    assert.match(claude, /--permission-prompt-tool mcp__feishu-companion__approve/);
    assert.equal(await setup.evaluate((el) => getComputedStyle(el).whiteSpace), 'pre-wrap');
    assert.deepEqual(
      await panel.getByTestId('agent-setup-tab').evaluateAll((els) => els.map((e) => e.getAttribute('data-client'))),
      ['claude-code', 'codex', 'cursor', 'http'],
    );
    // The agent is listed beside the panel already.
    await section.locator('[data-testid="agent"]').first().waitFor();
    await snap(section, `agents-token-${lang}-${scheme}`);
    // Another client's lines: Codex's, with the same token.
    await panel.locator('[data-testid="agent-setup-tab"][data-client="codex"]').click();
    await page.waitForSelector('[data-testid="agent-setup"][data-client="codex"]');
    assert.ok((await setup.innerText()).includes(`FEISHU_COMPANION_TOKEN = "${token}"`));
    // Copy works (by the Clipboard API or the fallback) and leaves nothing behind in the page.
    await panel.getByTestId('agent-token-copy').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="agent-token-copy"]')?.textContent?.match(/Copied|已复制/));

    // Closing the panel forgets the token: nowhere in the page any more.
    await panel.getByTestId('agent-token-done').click();
    await panel.waitFor({ state: 'detached' });
    assert.equal(await page.evaluate((t) => document.documentElement.outerHTML.includes(t), token), false, 'the token is gone from the page');
    assert.equal(await page.evaluate((t) => [...document.querySelectorAll('input, textarea')].some((e) => e.value.includes(t)), token), false);
    const row = section.locator('[data-testid="agent"]');
    assert.equal(await row.count(), 1);
    assert.equal(await row.getByTestId('agent-name').innerText(), 'Claude Code');
    assert.equal(await row.getAttribute('data-state'), 'active');
    const id = await row.getAttribute('data-id');

    // Pause, then its tools.
    await row.getByTestId('agent-pause').click();
    await page.waitForSelector(`[data-testid="agent"][data-id="${id}"][data-state="paused"]`);
    assert.deepEqual(await lastArgs(page, 'set_connected_agent_paused'), { id, paused: true });
    assert.equal(await row.getByTestId('agent-paused').innerText(), w.paused);
    assert.equal((await row.getByTestId('agent-pause').innerText()).trim(), w.resume);

    await row.getByTestId('agent-tools-toggle').click();
    const tools = row.getByTestId('agent-tools');
    await tools.waitFor();
    assert.equal((await tools.getByTestId('agent-tools-mode').innerText()).trim(), w.def);
    assert.equal(await tools.getByTestId('agent-tools-reset').isDisabled(), true);
    const send = tools.locator('[data-testid="agent-tool"][data-name="send_message"]');
    assert.equal(await send.getByTestId('agent-tool-on').isChecked(), true);
    assert.equal(await send.getByTestId('agent-tool-read').count(), 0, 'a write is not marked a read');
    assert.equal(await tools.locator('[data-testid="agent-tool"][data-name="list_calendar_events"] [data-testid="agent-tool-read"]').count(), 1);
    assert.equal(await tools.locator('[data-testid="agent-tool"][data-name="mcp__github__create_issue"] [data-testid="agent-tool-on"]').isChecked(), false);
    await send.getByTestId('agent-tool-on').uncheck();
    await page.waitForFunction(() => window.__fake.commandsCalled('set_connected_agent_tools').length === 1);
    assert.deepEqual(await lastArgs(page, 'set_connected_agent_tools'), {
      input: { id, tools: ['list_calendar_events', 'search_docs', 'create_calendar_event', 'mcp__feishu__fetch-doc'] },
    });
    await page.waitForFunction((t) => document.querySelector('[data-testid="agent-tools-mode"]')?.textContent?.trim() === t, w.custom);
    assert.equal(await send.getByTestId('agent-tool-on').isChecked(), false);
    await snap(row, `agents-tools-${lang}-${scheme}`);
    await tools.getByTestId('agent-tools-reset').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('set_connected_agent_tools').length === 2);
    assert.deepEqual(await lastArgs(page, 'set_connected_agent_tools'), { input: { id, tools: null } });
    await page.waitForFunction((t) => document.querySelector('[data-testid="agent-tools-mode"]')?.textContent?.trim() === t, w.def);

    // Revoke, after a confirmation: greyed, no actions left.
    await row.getByTestId('agent-revoke').click();
    const confirm = row.getByTestId('agent-revoke-confirm');
    await confirm.waitFor();
    assert.equal(await page.evaluate(() => window.__fake.commandsCalled('revoke_connected_agent').length), 0, 'nothing before the confirmation');
    await snap(row, `agents-revoke-confirm-${lang}-${scheme}`);
    await confirm.getByTestId('agent-revoke-do').click();
    await page.waitForSelector(`[data-testid="agent"][data-id="${id}"][data-state="revoked"]`);
    assert.deepEqual(await lastArgs(page, 'revoke_connected_agent'), { id });
    assert.equal(await row.getByTestId('agent-revoked').innerText(), w.revoked);
    assert.equal(await row.getByTestId('agent-pause').count(), 0);
    assert.equal(await row.getByTestId('agent-revoke').count(), 0);
    assert.ok(Number(await row.evaluate((el) => getComputedStyle(el).opacity)) < 1, 'a revoked agent is greyed');
    assert.deepEqual(page.errors, []);
  });
}

test('revoked agents come last; a server off its usual port says why; a refused name stays beside the form', async () => {
  const page = await open({
    locale: 'en-US',
    opts: {
      agents: [{ name: 'Old laptop', revoked: true }, { name: 'Cursor', paused: true }, { name: 'Codex' }],
      agentsUrl: 'http://127.0.0.1:51234/mcp',
      agentsProblem: 'Port 47821 was taken, so the server listens on 51234: update your agents’ configuration.',
    },
  });
  const section = await openSection(page);
  assert.deepEqual(await section.getByTestId('agent-name').allInnerTexts(), ['Cursor', 'Codex', 'Old laptop']);
  assert.deepEqual(
    await section.getByTestId('agent').evaluateAll((els) => els.map((e) => e.getAttribute('data-state'))),
    ['paused', 'active', 'revoked'],
  );
  assert.equal(await section.getByTestId('agents-url').innerText(), 'http://127.0.0.1:51234/mcp');
  assert.match(await section.getByTestId('agents-problem').innerText(), /Port 47821 was taken/);
  // A name the core refuses (too long for it): its words, beside the form, which stays open.
  await section.getByTestId('agent-add').click();
  await section.getByTestId('agent-name-input').evaluate((el) => el.removeAttribute('maxlength'));
  await section.getByTestId('agent-name-input').fill('x'.repeat(61));
  await section.getByTestId('agent-create').click();
  assert.match(await section.getByTestId('agent-add-error').innerText(), /must be 1 to 60 characters/);
  assert.equal(await section.getByTestId('agent-token-panel').count(), 0);
  await snap(section, 'agents-list-en-light');
  assert.deepEqual(page.errors, []);
});

test('the server not running says so', async () => {
  const page = await open({ locale: 'zh-CN', opts: { agentsUrl: null, agentsProblem: 'could not listen on 127.0.0.1:47821: address in use' } });
  const section = await openSection(page);
  assert.equal(await section.getByTestId('agents-server').getAttribute('data-running'), 'false');
  assert.equal(await section.getByTestId('agents-not-running').innerText(), '服务未运行。');
  assert.match(await section.getByTestId('agents-problem').innerText(), /address in use/);
});

for (const [locale, lang, scheme] of [
  ['zh-CN', 'zh', 'light'],
  ['en-US', 'en', 'dark'],
]) {
  test(`Claude Code's permission request: named in the inbox and on its card, the command as code, approved; then always allowed in its project for a day (${lang}, ${scheme})`, async () => {
    const page = await open({ locale, colorScheme: scheme, opts: { agents: [{ name: 'Claude Code' }], agentRequest: { call_id: 'ag1' } } });
    const from = lang === 'zh' ? '来自 Claude Code' : 'From Claude Code';
    assert.equal(await page.getByTestId('inbox-count').innerText(), '1');
    await page.getByTestId('nav-inbox').click();
    const inboxRow = page.locator('[data-testid="inbox-row"][data-call-id="ag1"]');
    await inboxRow.waitFor();
    assert.equal((await inboxRow.getByTestId('inbox-requester').innerText()).trim(), from);
    await inboxRow.click();
    const card = page.getByTestId('drawer').locator('[data-testid="approval-card"][data-call-id="ag1"]');
    await card.waitFor();
    assert.equal((await card.getByTestId('requester').innerText()).trim(), from);
    assert.equal(await page.getByTestId('drawer-requester').innerText(), 'Claude Code');
    const code = card.getByTestId('field-code');
    assert.equal(await code.innerText(), 'npm test -- --watch=false');
    const style = await code.evaluate((el) => ({ ws: getComputedStyle(el).whiteSpace, font: getComputedStyle(el).fontFamily, overflow: getComputedStyle(el).overflowY }));
    assert.equal(style.ws, 'pre-wrap');
    assert.match(style.font, /mono/i);
    assert.equal(style.overflow, 'auto');
    await shot(page, `agents-inbox-card-${lang}-${scheme}`);
    await snap(card, `agents-card-${lang}-${scheme}`);

    // The always-allow menu offers this command, and this command in this project.
    await card.getByTestId('always-allow').click();
    const choices = card.getByTestId('always-allow-choice');
    assert.deepEqual(await choices.evaluateAll((els) => els.map((e) => e.getAttribute('data-choice'))), ['command', 'command:project'], 'never every request of every agent at once');
    const inProject = card.locator('[data-choice="command:project"]');
    assert.match(await inProject.innerText(), lang === 'zh' ? /在此项目（web-app）中总是允许命令「npm test -- --watch=false」/ : /Always allow “npm test -- --watch=false” in this project \(web-app\)/);
    assert.equal(await inProject.getAttribute('title'), 'tool_name = Bash, command = npm test -- --watch=false, project = /home/u/code/web-app');
    await shot(page, `agents-card-menu-${lang}-${scheme}`);
    await page.keyboard.press('Escape');

    // Approved.
    await card.getByTestId('approve').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 1);
    assert.deepEqual(await lastArgs(page, 'decide'), { callId: 'ag1', decision: { kind: 'approve' } });
    await inboxRow.waitFor({ state: 'detached' });

    // The next request, raised while the user looks at the inbox: the notice names the agent and
    // opens its card here (its session is none of the user's conversations).
    await page.evaluate(() => window.__fake.agentRequest({ call_id: 'ag2' }));
    const toast = page.getByTestId('attention-toast');
    await toast.waitFor();
    assert.match(await toast.innerText(), lang === 'zh' ? /Claude Code 请求你批准/ : /Claude Code asks for your approval/);
    await page.getByTestId('attention-jump').click();
    const card2 = page.getByTestId('drawer').locator('[data-testid="approval-card"][data-call-id="ag2"]');
    await card2.waitFor();
    assert.equal(await page.getByTestId('inbox-list').count(), 1, 'still in Approvals, not in a conversation');
    await card2.getByTestId('always-allow').click();
    await card2.getByTestId('duration-day').click();
    const before = Date.now();
    await card2.locator('[data-choice="command:project"]').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('decide').length === 2);
    const d = await lastArgs(page, 'decide');
    assert.equal(d.callId, 'ag2');
    assert.equal(d.decision.kind, 'always_allow');
    assert.deepEqual(d.decision.constraints, { tool_name: 'Bash', command: 'npm test -- --watch=false', project: '/home/u/code/web-app' });
    assert.ok(Math.abs(d.decision.expires_at - (before + 86_400_000)) < 60_000, 'for a day');
    assert.deepEqual(page.errors, []);
  });
}

test('a file edit asked for by Claude Code reads as a diff; a long command scrolls in its block', async () => {
  for (const [locale, lang, scheme] of [
    ['en-US', 'en', 'light'],
    ['zh-CN', 'zh', 'dark'],
  ]) {
    const page = await open({ locale, colorScheme: scheme, height: 900 });
    await page.getByTestId('nav-inbox').click();
    await page.evaluate(() => {
      const oldS = 'export function total(items) {\n  let sum = 0;\n  for (const i of items) sum += i.price;\n  return sum;\n}';
      const newS = 'export function total(items, tax = 0) {\n  let sum = 0;\n  for (const i of items) sum += i.price * i.qty;\n  return sum * (1 + tax);\n}';
      window.__fake.agentRequest({
        call_id: 'edit1',
        args: { tool_name: 'Edit', input: { file_path: 'src/cart.js', old_string: oldS, new_string: newS }, file_path: 'src/cart.js', project: '/home/u/code/web-app' },
        preview: {
          summary: { zh: '修改文件 src/cart.js', en: 'Edit src/cart.js' },
          risk: 'normal',
          fields: [
            { label: { zh: '文件', en: 'File' }, value: 'src/cart.js' },
            { label: { zh: '项目', en: 'Project' }, value: '/home/u/code/web-app' },
          ],
          changes: [{ field: { zh: '内容', en: 'Text' }, from: oldS, to: newS }],
        },
      });
      const long = Array.from({ length: 40 }, (_, i) => `echo "step ${i + 1}" && ./scripts/build.sh --target=web --verbose`).join('\n');
      window.__fake.agentRequest({ call_id: 'long1', command: long });
    });
    const row = page.locator('[data-testid="inbox-row"][data-call-id="edit1"]');
    await row.waitFor();
    await row.click();
    const card = page.getByTestId('drawer').locator('[data-testid="approval-card"][data-call-id="edit1"]');
    await card.waitFor();
    const diff = card.getByTestId('diff');
    const lines = await diff.locator('.dl').evaluateAll((els) => els.map((e) => [e.classList.contains('del') ? '-' : e.classList.contains('add') ? '+' : ' ', e.textContent.slice(1)]));
    assert.deepEqual(lines.filter(([s]) => s === '-').map(([, t]) => t), ['export function total(items) {', '  for (const i of items) sum += i.price;', '  return sum;']);
    assert.deepEqual(lines.filter(([s]) => s === ' ').map(([, t]) => t), ['  let sum = 0;', '}']);
    assert.equal(lines.filter(([s]) => s === '+').length, 3);
    const colors = await diff.evaluate((el) => ({
      del: getComputedStyle(el.querySelector('.dl.del')).backgroundColor,
      add: getComputedStyle(el.querySelector('.dl.add')).backgroundColor,
    }));
    assert.notEqual(colors.del, colors.add);
    assert.match(await card.locator('.mono-value').first().innerText(), /src\/cart\.js/);
    // A file edit has no command to scope a rule to, and allowing every agent's every request
    // at once is never offered: no "Always allow" at all.
    assert.equal(await card.getByTestId('always-allow').count(), 0);
    await snap(card, `agents-edit-diff-${lang}-${scheme}`);

    await page.locator('[data-testid="inbox-row"][data-call-id="long1"]').click();
    const long = page.getByTestId('drawer').locator('[data-testid="approval-card"][data-call-id="long1"]');
    await long.waitFor();
    const box = await long.getByTestId('field-code').evaluate((el) => ({ scroll: el.scrollHeight, client: el.clientHeight }));
    assert.ok(box.scroll > box.client && box.client <= 300, `the long command scrolls in its block (${JSON.stringify(box)})`);
    await snap(long, `agents-long-command-${lang}-${scheme}`);
    assert.deepEqual(page.errors, []);
  }
});

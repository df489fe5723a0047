// Another agent through the real window (issue 24): the user adds Claude Code in Settings →
// Connected agents, and the REAL Claude Code CLI (npm, tests/agents), pointed at the app with
// --mcp-config and --permission-prompt-tool and at the scripted Anthropic-compatible model
// server, wants to run a shell command. The command waits in the app's inbox, named as Claude
// Code's, and — approving from Feishu being on — on the Feishu card; a tap on the card's Approve
// (through the emulator's hook, as Feishu delivers it) lets it run, exactly once.
// Screenshots: tests/e2e/artifacts/claude-code-{01-agent-added,02-waiting-in-app,03-approved}.png.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { runClaude } from '../agents/claude.mjs';
import { APP, shot, signInForCards, spawnLine, startDriver, step, withApp } from './harness.mjs';

const COMMAND = 'echo approved-in-feishu >> once.txt';

// What the scripted model has Claude do: run the command, then say it is done.
const script = {
  fallback: 'OK.',
  steps: [
    {
      when: { role: 'user', contains: 'once.txt' },
      reply: {
        text: 'I will append the line.',
        tool_calls: [{ name: 'Bash', arguments: { command: COMMAND, description: 'Append a line to once.txt' } }],
      },
    },
    { when: { role: 'tool', tool: 'Bash' }, reply: { text: 'Done: the line is in once.txt.' } },
  ],
};

let driver;
let model;
let work;
before(async () => {
  driver = await startDriver();
  work = mkdtempSync(path.join(tmpdir(), 'fc-e2e-claude-'));
  writeFileSync(path.join(work, 'script.json'), JSON.stringify(script));
  // Built beside the app by scripts/e2e (cargo build -p emulator --bins).
  const bin = path.join(path.dirname(APP), 'model-server');
  model = await spawnLine(bin, ['--script', path.join(work, 'script.json')]);
  step(`the scripted model answers at ${model.line}`);
});
after(() => {
  model?.stop();
  driver?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function json(url, init) {
  const res = await fetch(url, init);
  const body = await res.json();
  assert.ok(res.ok, `${url}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

test("Claude Code's shell command waits in the app and on the Feishu card, and runs once when approved there", async () => {
  const settings = { remote_approval: { enabled: true, when: 'always', away_minutes: 15 } };
  await withApp(driver, 'claude-code', settings, async (browser) => {
    // Cards go to the signed-in person: sign in first.
    const emulator = await signInForCards(browser);

    // Settings → Connected agents: add Claude Code; its token is shown once.
    await browser.$('[data-testid="nav-settings"]').click();
    const section = browser.$('[data-testid="agents-settings"]');
    await section.waitForExist({ timeout: 20000 });
    await section.scrollIntoView();
    await browser.$('[data-testid="agent-add"]').click();
    await browser.$('[data-testid="agent-name-input"]').setValue('Claude Code');
    await browser.$('[data-testid="agent-create"]').click();
    const tokenBox = browser.$('[data-testid="agent-token"]');
    await tokenBox.waitForDisplayed();
    const token = String(await browser.execute(() => {
      const el = document.querySelector('[data-testid="agent-token"]');
      return el.value ?? el.textContent;
    })).trim();
    assert.match(token, /^fca_[0-9a-f]{64}$/);
    const url = String(await browser.execute(() => document.querySelector('[data-testid="agents-url"]').textContent)).trim();
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    await browser.$('[data-testid="agent-token-panel"]').scrollIntoView();
    await shot(browser, 'claude-code-01-agent-added');
    await browser.$('[data-testid="agent-token-done"]').click();
    step(`Claude Code registered; the app serves MCP at ${url}`);

    // The real Claude Code CLI, in a project folder of its own.
    const project = mkdtempSync(path.join(work, 'project-'));
    const running = runClaude({
      prompt: 'Append a line to once.txt, please.',
      mcpConfig: {
        mcpServers: {
          'feishu-companion': { type: 'http', url, headers: { Authorization: `Bearer ${token}` } },
        },
      },
      permissionTool: 'mcp__feishu-companion__approve',
      modelBaseUrl: model.line,
      cwd: project,
      timeoutMs: 180_000,
    });

    // If Claude ends before asking, what it said is the failure's explanation.
    let ended = null;
    running.then((run) => (ended = run));
    // It waits in the app's inbox, named as Claude Code's.
    await browser.$('[data-testid="nav-inbox"]').click();
    const row = browser.$('[data-testid="inbox-row"]');
    try {
      await browser.waitUntil(async () => ended !== null || (await row.isDisplayed()), {
        timeout: 60000,
        timeoutMsg: "Claude Code's command never reached the inbox",
      });
    } catch (e) {
      await shot(browser, 'claude-code-failed-inbox');
      throw e;
    }
    assert.equal(ended, null, `Claude Code ended without waiting: ${JSON.stringify(ended)}`);
    assert.match(await row.$('[data-testid="inbox-requester"]').getText(), /Claude Code/, 'the row names the agent');
    await row.click();
    const card = browser.$('[data-testid="drawer"] [data-testid="approval-card"]');
    await card.waitForDisplayed({ timeout: 10000 });
    await browser.waitUntil(async () => /Claude Code/.test(await card.getText()), {
      timeout: 10000,
      timeoutMsg: 'the card does not say Claude Code asked',
    });
    assert.match(await card.getText(), /once\.txt/, 'the card shows the command');
    assert.equal(existsSync(path.join(project, 'once.txt')), false, 'nothing ran before the decision');

    // …and on the Feishu card.
    let cards = [];
    await browser.waitUntil(
      async () => {
        cards = await json(`${emulator}/_emulator/cards`);
        return cards.some((c) => JSON.stringify(c.card).includes('once.txt'));
      },
      { timeout: 30000, timeoutMsg: 'no card for the command reached Feishu' },
    );
    const feishuCard = cards.find((c) => JSON.stringify(c.card).includes('once.txt'));
    assert.match(JSON.stringify(feishuCard.card), /来自 Claude Code/, 'the Feishu card names the agent');
    await shot(browser, 'claude-code-02-waiting-in-app');

    const outcome = await json(`${emulator}/_emulator/cards/${feishuCard.message_id}/click`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'approve' }),
    });
    assert.equal(outcome.toast?.type, 'success', JSON.stringify(outcome.response));
    step('approved on the Feishu card');

    const run = await running;
    const why = `exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;
    assert.equal(run.code, 0, why);
    assert.equal(run.json?.result, 'Done: the line is in once.txt.', why);
    assert.equal(readFileSync(path.join(project, 'once.txt'), 'utf8'), 'approved-in-feishu\n', 'ran exactly once');
    await browser.waitUntil(async () => (await browser.$$('[data-testid="inbox-row"]')).length === 0, {
      timeout: 20000,
      timeoutMsg: 'the decided request stayed in the inbox',
    });
    await shot(browser, 'claude-code-03-approved');
  });
});

// Settings → Tools · MCP servers against the fake backend: add a stdio server with a secret, keep
// the secret on a later save, start it, mark a tool, read its log, import a pasted configuration
// with a warning, remove a server; what the core refuses stays beside the form. Then a running MCP
// call's progress on its card, and an MCP approval card with a high risk and long arguments; a
// remote server that asks for its own sign-in, signed in from its row.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { useApp } from './harness.mjs';

const open = useApp();

const words = {
  zh: { idle: '未启动', running: '运行中', starting: '正在启动…', tools: '2 个工具', stored: '已保存', added: '已添加：memory', restart: '重启' },
  en: { idle: 'Not started', running: 'Running', starting: 'Starting…', tools: '2 tools', stored: 'Stored', added: 'Added: memory', restart: 'Restart' },
};

const lastArgs = (page, cmd) => page.evaluate((c) => window.__fake.commandsCalled(c).at(-1)?.args, cmd);

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`an MCP server is added, started, its tool marked, its log read; a pasted config is imported and a server removed (${lang})`, async () => {
    const w = words[lang];
    const page = await open({ locale, opts: { mcpStartMs: 400 } });
    await page.getByTestId('nav-settings').click();
    const section = page.getByTestId('mcp-settings');
    await section.waitFor();
    // The built-in Feishu Docs server is there from the start, and cannot be edited or removed.
    const builtin = section.locator('[data-testid="mcp-server"][data-id="feishu"]');
    await builtin.waitFor();
    assert.equal(await builtin.getByTestId('mcp-edit').count(), 0);
    assert.equal(await builtin.getByTestId('mcp-remove').count(), 0);

    // Add: a stdio server with its arguments one per line and an environment variable.
    await section.getByTestId('mcp-add').click();
    const form = section.getByTestId('mcp-form');
    await form.getByTestId('mcp-name').fill('Files');
    await form.getByTestId('mcp-command').fill('npx');
    await form.getByTestId('mcp-args').fill('-y\n@modelcontextprotocol/server-filesystem\n\n/home/u/Documents');
    await form.getByTestId('mcp-env-add').click();
    await form.getByTestId('mcp-secret-name').fill('API_KEY');
    await form.getByTestId('mcp-secret-value').fill('sk-test-123');
    assert.equal(await form.getByTestId('mcp-secret-value').getAttribute('type'), 'password', 'the value is masked');
    await form.getByTestId('mcp-save').click();
    await form.waitFor({ state: 'detached' });
    const added = await lastArgs(page, 'save_mcp_server');
    assert.deepEqual(added.input, {
      id: null, name: 'Files', transport: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/home/u/Documents'],
      cwd: null, url: '', env: [{ name: 'API_KEY', value: 'sk-test-123' }], headers: [], enabled: true, trusted: false, timeout_secs: 60,
    });
    const row = section.locator('[data-testid="mcp-server"][data-id="files"]');
    await row.waitFor();
    assert.equal(await row.getByTestId('mcp-phase').innerText(), w.idle);
    assert.match(await row.innerText(), /stdio/);
    assert.equal(await row.getByTestId('mcp-missing').count(), 0, 'its value is stored');

    // Edit and save without typing the value again: the stored value is kept (null), not blanked.
    await row.getByTestId('mcp-edit').click();
    const edit = section.getByTestId('mcp-form');
    await edit.waitFor();
    assert.equal(await edit.getByTestId('mcp-secret-state').innerText(), w.stored);
    assert.equal(await edit.getByTestId('mcp-secret-value').inputValue(), '', 'a stored value never comes back');
    await edit.getByTestId('mcp-timeout').fill('90');
    await edit.getByTestId('mcp-save').click();
    await edit.waitFor({ state: 'detached' });
    const resaved = await lastArgs(page, 'save_mcp_server');
    assert.equal(resaved.input.id, 'files');
    assert.deepEqual(resaved.input.env, [{ name: 'API_KEY', value: null }]);
    assert.equal(resaved.input.timeout_secs, 90);
    assert.deepEqual(await page.evaluate(() => window.__fake.mcpVault()), ['files/env/API_KEY']);

    // Start: the button says it is starting while the core waits, then the server runs with two tools.
    await row.getByTestId('mcp-start').click();
    await page.waitForFunction(
      (t) => document.querySelector('[data-testid="mcp-server"][data-id="files"] [data-testid="mcp-start"]')?.textContent?.includes(t),
      w.starting,
    );
    await page.waitForSelector('[data-testid="mcp-server"][data-id="files"][data-phase="running"]');
    assert.equal(await row.getByTestId('mcp-phase').innerText(), w.running);
    assert.equal(await row.getByTestId('mcp-tool-count').innerText(), w.tools);
    assert.equal(await row.getByTestId('mcp-server-info').innerText(), 'files-server 1.2.0');
    assert.equal((await row.getByTestId('mcp-start').innerText()).trim(), w.restart);
    const tools = row.getByTestId('mcp-tool');
    assert.equal(await tools.count(), 2, 'the tools show once it lists them');
    const del = row.locator('[data-testid="mcp-tool"][data-name="delete_file"]');
    assert.equal(await del.getByTestId('mcp-hint-destructive').count(), 1);
    assert.match(await del.innerText(), /mcp__files__delete_file/);

    // The user marks delete_file as running without approval.
    const free = del.getByTestId('mcp-tool-free');
    assert.equal(await free.isChecked(), false);
    await free.check();
    await page.waitForFunction(() => window.__fake.commandsCalled('set_mcp_tool_read').length === 1);
    assert.deepEqual(await lastArgs(page, 'set_mcp_tool_read'), { id: 'files', tool: 'delete_file', read: true });
    await page.waitForSelector('[data-testid="mcp-tool"][data-name="delete_file"][data-approval="user"]');
    assert.equal(await free.isChecked(), true);

    // The log: the server's stderr in a monospace box.
    await row.getByTestId('mcp-log-toggle').click();
    const log = row.getByTestId('mcp-log');
    await page.waitForFunction(() => /Secure MCP Filesystem Server/.test(document.querySelector('[data-testid="mcp-log"]')?.textContent ?? ''));
    assert.match(await log.evaluate((el) => getComputedStyle(el).fontFamily), /mono/i);
    assert.equal(await log.evaluate((el) => getComputedStyle(el).overflowY), 'auto');

    // Paste a configuration: one server added, one skipped with a warning.
    await section.getByTestId('mcp-paste').click();
    await section.getByTestId('mcp-paste-text').fill(
      JSON.stringify({ mcpServers: { memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] }, empty: { args: ['x'] } } }),
    );
    await section.getByTestId('mcp-paste-import').click();
    const result = section.getByTestId('mcp-import-result');
    await result.waitFor();
    assert.match(await result.innerText(), new RegExp(w.added));
    assert.match(await result.getByTestId('mcp-import-warning').innerText(), /“empty” was skipped/);
    const memory = section.locator('[data-testid="mcp-server"][data-id="memory"]');
    await memory.waitFor();

    // Remove it, after a confirmation.
    await memory.getByTestId('mcp-remove').click();
    await memory.getByTestId('mcp-remove-confirm').waitFor();
    assert.equal(await page.evaluate(() => window.__fake.commandsCalled('remove_mcp_server').length), 0, 'nothing removed before the confirmation');
    await memory.getByTestId('mcp-remove-do').click();
    await memory.waitFor({ state: 'detached' });
    assert.deepEqual(await lastArgs(page, 'remove_mcp_server'), { id: 'memory' });
    assert.equal(await section.locator('[data-testid="mcp-server"][data-id="files"]').count(), 1, 'the others stay');
    assert.deepEqual(page.errors, []);
  });
}

test('the list follows the core: a server that fails on its own shows failed with its error', async () => {
  const page = await open({ locale: 'zh-CN' });
  await page.getByTestId('nav-settings').click();
  const row = page.locator('[data-testid="mcp-server"][data-id="feishu"]');
  await row.waitFor();
  const reads = await page.evaluate(() => window.__fake.commandsCalled('mcp_servers').length);
  await page.evaluate(() => window.__fake.mcpSet('feishu', { phase: 'failed', error: 'connection refused (os error 111)' }));
  await page.waitForSelector('[data-testid="mcp-server"][data-id="feishu"][data-phase="failed"]');
  assert.equal(await row.getByTestId('mcp-phase').innerText(), '失败');
  assert.equal(await row.getByTestId('mcp-server-error').innerText(), 'connection refused (os error 111)');
  assert.equal(await page.evaluate(() => window.__fake.commandsCalled('mcp_servers').length), reads + 1, 'read once per event');
  assert.deepEqual(page.errors, []);
});

test('the form checks what it can, and what the core refuses stays beside it with nothing lost', async () => {
  const page = await open({ locale: 'en-US', opts: { mcpRefuse: 'nosuch-server' } });
  await page.getByTestId('nav-settings').click();
  const section = page.getByTestId('mcp-settings');
  await section.getByTestId('mcp-add').click();
  const form = section.getByTestId('mcp-form');
  await form.getByTestId('mcp-save').click();
  assert.match(await form.innerText(), /Give the server a name/);
  assert.match(await form.innerText(), /Enter the program to run/);
  assert.equal(await page.evaluate(() => window.__fake.commandsCalled('save_mcp_server').length), 0, 'nothing sent while the page sees a problem');
  await form.getByTestId('mcp-name').fill('Mine');
  await form.getByTestId('mcp-command').fill('nosuch-server');
  await form.getByTestId('mcp-env-add').click();
  await form.getByTestId('mcp-secret-name').fill('TOKEN');
  await form.getByTestId('mcp-secret-value').fill('t-1');
  await form.getByTestId('mcp-save').click();
  const err = form.getByTestId('mcp-save-error');
  await err.waitFor();
  assert.match(await err.innerText(), /nosuch-server was not found/);
  assert.equal(await form.getByTestId('mcp-name').inputValue(), 'Mine');
  assert.equal(await form.getByTestId('mcp-command').inputValue(), 'nosuch-server');
  assert.equal(await form.getByTestId('mcp-secret-value').inputValue(), 't-1', 'the typed secret is kept for another try');
  // An HTTP server: the URL is checked before it is sent.
  await form.getByTestId('mcp-transport-http').check();
  await form.getByTestId('mcp-url').fill('mcp.example.com');
  await form.getByTestId('mcp-save').click();
  assert.match(await form.innerText(), /An http:\/\/ or https:\/\/ address/);
  assert.deepEqual(page.errors, []);
});

test('a running MCP call shows its server’s progress on its card, and the bar goes when the call ends', async () => {
  const page = await open({ locale: 'en-US' });
  const id = await page.evaluate(() =>
    window.__fake.propose({
      call_id: 'mcp1',
      tool: 'mcp__files__write_file',
      title: { zh: 'MCP · files · write_file', en: 'MCP · files · write_file' },
      status: 'dispatching',
      pending: false,
      verdict: 'approved',
      decided_by: 'user',
      args: { path: '/home/u/a.txt', content: 'hello' },
      preview: {
        summary: { zh: '通过 MCP 服务器「Files」调用「write_file」', en: 'Call “write_file” on the MCP server Files' },
        risk: 'normal',
        fields: [],
        changes: [],
      },
    }),
  );
  const card = page.locator(`[data-testid="item-tool"][data-call-id="${id}"]`);
  await card.waitFor();
  assert.equal(await card.getByTestId('mcp-progress').count(), 0, 'no bar before the server reports');
  await page.evaluate((c) => window.__fake.mcpProgress(c, 1, 4, 'Writing chunk 1 of 4'), id);
  const bar = card.getByTestId('mcp-progress');
  await bar.waitFor();
  assert.equal(await bar.getAttribute('data-determinate'), 'true');
  assert.equal(await bar.getByRole('progressbar').getAttribute('aria-valuenow'), '25');
  assert.equal(await bar.getByTestId('mcp-progress-message').innerText(), 'Writing chunk 1 of 4');
  await card.screenshot({ path: '/tmp/ui-shots/mcp-progress-determinate.png' }).catch(() => {});
  // Without a total the bar moves without a share.
  await page.evaluate((c) => window.__fake.mcpProgress(c, 7, null, 'Still working'), id);
  await page.waitForSelector(`[data-call-id="${id}"] [data-testid="mcp-progress"][data-determinate="false"]`);
  assert.equal(await bar.getByRole('progressbar').getAttribute('aria-valuenow'), null);
  await card.screenshot({ path: '/tmp/ui-shots/mcp-progress-indeterminate.png' }).catch(() => {});
  // Another call's report does not land here.
  await page.evaluate(() => window.__fake.mcpProgress('other', 1, 2, 'Elsewhere'));
  assert.equal(await bar.getByTestId('mcp-progress-message').innerText(), 'Still working');
  await page.evaluate((c) => window.__fake.resolve(c, 'approved'), id);
  await bar.waitFor({ state: 'detached' });
  assert.equal(await card.getAttribute('data-status'), 'done');
  assert.deepEqual(page.errors, []);
});

test('an MCP approval card shows its high risk and wraps long arguments inside the card', async () => {
  const long = 'x'.repeat(300);
  const url = 'https://example.com/' + 'segment/'.repeat(40);
  for (const [width, where] of [[1280, 'inline'], [1280, 'drawer']]) {
    const page = await open({ locale: 'en-US', width, height: 1600 });
    await page.evaluate(
      ({ long, url }) =>
        window.__fake.propose({
          call_id: 'mcpw',
          tool: 'mcp__files__delete_file',
          title: { zh: 'MCP · files · delete_file', en: 'MCP · files · delete_file' },
          args: { path: '/home/u/Documents/' + long, options: { recursive: true, paths: [url, url] } },
          preview: {
            summary: { zh: '通过 MCP 服务器「Files」调用「delete_file」', en: 'Call “delete_file” on the MCP server Files' },
            risk: 'high',
            fields: [
              { label: { zh: 'MCP 服务器', en: 'MCP server' }, value: 'Files (files)' },
              { label: { zh: '工具', en: 'Tool' }, value: 'delete_file' },
              { label: { zh: '服务器的说明', en: 'The server’s description' }, value: 'Deletes a file or, with recursive, a whole folder.' },
              { label: { zh: '风险', en: 'Risk' }, value: '服务器声明此工具可能删除或覆盖数据 · The server says this tool may delete or overwrite data' },
              { label: { zh: 'path', en: 'path' }, value: '/home/u/Documents/' + long },
              { label: { zh: 'a_rather_long_argument_name_for_options', en: 'a_rather_long_argument_name_for_options' }, value: JSON.stringify({ recursive: true, paths: [url, url] }) },
            ],
            changes: [],
          },
        }),
      { long, url },
    );
    let card = page.locator('[data-testid="approval-card"][data-call-id="mcpw"]');
    if (where === 'drawer') {
      await page.getByTestId('nav-inbox').click();
      await page.locator('[data-testid="inbox-row"]').first().click();
      card = page.locator('[data-testid="drawer"] [data-testid="approval-card"]');
    }
    await card.waitFor();
    const high = card.getByTestId('high-risk');
    assert.equal(await high.isVisible(), true, 'High risk shows');
    assert.equal(await high.innerText(), 'High risk');
    // Nothing runs out of the card: its own box and every value stay within its width.
    const overflow = await card.evaluate((el) => {
      const box = el.getBoundingClientRect();
      const out = [...el.querySelectorAll('dt, dd, pre')].filter((d) => d.getBoundingClientRect().right > box.right + 0.5 || d.scrollWidth > d.clientWidth + 1);
      return { scroll: el.scrollWidth - el.clientWidth, out: out.map((d) => d.textContent.slice(0, 40)) };
    });
    assert.deepEqual(overflow, { scroll: 0, out: [] });
    // A long argument name wraps in its column and leaves the value most of the width.
    const widest = await card.evaluate((el) => Math.max(...[...el.querySelectorAll('.fields dt')].map((d) => d.getBoundingClientRect().width)));
    assert.ok(widest <= 200.5, `the label column is ${widest}px wide`);
    await card.screenshot({ path: `/tmp/ui-shots/mcp-approval-${where}.png` }).catch(() => {});
    assert.deepEqual(page.errors, []);
  }
});

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`a call held for a remote MCP server's own sign-in says so, and its button asks for that server (${lang})`, async () => {
    const page = await open({ opts: { signedIn: true }, locale });
    const id = await page.evaluate(() =>
      window.__fake.propose({
        tool: 'mcp__notes__search',
        title: { zh: 'MCP 工具 · notes · search', en: 'MCP tool · notes · search' },
        status: 'awaiting_auth',
        pending: true,
        requires_approval: false,
        scopes: [{ scope: 'mcp:notes', label: { zh: '登录 MCP 服务器 notes', en: 'Sign in to the MCP server notes' } }],
      }),
    );
    const card = page.locator(`[data-testid="auth-card"][data-call-id="${id}"]`);
    await card.waitFor();
    const text = await card.innerText();
    assert.match(text, lang === 'zh' ? /需要登录 MCP 服务器/ : /Sign-in to an MCP server needed/);
    assert.doesNotMatch(text, lang === 'zh' ? /飞书授权|使用飞书登录/ : /Feishu permission|Sign in with Feishu/);
    // Signed in to Feishu, yet not to this server: the card does not claim a Feishu account covers it.
    assert.match(text, lang === 'zh' ? /尚未登录该服务器/ : /Not signed in to this server yet/);
    await card.getByTestId('sign-in').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('sign_in').length > 0);
    const args = await lastArgs(page, 'sign_in');
    assert.deepEqual(args.scopes, ['mcp:notes']);
    assert.deepEqual(page.errors, []);
  });
}

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`a remote server that needs its own sign-in says so in its row, and its button asks for that server (${lang})`, async () => {
    const w = {
      zh: { chip: '需要登录', button: '登录', waiting: '正在等待你登录…', running: '运行中', failed: /登录没有完成：the authorization server refused the code/ },
      en: { chip: 'Sign-in needed', button: 'Sign in', waiting: 'Waiting for you to sign in…', running: 'Running', failed: /Sign-in did not finish: the authorization server refused the code/ },
    }[lang];
    const page = await open({
      locale,
      opts: { signedIn: true, mcpServers: [{ id: 'notes', name: 'Notes', transport: 'http', url: 'https://mcp.notes.example/mcp', needs_sign_in: true, phase: 'idle' }] },
    });
    await page.getByTestId('nav-settings').click();
    const row = page.locator('[data-testid="mcp-server"][data-id="notes"]');
    await row.waitFor();
    assert.equal(await row.getByTestId('mcp-phase').innerText(), w.chip);
    assert.match(await row.getByTestId('mcp-phase').getAttribute('class'), /amber/);
    const button = row.getByTestId('mcp-sign-in');
    assert.equal((await button.innerText()).trim(), w.button);
    assert.match(await button.getAttribute('class'), /primary/);
    assert.equal(await page.locator('[data-testid="mcp-server"][data-id="feishu"] [data-testid="mcp-sign-in"]').count(), 0, 'only where a sign-in is needed');

    // A sign-in that fails says so in the row, and the button is there to try again.
    await button.click();
    await page.waitForFunction(() => window.__fake.commandsCalled('sign_in').length === 1);
    assert.deepEqual(await lastArgs(page, 'sign_in'), { scopes: ['mcp:notes'], embedded: true });
    await page.waitForSelector('[data-id="notes"] [data-testid="mcp-sign-in"][data-state="waiting"]');
    // The fake announces `waiting` 5 ms after answering, as its own event: let it arrive first,
    // or it lands after the failure below and hides it (seen once in a full run).
    await page.waitForTimeout(50);
    await page.evaluate(() => window.__fake.emit({ type: 'sign_in', status: { state: 'failed', message: 'the authorization server refused the code' } }));
    await row.getByTestId('mcp-sign-in-error').waitFor();
    assert.match(await row.getByTestId('mcp-sign-in-error').innerText(), w.failed);

    // Again: waiting while it is under way (Cancel offered); the sign_in success alone reads the list again.
    await row.locator('[data-testid="mcp-sign-in"][data-state="idle"]').click();
    await page.waitForFunction(() => window.__fake.commandsCalled('sign_in').length === 2);
    assert.deepEqual((await lastArgs(page, 'sign_in')).scopes, ['mcp:notes']);
    await page.waitForSelector('[data-id="notes"] [data-testid="mcp-sign-in"][data-state="waiting"]');
    assert.equal((await button.innerText()).trim(), w.waiting);
    assert.equal(await button.isDisabled(), true);
    assert.equal(await row.getByTestId('mcp-sign-in-cancel').count(), 1);
    assert.equal(await row.getByTestId('mcp-sign-in-error').count(), 0);
    await row.screenshot({ path: `/tmp/ui-shots2/mcp-sign-in-waiting-${lang}.png` }).catch(() => {});
    const reads = await page.evaluate(() => window.__fake.commandsCalled('mcp_servers').length);
    await page.evaluate(() => {
      // The core's state changes quietly; only the sign_in event is heard.
      Object.assign(window.__fake.mcp.find((x) => x.id === 'notes'), { needs_sign_in: false, phase: 'running', server_info: 'notes 1.0' });
      window.__fake.emit({ type: 'sign_in', status: { state: 'signed_in', name: 'notes', scopes: [], switched_from: null } });
    });
    await page.waitForSelector('[data-testid="mcp-server"][data-id="notes"][data-phase="running"]');
    assert.ok((await page.evaluate(() => window.__fake.commandsCalled('mcp_servers').length)) > reads, 'read again');
    assert.equal(await row.getByTestId('mcp-phase').innerText(), w.running);
    assert.equal(await row.getByTestId('mcp-sign-in').count(), 0);
    assert.deepEqual(page.errors, []);
  });
}

test('a server that needs sign-in: the whole flow as the core runs it (mcp_servers after sign_in), in a screenshot before', async () => {
  const page = await open({ locale: 'en-US', opts: { mcpServers: [{ id: 'linear', name: 'Linear', transport: 'http', url: 'https://mcp.linear.app/mcp', needs_sign_in: true }] } });
  await page.getByTestId('nav-settings').click();
  const row = page.locator('[data-testid="mcp-server"][data-id="linear"]');
  await row.waitFor();
  await row.screenshot({ path: '/tmp/ui-shots2/mcp-sign-in-needed-en.png' }).catch(() => {});
  await row.getByTestId('mcp-sign-in').click();
  await page.waitForSelector('[data-id="linear"] [data-testid="mcp-sign-in"][data-state="waiting"]');
  await page.evaluate(() => window.__fake.mcpSignedIn('linear'));
  await page.waitForSelector('[data-testid="mcp-server"][data-id="linear"][data-phase="running"]');
  assert.equal(await row.getByTestId('mcp-tool-count').innerText(), '2 tools');
  assert.equal(await row.getByTestId('mcp-sign-in').count(), 0);
  assert.deepEqual(page.errors, []);
});

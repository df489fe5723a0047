// The user's own Python in the real app: a tool written in the editor is called by the assistant,
// its POST is held on an approval card, approved, sent once and audited; a file with a syntax error
// shows its line; a callback that edits the request changes the answer.
// Screenshots: tests/e2e/artifacts/py-*.png (Chinese, then the editor and the card in English).

import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { freshDataDir, launch, send, shot, startDriver, step, waitForReply } from './harness.mjs';

let driver;
let server;
let port;
const received = [];
before(async () => {
  driver = await startDriver();
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'note_1' }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = server.address().port;
});
after(() => {
  driver?.stop();
  server?.close();
});

/** Replaces the editor's text the way a user pasting code does. */
async function pasteCode(browser, code) {
  const content = browser.$('[data-testid="code-editor-content"]');
  await content.waitForDisplayed();
  await content.click();
  await browser.execute((text) => {
    const el = document.querySelector('[data-testid="code-editor-content"]');
    el.focus();
    const range = document.createRange();
    range.selectNodeContents(el);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    document.execCommand('selectAll');
    const data = new DataTransfer();
    data.setData('text/plain', text);
    el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
  }, code);
}

async function openSettings(browser) {
  await browser.$('[data-testid="nav-settings"]').click();
  const state = browser.$('[data-testid="sandbox-state"]');
  await state.waitForExist({ timeout: 20000 });
  // A sandbox being prepared shows a progress bar until it is ready. (With no Python file yet it
  // has not started: the first file starts it, and createFile waits for that.)
  await browser.waitUntil(async () => !(await browser.$('[data-testid="sandbox-state"] [role="progressbar"]').isExisting()), {
    timeout: 180000,
    interval: 500,
    timeoutMsg: 'the Python sandbox never got ready',
  });
  step('the sandbox is ready');
}

// The first file starts the sandbox, which a development build compiles unless an earlier run
// cached it: its load may take as long as a compile.
async function createFile(browser, name, code, timeout = 20000) {
  const input = browser.$('[data-testid="new-python-name"]');
  await input.scrollIntoView();
  await input.setValue(name);
  await browser.$('[data-testid="create-python"]').click();
  await browser.$('[data-testid="python-editor"]').waitForDisplayed({ timeout });
  await pasteCode(browser, code);
  await browser.$('[data-testid="editor-save"]').click();
  await browser.waitUntil(
    async () => {
      const status = browser.$('[data-testid="editor-status"]');
      if (!(await status.isExisting())) return false;
      return /已加载|出错|Loaded|Error/.test(await status.getText());
    },
    { timeout, timeoutMsg: `${name} never loaded` },
  );
  step(`${name} saved`);
}

async function backToChat(browser) {
  await browser.$('[data-testid="editor-back"]').click();
  await browser.$('[data-testid="new-session"]').click();
  await browser.$('[data-testid="composer"]').waitForDisplayed();
}

describe('Python tools and callbacks written in the app', () => {
  let browser;
  let dataDir;
  before(async () => {
    dataDir = await freshDataDir('python');
    browser = await launch(driver, dataDir);
  });
  after(async () => {
    await browser?.deleteSession();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('a tool written in the editor shows its declaration', async () => {
    await openSettings(browser);
    const code = [
      'def save_note(title: str, body: str) -> dict:',
      '    """Saves a note in the team notebook."""',
      `    r = ces_requests.post('http://127.0.0.1:${port}/notes', json={'title': title, 'body': body})`,
      '    r.raise_for_status()',
      '    return r.json()',
      '',
      'def preview_save_note(title: str, body: str) -> str:',
      '    return f"把笔记「{title}」保存到团队笔记本"',
      '',
    ].join('\n');
    await createFile(browser, 'save_note.py', code, 180000);
    assert.match(await browser.$('[data-testid="editor-status"]').getText(), /已加载/);
    const decl = await browser.$('[data-testid="declaration"]').getText();
    assert.match(decl, /save_note/);
    assert.match(decl, /"title"/, 'the schema the model sees');
    assert.match(decl, /需要你批准/, 'it posts, so every call waits');
    await browser.execute(() => window.scrollTo(0, 0));
    await shot(browser, 'py-01-editor-code');
    await browser.$('[data-testid="allowed-hosts"]').setValue('127.0.0.1');
    await browser.$('[data-testid="save-hosts"]').click();
    await shot(browser, 'py-01-editor');
  });

  test('a file with a syntax error shows its line', async () => {
    await browser.$('[data-testid="editor-back"]').click();
    await createFile(browser, 'broken.py', 'def broken():\n    x = 1\n    return (x\n\nprint("never")\n');
    const error = browser.$('[data-testid="editor-error"]');
    await error.waitForDisplayed();
    const text = await error.getText();
    assert.match(text, /第 3 行/);
    assert.match(text, /SyntaxError/);
    const note = String(await browser.$('[data-testid="editor-note"]').getProperty('textContent'));
    assert.match(note, /未加载/, 'a file that failed to load is not reported as loaded');
    await shot(browser, 'py-02-syntax-error');
  });

  test('the assistant calls the tool; its POST waits on the approval card, then is sent and audited', async () => {
    await backToChat(browser);
    await send(browser, '帮我记一条笔记');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed({ timeout: 30000 });
    const text = await card.getText();
    assert.match(text, /把笔记「周会」保存到团队笔记本/, 'the file words its own card');
    assert.match(text, new RegExp(`127\\.0\\.0\\.1:${port}/notes`), 'the URL is on the card');
    assert.match(text, /周五发布新版本/, 'the body is on the card');
    assert.equal(received.filter((r) => r.method === 'POST').length, 0, 'nothing sent before approval');
    await shot(browser, 'py-03-approval-card');
    await card.$('[data-testid="approve"]').click();
    await waitForReply(browser, '笔记已保存');
    const posts = received.filter((r) => r.method === 'POST');
    assert.equal(posts.length, 1);
    assert.deepEqual(JSON.parse(posts[0].body), { title: '周会', body: '周五发布新版本' });
    await browser.$('[data-testid="nav-audit"]').click();
    let rows = [];
    await browser.waitUntil(
      async () => {
        rows = [];
        for (const row of await browser.$$('[data-testid="audit-row"]')) {
          const t = String(await row.getProperty('textContent'));
          if (/save_note/.test(t)) rows.push(t);
        }
        return rows.some((t) => /已完成/.test(t));
      },
      { timeout: 10000, timeoutMsg: 'no audit entry says the Python call completed' },
    );
    // Every row of the call names the file and function: requested, approved, sent, completed.
    for (const t of rows) assert.match(t, /save_note\.py · def save_note/, t);
    await shot(browser, 'py-04-audit');
  });

  test('a callback that edits the request changes the answer', async () => {
    await openSettings(browser);
    const code = [
      'def before_model_callback(callback_context, llm_request):',
      '    llm_request.contents[-1].parts.append(Part.from_text(text=" [edited by a Python callback]"))',
      '',
    ].join('\n');
    await createFile(browser, 'tagger.py', code);
    await backToChat(browser);
    await send(browser, '你好');
    await waitForReply(browser, 'This request was edited by your Python callback.');
    await shot(browser, 'py-05-callback-answer');
  });
});

describe('the same, in English', () => {
  let browser;
  let dataDir;
  before(async () => {
    // The file is already in the folder, as another editor would leave it, with its host allowed.
    dataDir = await freshDataDir('python-en', {
      language: 'en',
      assistant: { python_files: { 'save_note.py': { allowed_hosts: ['127.0.0.1'], feishu_api: false } } },
    });
    const folder = path.join(dataDir, 'config', 'python');
    mkdirSync(folder, { recursive: true });
    writeFileSync(
      path.join(folder, 'save_note.py'),
      [
        'def save_note(title: str, body: str) -> dict:',
        '    """Saves a note in the team notebook."""',
        `    r = ces_requests.post('http://127.0.0.1:${port}/notes', json={'title': title, 'body': body})`,
        '    return r.json()',
        '',
        'def preview_save_note(title: str, body: str) -> str:',
        '    return f"Save the note “{title}” to the team notebook"',
        '',
      ].join('\n'),
    );
    browser = await launch(driver, dataDir);
  });
  after(async () => {
    await browser?.deleteSession();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('the editor and a Python tool\'s approval card speak English', async () => {
    await openSettings(browser);
    const open = browser.$('[data-testid="open-python-save_note.py"]');
    await open.scrollIntoView();
    await open.click();
    await browser.$('[data-testid="python-editor"]').waitForDisplayed();
    await browser.waitUntil(async () => /Loaded/.test(await browser.$('[data-testid="editor-status"]').getText()), {
      timeout: 20000,
      timeoutMsg: 'save_note.py never showed as loaded',
    });
    assert.match(await browser.$('[data-testid="declaration"]').getText(), /save_note/);
    await shot(browser, 'py-06-editor-en');
    await backToChat(browser);
    await send(browser, 'save a note');
    const card = browser.$('[data-testid="approval-card"]');
    await card.waitForDisplayed({ timeout: 30000 });
    const text = await card.getText();
    // The assistant proposes the note in the user's language, and the file words the card.
    assert.match(text, /Save the note “Weekly sync” to the team notebook/);
    assert.match(text, new RegExp(`127\\.0\\.0\\.1:${port}/notes`));
    await shot(browser, 'py-07-approval-card-en');
  });
});

// Settings → Tools · MCP servers, the lark-mcp preset, against the fake backend: switched on
// before anything is installed it says what is missing in the core's words; the install shows
// its steps (Node.js downloaded, npm's fetches) in a bar, then the preset runs with its server,
// whose tools' approvals the app decides (the switches are locked). The tools field: a name
// lark-mcp does not know is refused with the core's words and the field kept; a known choice
// saved; emptied, back to the default. Screenshots of the block in its states go to
// /tmp/ui-shots2/ (zh and en, light and dark).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { useApp } from './harness.mjs';

const open = useApp();
const SHOTS = '/tmp/ui-shots2';
fs.mkdirSync(SHOTS, { recursive: true });

const words = {
  zh: {
    off: '已停用', notReady: '未就绪', running: '运行中', nodeMissing: 'Node.js 20 或更新版本：未找到', notInstalled: 'lark-mcp 0.5.1：未安装',
    problem: /未找到 Node\.js 20 或更新版本。飞书助手可以从 npm 仓库下载/, install: '安装', installing: '正在安装', download: /正在下载 node-v22\.12\.0-linux-x64\.tar\.gz · \d+\.\d MB \/ 28\.4 MB/,
    fetch: /正在获取 \S+ · 已获取 \d 个包/, node: 'Node.js v22.12.0', installed: 'lark-mcp 0.5.1', reads: '飞书 API 表明是读取的操作直接运行，其他操作都先等你批准。',
    toolsHint: /由应用根据每个工具调用的飞书 API 设定/, refused: /^操作没有完成：lark-mcp 没有这些工具或预设：bitable\.v1\.nope/, readCount: '所选工具中有 7 个只读取数据，会直接运行。',
  },
  en: {
    off: 'Off', notReady: 'Not ready', running: 'Running', nodeMissing: 'Node.js 20 or newer: not found', notInstalled: 'lark-mcp 0.5.1: not installed',
    problem: /No Node\.js 20 or newer was found\. Feishu Companion can fetch/, install: 'Install', installing: 'Installing', download: /Downloading node-v22\.12\.0-linux-x64\.tar\.gz · \d+\.\d MB \/ 28\.4 MB/,
    fetch: /Fetching \S+ · \d packages fetched/, node: 'Node.js v22.12.0', installed: 'lark-mcp 0.5.1', reads: 'What the Feishu API shows to be a read runs at once; everything else waits for your approval.',
    toolsHint: /Set by the app from the Feishu API each tool calls/, refused: /^That did not work: .*lark-mcp knows no tool or preset bitable\.v1\.nope/, readCount: '7 of the chosen tools only read and run at once.',
  },
};

const calls = (page, cmd) => page.evaluate((c) => window.__fake.commandsCalled(c).map((l) => l.args), cmd);
const text = async (loc) => (await loc.innerText()).trim();

async function openPreset(page) {
  await page.getByTestId('nav-settings').click();
  const preset = page.getByTestId('lark-mcp');
  await preset.waitFor();
  await page.waitForSelector('[data-testid="lark-mcp"][data-enabled]');
  return preset;
}

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  for (const scheme of ['light', 'dark']) {
    test(`lark-mcp: switched on before it is installed it says what is missing; the install shows its steps; then it runs with its tools locked (${lang}, ${scheme})`, async () => {
      const w = words[lang];
      const shot = (name) => preset.screenshot({ path: `${SHOTS}/lark-${name}-${lang}-${scheme}.png` });
      const page = await open({ locale, colorScheme: scheme, width: 1100, height: 1400, opts: { lark: { node: null } } });
      const preset = await openPreset(page);

      // Off, nothing there: what it needs reads as missing, and its Install is offered.
      assert.equal(await preset.getAttribute('data-enabled'), 'false');
      assert.equal(await text(preset.getByTestId('lark-chip')), w.off);
      assert.equal(await preset.getByTestId('lark-enabled').isChecked(), false);
      assert.equal(await text(preset.getByTestId('lark-node')), w.nodeMissing);
      assert.equal(await preset.getByTestId('lark-node').getAttribute('data-state'), 'missing');
      assert.equal(await text(preset.getByTestId('lark-installed')), w.notInstalled);
      assert.equal(await text(preset.getByTestId('lark-reads')), w.reads);
      assert.equal(await text(preset.getByTestId('lark-install')), w.install);
      assert.equal(await preset.getByTestId('lark-server').count(), 0);
      await shot('off');

      // Switched on before the install: the core's words say what is missing; no server yet.
      await preset.getByTestId('lark-enabled').check();
      await page.waitForSelector('[data-testid="lark-mcp"][data-enabled="true"]');
      assert.deepEqual(await calls(page, 'set_lark_mcp'), [{ enabled: true, tools: null }]);
      assert.equal(await text(preset.getByTestId('lark-chip')), w.notReady);
      assert.match(await text(preset.getByTestId('lark-problem')), w.problem);
      assert.equal(await preset.getAttribute('data-ready'), 'false');
      assert.equal(await preset.getByTestId('lark-server').count(), 0);
      assert.match(await preset.getByTestId('lark-install').getAttribute('class'), /primary/, 'switched on, Install is the way on');
      await shot('on-not-ready');

      // Install: disabled while it runs, a bar with the download's share and words, then npm's fetches.
      await preset.getByTestId('lark-install').click();
      const progress = preset.getByTestId('lark-progress');
      await progress.waitFor();
      assert.equal(await preset.getByTestId('lark-install').isDisabled(), true);
      assert.equal(await text(preset.getByTestId('lark-install')), w.installing);
      assert.equal(await text(preset.getByTestId('lark-chip')), w.installing);
      await page.waitForFunction((re) => new RegExp(re).test(document.querySelector('[data-testid="lark-progress"] [data-testid="mcp-progress-message"]')?.textContent ?? ''), w.download.source);
      const share = Number(await progress.getByRole('progressbar').getAttribute('aria-valuenow'));
      assert.ok(share > 0 && share <= 100, `a download has a share (${share})`);
      assert.equal(await preset.getByTestId('lark-problem').count(), 0, 'the bar speaks while it installs');
      await shot('installing');
      await page.waitForFunction((re) => new RegExp(re).test(document.querySelector('[data-testid="lark-progress"] [data-testid="mcp-progress-message"]')?.textContent ?? ''), w.fetch.source);
      assert.equal(await progress.getByTestId('mcp-progress').getAttribute('data-determinate'), 'false', 'npm’s fetches have no total');

      // Done: both there, no problem, no Install; its server runs in the block (not in the list below).
      await progress.waitFor({ state: 'detached' });
      await page.waitForSelector('[data-testid="lark-server"] [data-testid="mcp-server"][data-id="lark"][data-phase="running"]');
      assert.equal(await preset.getAttribute('data-ready'), 'true');
      assert.equal(await text(preset.getByTestId('lark-node')), w.node);
      assert.equal(await preset.getByTestId('lark-node').getAttribute('data-state'), 'ok');
      assert.equal(await text(preset.getByTestId('lark-installed')), w.installed);
      assert.equal(await preset.getByTestId('lark-problem').count(), 0);
      assert.equal(await preset.getByTestId('lark-install').count(), 0);
      assert.equal(await text(preset.getByTestId('lark-chip')), w.running);
      assert.equal(await page.locator('[data-testid="mcp-servers"] [data-id="lark"]').count(), 0, 'not twice');
      assert.equal((await calls(page, 'install_lark_mcp')).length, 1);
      const row = preset.locator('[data-testid="mcp-server"][data-id="lark"]');
      assert.equal(await row.getByTestId('mcp-edit').count(), 0);
      assert.equal(await row.getByTestId('mcp-remove').count(), 0);
      assert.equal(await row.getByTestId('mcp-server-enabled').count(), 0, 'the preset’s own switch turns it off');

      // Its tools: the app decides which run without approval; every switch locked, reads on.
      await row.getByTestId('mcp-tools-toggle').click();
      assert.match(await text(row.getByTestId('mcp-tools-hint')), w.toolsHint);
      const tools = row.getByTestId('mcp-tool');
      assert.equal(await tools.count(), 20);
      const frees = row.getByTestId('mcp-tool-free');
      for (let i = 0; i < (await frees.count()); i++) assert.equal(await frees.nth(i).isDisabled(), true, `tool ${i} is locked`);
      const search = row.locator('[data-testid="mcp-tool"][data-name="bitable_v1_appTableRecord_search"]');
      const create = row.locator('[data-testid="mcp-tool"][data-name="bitable_v1_appTableRecord_create"]');
      assert.equal(await search.getAttribute('data-approval'), 'app');
      assert.equal(await search.getByTestId('mcp-tool-free').isChecked(), true, 'a read runs at once');
      assert.equal(await create.getByTestId('mcp-tool-free').isChecked(), false, 'a write waits');
      await search.getByTestId('mcp-tool-free').click({ force: true, timeout: 1000 }).catch(() => {});
      assert.equal((await calls(page, 'set_mcp_tool_read')).length, 0, 'nothing to switch');
      // The block down to its first tools (the whole list is taller than the window).
      await preset.evaluate((el) => el.scrollIntoView({ block: 'start' }));
      const box = await preset.boundingBox();
      await page.screenshot({ path: `${SHOTS}/lark-running-${lang}-${scheme}.png`, clip: { x: box.x, y: box.y, width: box.width, height: Math.min(box.height, 1000) } });
      assert.deepEqual(page.errors, []);
    });
  }
}

for (const [locale, lang] of [['zh-CN', 'zh'], ['en-US', 'en']]) {
  test(`lark-mcp: a tool name it does not know is refused with the core's words and the field kept; a known one saved, an empty one back to the default (${lang})`, async () => {
    const w = words[lang];
    const page = await open({ locale, width: 1100, height: 1200, opts: { lark: { installed: '0.5.1' } } });
    const preset = await openPreset(page);
    const field = preset.getByTestId('lark-tools');
    const save = preset.getByTestId('lark-tools-save');
    assert.equal(await field.inputValue(), '', 'the default shows as the placeholder');
    assert.equal(await field.getAttribute('placeholder'), 'preset.default,docx.v1.document.create');
    assert.equal(await save.isDisabled(), true, 'nothing to save yet');

    await field.fill('preset.light, bitable.v1.nope');
    await save.click();
    const err = preset.getByTestId('lark-tools-error');
    await err.waitFor();
    assert.match(await text(err), w.refused);
    assert.equal(await field.inputValue(), 'preset.light, bitable.v1.nope', 'what was typed stays');
    assert.match(await field.getAttribute('class'), /invalid/);
    assert.deepEqual(await calls(page, 'set_lark_mcp'), [{ enabled: false, tools: 'preset.light,bitable.v1.nope' }]);
    assert.equal((await page.evaluate(() => window.__fake.lark())).tools, null, 'nothing changed');
    await preset.screenshot({ path: `${SHOTS}/lark-refused-${lang}-light.png` });

    // Fixed: saved, the read count follows the choice; an empty field goes back to the default.
    await field.fill('preset.light');
    assert.equal(await err.count(), 0, 'typing clears the refusal');
    await save.click();
    await preset.getByTestId('lark-tools-saved').waitFor();
    assert.deepEqual((await calls(page, 'set_lark_mcp')).at(-1), { enabled: false, tools: 'preset.light' });
    assert.equal(await field.inputValue(), 'preset.light');
    assert.equal(await text(preset.getByTestId('lark-read-count')), w.readCount);
    assert.equal(await save.isDisabled(), true);
    await field.fill('');
    await save.click();
    await page.waitForFunction(() => window.__fake.commandsCalled('set_lark_mcp').length === 3);
    assert.deepEqual((await calls(page, 'set_lark_mcp')).at(-1), { enabled: false, tools: '' });
    await page.waitForFunction(() => window.__fake.lark().tools === null);
    assert.equal(await field.inputValue(), '');
    assert.deepEqual(page.errors, []);
  });
}

test('lark-mcp: an install that fails says why beside the button, and can be tried again', async () => {
  const page = await open({ locale: 'en-US', opts: { larkInstallFail: 'npm exited with status 1: ETIMEDOUT registry.npmjs.org', larkStepMs: 20 } });
  const preset = await openPreset(page);
  await preset.getByTestId('lark-install').click();
  const err = preset.getByTestId('lark-install-error');
  await err.waitFor();
  assert.match(await text(err), /ETIMEDOUT registry\.npmjs\.org/);
  assert.equal(await preset.getByTestId('lark-progress').count(), 0);
  assert.equal(await preset.getByTestId('lark-install').isDisabled(), false);
  assert.match(await text(preset.getByTestId('lark-problem')), /lark-mcp 0\.5\.1 is not installed yet/);
  assert.deepEqual(page.errors, []);
});

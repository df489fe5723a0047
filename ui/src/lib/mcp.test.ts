import { describe, expect, it } from 'vitest';
import type { LarkMcpView } from './bindings/LarkMcpView';
import type { McpServerView } from './bindings/McpServerView';
import type { McpToolView } from './bindings/McpToolView';
import {
  LARK_ID,
  applyProgress,
  builtinHint,
  emptyForm,
  formatBytes,
  formFromServer,
  formToInput,
  inputFromServer,
  larkChip,
  larkInstallNeeded,
  larkNeeds,
  larkToolsChanged,
  larkToolsField,
  larkToolsToSend,
  parseArgs,
  phaseChip,
  progressPercent,
  rowSignIn,
  secretState,
  serverChip,
  setupFromEvent,
  setupProgress,
  signInScope,
  toolApproval,
  toolsHint,
  validateForm,
  type ProgressMap,
} from './mcp';

const server: McpServerView = {
  builtin: false,
  needs_sign_in: false,
  id: 'files',
  name: 'Files',
  transport: 'stdio',
  command: 'npx',
  args: ['-y', '@modelcontextprotocol/server-filesystem', '/home/me'],
  cwd: null,
  url: '',
  env: ['API_KEY', 'REGION'],
  headers: [],
  missing_values: ['REGION'],
  enabled: true,
  trusted: false,
  timeout_secs: 90,
  phase: 'running',
  error: null,
  starts: 1,
  server_info: 'files 1.0',
  tools: [],
};

const tool = (over: Partial<McpToolView> = {}): McpToolView => ({
  name: 'read_file',
  agent_name: 'mcp__files__read_file',
  title: null,
  description: '',
  read_only_hint: null,
  destructive_hint: null,
  marked_read: false,
  runs_without_approval: false,
  ...over,
});

describe('the MCP server form', () => {
  it('sends an untouched form of a saved server back as it was, every secret kept (value null)', () => {
    const input = formToInput(formFromServer(server));
    expect(input).toEqual({
      id: 'files',
      name: 'Files',
      transport: 'stdio',
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-filesystem', '/home/me'],
      cwd: null,
      url: '',
      env: [
        { name: 'API_KEY', value: null },
        { name: 'REGION', value: null },
      ],
      headers: [],
      enabled: true,
      trusted: false,
      timeout_secs: 90,
    });
  });

  it('sends a typed value, drops a removed row and keeps the order', () => {
    const f = formFromServer(server);
    f.env = [f.env[1], { ...f.env[0], value: 'sk-new' }, { name: ' NEW_ONE ', value: 'x', stored: null }, { name: '', value: '', stored: null }];
    expect(formToInput(f).env).toEqual([
      { name: 'REGION', value: null },
      { name: 'API_KEY', value: 'sk-new' },
      { name: 'NEW_ONE', value: 'x' },
    ]);
  });

  it('adds with id null, arguments one per line and no stray folder', () => {
    const f = { ...emptyForm(), name: ' Files ', command: ' npx ', args: '-y\n\n  pkg@1  \r\n/home/me\n', cwd: '  ' };
    const input = formToInput(f);
    expect(input.id).toBeNull();
    expect(input.name).toBe('Files');
    expect(input.command).toBe('npx');
    expect(input.args).toEqual(['-y', 'pkg@1', '/home/me']);
    expect(input.cwd).toBeNull();
    expect(input.timeout_secs).toBe(60);
    expect(parseArgs('')).toEqual([]);
  });

  it('sends only the chosen transport’s secrets', () => {
    const f = { ...emptyForm(), name: 'Remote', transport: 'http' as const, url: 'https://x.example/mcp' };
    f.env = [{ name: 'LEFT_OVER', value: 'v', stored: null }];
    f.headers = [{ name: 'Authorization', value: 'Bearer t', stored: null }];
    const input = formToInput(f);
    expect(input.env).toEqual([]);
    expect(input.headers).toEqual([{ name: 'Authorization', value: 'Bearer t' }]);
  });

  it('changes one thing of a saved server and keeps every secret', () => {
    const input = inputFromServer(server, { enabled: false });
    expect(input.enabled).toBe(false);
    expect(input.env.every((e) => e.value === null)).toBe(true);
    expect(input.id).toBe('files');
  });

  it('says which secrets are stored, new or missing (a renamed row loses its stored value)', () => {
    const [key, region] = formFromServer(server).env;
    expect(secretState(key)).toBe('stored');
    expect(secretState(region)).toBe('missing');
    expect(secretState({ ...key, value: 'typed' })).toBe('new');
    expect(secretState({ ...key, name: 'API_TOKEN' })).toBe('missing');
  });

  it('checks what the core would refuse', () => {
    expect(validateForm({ ...emptyForm(), name: 'a', command: 'npx' })).toEqual({});
    expect(validateForm(emptyForm())).toEqual({ name: 'mcp_err_name', command: 'mcp_err_command' });
    const http = { ...emptyForm(), name: 'a', transport: 'http' as const, url: 'ftp://x' };
    expect(validateForm(http)).toEqual({ url: 'mcp_err_url' });
    expect(validateForm({ ...http, url: 'https://a b' }).url).toBe('mcp_err_url');
    expect(validateForm({ ...http, url: 'https://x/mcp', headers: [{ name: 'Bad Header', value: '', stored: null }] }).headers).toBe('mcp_err_secret_name');
    const ok = { ...emptyForm(), name: 'a', command: 'npx' };
    expect(validateForm({ ...ok, timeout: '0' }).timeout).toBe('mcp_err_timeout');
    expect(validateForm({ ...ok, timeout: '3601' }).timeout).toBe('mcp_err_timeout');
    expect(validateForm({ ...ok, timeout: '1.5' }).timeout).toBe('mcp_err_timeout');
    expect(validateForm({ ...ok, env: [{ name: '1ABC', value: '', stored: null }] }).env).toBe('mcp_err_secret_name');
    expect(validateForm({ ...ok, env: [{ name: 'A', value: '', stored: null }, { name: 'A ', value: '', stored: null }] }).env).toBe('mcp_err_secret_twice');
    expect(validateForm({ ...ok, env: [{ name: '', value: 'secret', stored: null }] }).env).toBe('mcp_err_secret_unnamed');
    // The other transport's rows are not checked (they are not sent).
    expect(validateForm({ ...http, url: 'https://x/mcp', env: [{ name: '1', value: '', stored: null }] })).toEqual({});
  });
});

describe('a server and its tools', () => {
  it('names each phase with its tone', () => {
    expect(phaseChip('idle')).toEqual({ key: 'mcp_phase_idle', tone: 'grey' });
    expect(phaseChip('starting')).toEqual({ key: 'mcp_phase_starting', tone: 'blue' });
    expect(phaseChip('running')).toEqual({ key: 'mcp_phase_running', tone: 'green' });
    expect(phaseChip('failed')).toEqual({ key: 'mcp_phase_failed', tone: 'red' });
    expect(phaseChip('something new')).toEqual({ key: 'mcp_phase_idle', tone: 'grey' });
  });

  it('says why a tool runs without approval', () => {
    const mine = { trusted: false, builtin: false };
    const trusted = { trusted: true, builtin: false };
    expect(toolApproval(trusted, tool({ read_only_hint: true, runs_without_approval: true }))).toBe('server');
    // An untrusted server's word is not taken.
    expect(toolApproval(mine, tool({ read_only_hint: true }))).toBe('held');
    expect(toolApproval(mine, tool({ marked_read: true, runs_without_approval: true }))).toBe('user');
    expect(toolApproval(trusted, tool({ read_only_hint: false }))).toBe('held');
    // The built-in server: the app decides, for reads and writes alike.
    expect(toolApproval({ trusted: false, builtin: true }, tool({ runs_without_approval: true }))).toBe('app');
    expect(toolApproval({ trusted: false, builtin: true }, tool())).toBe('app');
  });
});

describe('progress of running MCP calls', () => {
  const progress = (call_id: string, p: number, total: number | null, message: string | null = null) =>
    ({ type: 'mcp_progress', call_id, progress: p, total, message }) as const;

  it('keeps the latest report per call', () => {
    let m: ProgressMap = {};
    m = applyProgress(m, progress('c1', 1, 4, 'Reading'));
    m = applyProgress(m, progress('c2', 7, null));
    m = applyProgress(m, progress('c1', 3, 4, 'Writing'));
    expect(m).toEqual({ c1: { progress: 3, total: 4, message: 'Writing' }, c2: { progress: 7, total: null, message: null } });
  });

  it('forgets a call once it is over, and only then', () => {
    const m: ProgressMap = { c1: { progress: 1, total: 2, message: null }, c2: { progress: 1, total: null, message: null } };
    const call = (status: string) => ({ type: 'call', call: { call_id: 'c1', status } }) as never;
    expect(applyProgress(m, call('dispatching'))).toBe(m);
    expect(Object.keys(applyProgress(m, call('done')))).toEqual(['c2']);
    const items = (result: unknown) =>
      ({ type: 'items', session_id: 's', invocation_id: 'i', items: [{ kind: 'tool', call_id: 'c2', at: 0, tool: 't', title: { zh: '', en: '' }, args: {}, result }] }) as never;
    expect(applyProgress(m, items(null))).toBe(m);
    expect(Object.keys(applyProgress(m, items({ is_error: false, text: 'ok' })))).toEqual(['c1']);
    expect(applyProgress(m, { type: 'mcp_servers' })).toBe(m);
  });

  it('gives a share only when the total is known', () => {
    expect(progressPercent({ progress: 1, total: 4, message: null })).toBe(25);
    expect(progressPercent({ progress: 9, total: 4, message: null })).toBe(100);
    expect(progressPercent({ progress: 3, total: null, message: null })).toBeNull();
    expect(progressPercent({ progress: 3, total: 0, message: null })).toBeNull();
  });
});

describe('a remote server that asks for its own sign-in', () => {
  it('shows "sign-in needed" in place of its phase, unless a start is under way', () => {
    expect(serverChip({ phase: 'failed', needs_sign_in: true })).toEqual({ key: 'mcp_needs_sign_in', tone: 'amber' });
    expect(serverChip({ phase: 'idle', needs_sign_in: true }, true).key).toBe('mcp_phase_starting');
    expect(serverChip({ phase: 'running', needs_sign_in: false })).toEqual({ key: 'mcp_phase_running', tone: 'green' });
  });

  it('asks for the pseudo-permission of that server, as the authorization card does', () => {
    expect(signInScope('notes')).toBe('mcp:notes');
  });

  it('follows the app’s sign-in only when this row started it', () => {
    expect(rowSignIn(false, { state: 'starting' })).toEqual({ state: 'idle' });
    expect(rowSignIn(true, { state: 'starting' }).state).toBe('waiting');
    expect(rowSignIn(true, { state: 'waiting', url: 'https://x', device: null }).state).toBe('waiting');
    expect(rowSignIn(true, { state: 'in_browser' }).state).toBe('waiting');
    expect(rowSignIn(true, { state: 'signed_in', name: 'n', scopes: [], switched_from: null }).state).toBe('signed_in');
    expect(rowSignIn(true, { state: 'failed', message: 'port busy' })).toEqual({ state: 'failed', message: 'port busy' });
    expect(rowSignIn(true, { state: 'declined' })).toEqual({ state: 'failed' });
    expect(rowSignIn(true, { state: 'idle' })).toEqual({ state: 'idle' });
  });
});

const lark = (over: Partial<LarkMcpView> = {}): LarkMcpView => ({
  enabled: false,
  tools: 'preset.default,docx.v1.document.create',
  default_tools: 'preset.default,docx.v1.document.create',
  node_path: '/usr/bin/node',
  node_version: 'v20.18.0',
  node_ready: true,
  installed: null,
  version: '0.5.1',
  package_dir: '/data/lark-mcp',
  problem: { zh: '尚未安装', en: 'not installed yet' },
  read_tools: [],
  server: null,
  ...over,
});

describe('the lark-mcp preset', () => {
  it('starts its tools field empty when the choice is the default (the default is the placeholder)', () => {
    expect(larkToolsField(lark())).toBe('');
    expect(larkToolsField(lark({ tools: 'preset.light' }))).toBe('preset.light');
  });

  it('sends the names split by commas or spaces, one comma between; empty goes back to the default', () => {
    expect(larkToolsToSend(' preset.light,  bitable.v1.app.create  im.v1.message.list, ')).toBe('preset.light,bitable.v1.app.create,im.v1.message.list');
    expect(larkToolsToSend('   ')).toBe('');
  });

  it('offers Save only for a different choice', () => {
    expect(larkToolsChanged('', lark())).toBe(false);
    expect(larkToolsChanged('preset.light', lark())).toBe(true);
    expect(larkToolsChanged('preset.light ', lark({ tools: 'preset.light' }))).toBe(false);
    expect(larkToolsChanged('', lark({ tools: 'preset.light' }))).toBe(true);
  });

  it('installs when Node.js or lark-mcp is missing, updates another version, and has nothing to do when ready', () => {
    expect(larkInstallNeeded(lark())).toBe('install');
    expect(larkInstallNeeded(lark({ node_version: null, node_ready: false, node_path: null, installed: '0.5.1' }))).toBe('install');
    expect(larkInstallNeeded(lark({ installed: '0.4.0' }))).toBe('update');
    expect(larkInstallNeeded(lark({ installed: '0.5.1', problem: null }))).toBeNull();
  });

  it('lists what it needs: Node.js found, without npm or missing; lark-mcp installed, another version or missing', () => {
    expect(larkNeeds(lark())).toEqual({
      node: { state: 'ok', key: 'mcp_lark_node_found', params: { version: 'v20.18.0' } },
      lark: { state: 'missing', key: 'mcp_lark_not_installed', params: { wanted: '0.5.1' } },
    });
    const noNpm = larkNeeds(lark({ node_ready: false, installed: '0.4.0' }));
    expect(noNpm.node.state).toBe('warn');
    expect(noNpm.lark).toEqual({ state: 'warn', key: 'mcp_lark_installed_other', params: { version: '0.4.0', wanted: '0.5.1' } });
    expect(larkNeeds(lark({ node_version: null, node_ready: false, node_path: null })).node).toEqual({ state: 'missing', key: 'mcp_lark_node_missing' });
    expect(larkNeeds(lark({ installed: '0.5.1' })).lark.state).toBe('ok');
  });

  it('says off, installing, not ready, or its server’s state', () => {
    expect(larkChip(lark(), false).key).toBe('mcp_disabled');
    expect(larkChip(lark(), true).key).toBe('mcp_lark_installing');
    expect(larkChip(lark({ enabled: true }), false)).toEqual({ key: 'mcp_lark_not_ready', tone: 'amber' });
    const running = { ...server, id: LARK_ID, builtin: true, phase: 'running' };
    expect(larkChip(lark({ enabled: true, problem: null, installed: '0.5.1', server: running }), false).key).toBe('mcp_phase_running');
    expect(larkChip(lark({ enabled: true, problem: null, installed: '0.5.1' }), false).key).toBe('mcp_phase_idle');
  });

  it('shows its server’s row without the Docs server’s line, its tools decided by the Feishu API', () => {
    expect(builtinHint({ builtin: true, id: 'feishu' })).toBe('mcp_builtin_hint');
    expect(builtinHint({ builtin: true, id: LARK_ID })).toBeNull();
    expect(builtinHint({ builtin: false, id: 'files' })).toBeNull();
    expect(toolsHint({ builtin: true, id: LARK_ID })).toBe('mcp_runs_free_lark');
    expect(toolsHint({ builtin: true, id: 'feishu' })).toBe('mcp_runs_free_app');
    expect(toolsHint({ builtin: false, id: 'lark' })).toBe('mcp_runs_free_hint');
    // The app decides, so the user's switch is locked, whatever the tool says of itself.
    expect(toolApproval({ builtin: true, trusted: false }, tool({ read_only_hint: true }))).toBe('app');
  });
});

describe('the lark-mcp install’s progress', () => {
  const setup = (step: string, done: number, total: number | null) =>
    ({ type: 'mcp_setup', step, done, total, message: { zh: `正在下载 ${step}`, en: `Downloading ${step}` } }) as const;

  it('takes mcp_setup events only', () => {
    expect(setupFromEvent(setup('node', 5, 10))).toEqual({ step: 'node', done: 5, total: 10, message: { zh: '正在下载 node', en: 'Downloading node' } });
    expect(setupFromEvent({ type: 'mcp_servers' })).toBeNull();
  });

  it('counts bytes in B, KB or MB', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(20 * 1024)).toBe('20 KB');
    expect(formatBytes(29_800_000)).toBe('28.4 MB');
  });

  it('shows a download’s share and size, the install’s packages without a share, and moves before the first report', () => {
    const dl = setupProgress(setupFromEvent(setup('node', 9_000_000, 29_800_000)), 'en');
    expect(dl).toEqual({ progress: 9_000_000, total: 29_800_000, message: 'Downloading node · 8.6 MB / 28.4 MB' });
    expect(progressPercent(dl)).toBeCloseTo(30.2, 1);
    const pkgs = setupProgress({ step: 'lark-mcp', done: 3, total: null, message: { zh: '正在获取 zod', en: 'Fetching zod' } }, 'zh');
    expect(pkgs).toEqual({ progress: 3, total: null, message: '正在获取 zod · 已获取 3 个包' });
    expect(progressPercent(pkgs)).toBeNull();
    expect(setupProgress(null, 'en')).toEqual({ progress: 0, total: null, message: 'Getting ready…' });
    expect(setupProgress(null, 'zh').message).toBe('正在准备…');
  });
});

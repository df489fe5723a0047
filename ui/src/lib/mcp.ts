// Settings → Tools · MCP servers, the pure part: the add/edit form and what it sends, the checks the
// page makes before the core checks again, a server's state chip, why a tool runs without approval,
// the progress of running MCP calls as the call cards show it, a remote server's sign-in from its
// row, and the lark-mcp preset (what it needs, its tools field, its install's progress).
import type { LarkMcpView } from './bindings/LarkMcpView';
import type { McpSecretInput } from './bindings/McpSecretInput';
import type { McpServerInput } from './bindings/McpServerInput';
import type { McpServerView } from './bindings/McpServerView';
import type { McpToolView } from './bindings/McpToolView';
import type { SignInView } from './bindings/SignInView';
import type { Text } from './bindings/Text';
import type { UiEventView } from './bindings/UiEventView';
import { pick, translate, type Key, type Lang } from './i18n';

/** The core's default and bounds (crates/mcp/src/config.rs). */
export const DEFAULT_TIMEOUT_SECS = 60;
export const MAX_TIMEOUT_SECS = 3600;

/**
 * An environment variable or header as the form edits it. `value` is what the user typed (empty:
 * nothing typed); `stored` is the name under which the core holds a value, if it holds one.
 */
export type SecretRow = { name: string; value: string; stored: string | null };

export type McpForm = {
  id: string | null;
  name: string;
  transport: 'stdio' | 'http';
  command: string;
  /** The arguments, one per line. */
  args: string;
  cwd: string;
  url: string;
  env: SecretRow[];
  headers: SecretRow[];
  enabled: boolean;
  trusted: boolean;
  timeout: string;
};

export function emptyForm(): McpForm {
  return {
    id: null,
    name: '',
    transport: 'stdio',
    command: '',
    args: '',
    cwd: '',
    url: '',
    env: [],
    headers: [],
    enabled: true,
    trusted: false,
    timeout: String(DEFAULT_TIMEOUT_SECS),
  };
}

const rowsOf = (names: string[], missing: string[]): SecretRow[] =>
  names.map((name) => ({ name, value: '', stored: missing.includes(name) ? null : name }));

/** A saved server as the edit form starts: every secret kept (nothing typed). */
export function formFromServer(s: McpServerView): McpForm {
  return {
    id: s.id,
    name: s.name,
    transport: s.transport === 'http' ? 'http' : 'stdio',
    command: s.command,
    args: s.args.join('\n'),
    cwd: s.cwd ?? '',
    url: s.url,
    env: rowsOf(s.env, s.missing_values),
    headers: rowsOf(s.headers, s.missing_values),
    enabled: s.enabled,
    trusted: s.trusted,
    timeout: String(s.timeout_secs),
  };
}

/** One argument per line; blank lines dropped, each line's outer spaces too. */
export function parseArgs(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '');
}

/** A row as sent: a typed value replaces the stored one; nothing typed keeps it (`null`). Rows
 *  without a name are dropped (an empty row the user added and left). */
function secretsOf(rows: SecretRow[]): McpSecretInput[] {
  return rows
    .filter((r) => r.name.trim() !== '')
    .map((r) => ({ name: r.name.trim(), value: r.value === '' ? null : r.value }));
}

/** The form as `save_mcp_server` takes it. The other transport's fields go as they are
 *  (the core keeps only the chosen one), its secrets not at all. */
export function formToInput(f: McpForm): McpServerInput {
  const stdio = f.transport === 'stdio';
  return {
    id: f.id,
    name: f.name.trim(),
    transport: f.transport,
    command: f.command.trim(),
    args: parseArgs(f.args),
    cwd: f.cwd.trim() ? f.cwd.trim() : null,
    url: f.url.trim(),
    env: stdio ? secretsOf(f.env) : [],
    headers: stdio ? [] : secretsOf(f.headers),
    enabled: f.enabled,
    trusted: f.trusted,
    timeout_secs: Number(f.timeout.trim()),
  };
}

/** A saved server sent back with one thing changed (the list's Enabled switch): every secret kept. */
export function inputFromServer(s: McpServerView, patch: Partial<McpServerInput> = {}): McpServerInput {
  return { ...formToInput(formFromServer(s)), ...patch };
}

export type McpFormErrors = Partial<Record<'name' | 'command' | 'url' | 'timeout' | 'env' | 'headers', Key>>;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/;

function rowsError(rows: SecretRow[], valid: RegExp): Key | undefined {
  const named = rows.map((r) => r.name.trim()).filter((n) => n !== '');
  if (named.some((n) => !valid.test(n))) return 'mcp_err_secret_name';
  if (new Set(named).size !== named.length) return 'mcp_err_secret_twice';
  if (rows.some((r) => r.name.trim() === '' && r.value !== '')) return 'mcp_err_secret_unnamed';
  return undefined;
}

/** What the page checks before Save (the core checks again and may still refuse, with its words). */
export function validateForm(f: McpForm): McpFormErrors {
  const e: McpFormErrors = {};
  if (!f.name.trim()) e.name = 'mcp_err_name';
  if (f.transport === 'stdio') {
    if (!f.command.trim()) e.command = 'mcp_err_command';
    const env = rowsError(f.env, ENV_NAME);
    if (env) e.env = env;
  } else {
    const url = f.url.trim();
    if (!/^https?:\/\/\S+$/i.test(url)) e.url = 'mcp_err_url';
    const headers = rowsError(f.headers, HEADER_NAME);
    if (headers) e.headers = headers;
  }
  const t = f.timeout.trim();
  if (!/^\d+$/.test(t) || Number(t) < 1 || Number(t) > MAX_TIMEOUT_SECS) e.timeout = 'mcp_err_timeout';
  return e;
}

/** How a secret row reads: kept as stored, a new value typed, or no value at all. */
export function secretState(r: SecretRow): 'stored' | 'new' | 'missing' {
  if (r.value !== '') return 'new';
  return r.stored !== null && r.stored === r.name.trim() ? 'stored' : 'missing';
}

export type Tone = 'grey' | 'blue' | 'green' | 'red' | 'amber';

/** A server's state chip. */
export function phaseChip(phase: string): { key: Key; tone: Tone } {
  switch (phase) {
    case 'starting':
      return { key: 'mcp_phase_starting', tone: 'blue' };
    case 'running':
      return { key: 'mcp_phase_running', tone: 'green' };
    case 'failed':
      return { key: 'mcp_phase_failed', tone: 'red' };
    default:
      return { key: 'mcp_phase_idle', tone: 'grey' };
  }
}

/** A server's chip in its row: that it waits for the user's sign-in, else its phase (a start
 *  under way shows as starting whatever the server says). */
export function serverChip(s: Pick<McpServerView, 'phase' | 'needs_sign_in'>, starting = false): { key: Key; tone: Tone } {
  if (starting) return phaseChip('starting');
  if (s.needs_sign_in) return { key: 'mcp_needs_sign_in', tone: 'amber' };
  return phaseChip(s.phase);
}

/** The pseudo-permission a remote server's sign-in asks for (as the authorization card does). */
export const signInScope = (serverId: string) => `mcp:${serverId}`;

/**
 * Where a sign-in started from a server's row stands, as the row shows it: not started here
 * (`idle`), under way, or how it ended. The app has one sign-in at a time; `started` says this row
 * started the one in `st`.
 */
export function rowSignIn(
  started: boolean,
  st: { state: 'idle' } | { state: 'starting' } | SignInView,
): { state: 'idle' | 'waiting' | 'signed_in' | 'failed'; message?: string | Text } {
  if (!started) return { state: 'idle' };
  switch (st.state) {
    case 'starting':
    case 'waiting':
    case 'in_browser':
      return { state: 'waiting' };
    case 'signed_in':
      return { state: 'signed_in' };
    case 'failed':
      return { state: 'failed', message: st.message };
    case 'refused':
      return { state: 'failed', message: st.problem.title };
    case 'declined':
    case 'expired':
      return { state: 'failed' };
    default:
      return { state: 'idle' };
  }
}

/** The line a built-in server's row adds under its command: the Docs server's; the lark-mcp
 *  preset's block says it all already. */
export function builtinHint(s: Pick<McpServerView, 'builtin' | 'id'>): Key | null {
  if (!s.builtin || s.id === LARK_ID) return null;
  return 'mcp_builtin_hint';
}

/** The line above a server's tools: who decides which of them run without approval. */
export function toolsHint(s: Pick<McpServerView, 'builtin' | 'id'>): Key {
  if (s.id === LARK_ID && s.builtin) return 'mcp_runs_free_lark';
  return s.builtin ? 'mcp_runs_free_app' : 'mcp_runs_free_hint';
}

/**
 * Why a tool runs without approval, or that it waits: `app` for the app's own built-in server (the
 * app says which of its tools read; nothing to switch), `server` when the trusted server says it
 * only reads (the user's switch cannot hold it then; trusting the server less can), `user` when
 * the user marked it, `held` otherwise.
 */
export function toolApproval(
  server: Pick<McpServerView, 'trusted' | 'builtin'>,
  t: McpToolView,
): 'app' | 'server' | 'user' | 'held' {
  if (server.builtin) return 'app';
  if (server.trusted && t.read_only_hint === true) return 'server';
  if (t.marked_read || t.runs_without_approval) return 'user';
  return 'held';
}

// ---- progress of running calls

export type McpProgress = { progress: number; total: number | null; message: string | null };
export type ProgressMap = Record<string, McpProgress>;

/** The determinate share (0-100) of a progress report, or null when its total is not known. */
export function progressPercent(p: McpProgress): number | null {
  if (p.total == null || !(p.total > 0)) return null;
  return Math.max(0, Math.min(100, (p.progress / p.total) * 100));
}

const without = (map: ProgressMap, ids: string[]): ProgressMap => {
  if (!ids.some((id) => id in map)) return map;
  const next = { ...map };
  for (const id of ids) delete next[id];
  return next;
};

/** A call no longer runs once it waits, is decided against, or is done. */
const STILL_RUNNING = new Set(['approved', 'dispatching']);

/**
 * The progress the cards show after `ev`: a report is kept for its call until the call is over
 * (its state leaves running, or its result arrives in the timeline).
 */
export function applyProgress(map: ProgressMap, ev: UiEventView): ProgressMap {
  switch (ev.type) {
    case 'mcp_progress':
      return { ...map, [ev.call_id]: { progress: ev.progress, total: ev.total, message: ev.message } };
    case 'call':
      return STILL_RUNNING.has(ev.call.status) ? map : without(map, [ev.call.call_id]);
    case 'items':
      return without(
        map,
        ev.items.flatMap((it) => (it.kind === 'tool' && it.result ? [it.call_id] : [])),
      );
    default:
      return map;
  }
}

// ---- the lark-mcp preset

/** Its server's id (the core keeps it apart from the user's servers). */
export const LARK_ID = 'lark';

/** The tools field as it starts: empty (the default shows as its placeholder) when the choice is
 *  the default. */
export function larkToolsField(v: Pick<LarkMcpView, 'tools' | 'default_tools'>): string {
  return v.tools.trim() === v.default_tools.trim() ? '' : v.tools;
}

/** The field as `set_lark_mcp` takes it: `""` goes back to the default. Names and presets are
 *  split by commas or spaces; runs of either become one comma. */
export function larkToolsToSend(field: string): string {
  return field
    .split(/[\s,]+/)
    .filter((t) => t !== '')
    .join(',');
}

/** Whether Save would change the choice. */
export function larkToolsChanged(field: string, v: Pick<LarkMcpView, 'tools' | 'default_tools'>): boolean {
  return larkToolsToSend(field) !== larkToolsToSend(larkToolsField(v));
}

/** What the install would do: nothing when a Node.js with npm is there and the version the app
 *  runs is installed; `update` when another version is. */
export function larkInstallNeeded(v: Pick<LarkMcpView, 'node_ready' | 'installed' | 'version'>): 'install' | 'update' | null {
  if (v.node_ready && v.installed === v.version) return null;
  return v.node_ready && v.installed !== null ? 'update' : 'install';
}

/** The preset's chip: installing, off, not ready (something missing), or its server's state. */
export function larkChip(v: Pick<LarkMcpView, 'enabled' | 'problem' | 'server'>, installing: boolean): { key: Key; tone: Tone } {
  if (installing) return { key: 'mcp_lark_installing', tone: 'blue' };
  if (!v.enabled) return { key: 'mcp_disabled', tone: 'grey' };
  if (v.problem) return { key: 'mcp_lark_not_ready', tone: 'amber' };
  return v.server ? serverChip(v.server) : phaseChip('idle');
}

/** One requirement as the preset lists it: there (`ok`), there but not enough (`warn`), or missing. */
export type Need = { state: 'ok' | 'warn' | 'missing'; key: Key; params?: Record<string, string> };

export function larkNeeds(v: LarkMcpView): { node: Need; lark: Need } {
  const node: Need = v.node_version
    ? v.node_ready
      ? { state: 'ok', key: 'mcp_lark_node_found', params: { version: v.node_version } }
      : { state: 'warn', key: 'mcp_lark_node_no_npm', params: { version: v.node_version } }
    : { state: 'missing', key: 'mcp_lark_node_missing' };
  const lark: Need = v.installed
    ? v.installed === v.version
      ? { state: 'ok', key: 'mcp_lark_installed', params: { version: v.installed } }
      : { state: 'warn', key: 'mcp_lark_installed_other', params: { version: v.installed, wanted: v.version } }
    : { state: 'missing', key: 'mcp_lark_not_installed', params: { wanted: v.version } };
  return { node, lark };
}

/** An install step as the core reports it (`mcp_setup`). */
export type SetupProgress = { step: string; done: number; total: number | null; message: Text };

export function setupFromEvent(ev: UiEventView): SetupProgress | null {
  return ev.type === 'mcp_setup' ? { step: ev.step, done: ev.done, total: ev.total, message: ev.message } : null;
}

/** A size in bytes as the progress line shows it. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(0)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}

/**
 * An install step as the bar shows it: downloads (`node`, `npm`) count bytes, the install
 * (`lark-mcp`) packages fetched, of no known total. Before the first report: moving, "getting
 * ready".
 */
export function setupProgress(p: SetupProgress | null, lang: Lang): McpProgress {
  if (!p) return { progress: 0, total: null, message: translate(lang, 'mcp_lark_preparing') };
  const what = pick(p.message, lang);
  const detail =
    p.step === 'lark-mcp'
      ? translate(lang, 'mcp_lark_packages', { n: p.done })
      : p.total
        ? `${formatBytes(p.done)} / ${formatBytes(p.total)}`
        : formatBytes(p.done);
  return { progress: p.done, total: p.step === 'lark-mcp' ? null : p.total, message: what ? `${what} · ${detail}` : detail };
}

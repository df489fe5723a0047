// Connected agents (the user's other agents — Claude Code, Codex, Cursor… — served MCP by the
// companion): their tools as Settings chooses them, the setups' tab names, and how an approval card
// lays out what such an agent asks for (commands and file contents as code, edits as a diff).
import type { AgentToolChoiceView } from './bindings/AgentToolChoiceView';
import type { CallView } from './bindings/CallView';
import type { ConnectedAgentView } from './bindings/ConnectedAgentView';
import type { PreviewFieldView } from './bindings/PreviewFieldView';
import type { Key } from './i18n';

/** The tool an agent's permission request (Claude Code's `--permission-prompt-tool`) is a call of. */
export const APPROVE_TOOL = 'approve';
/** The tool of an agent's plain yes-or-no request. */
export const REQUEST_APPROVAL_TOOL = 'request_approval';

/** The tools given by default: Feishu's own. */
export function defaultTools(choices: AgentToolChoiceView[]): string[] {
  return choices.filter((t) => t.default_on).map((t) => t.name);
}

/** The tools an agent has as Settings shows them: its own choice, or the default. */
export function chosenTools(agent: Pick<ConnectedAgentView, 'tools'>, choices: AgentToolChoiceView[]): Set<string> {
  return new Set(agent.tools ?? defaultTools(choices));
}

/**
 * The agent's tools with `name` switched on or off, as `set_connected_agent_tools` takes them, in
 * the order of the choices; `null` when that is exactly the default (so it follows the default).
 */
export function toggledTools(
  agent: Pick<ConnectedAgentView, 'tools'>,
  choices: AgentToolChoiceView[],
  name: string,
  on: boolean,
): string[] | null {
  const set = chosenTools(agent, choices);
  if (on) set.add(name);
  else set.delete(name);
  const list = choices.map((t) => t.name).filter((n) => set.has(n));
  // A tool chosen earlier that is no longer offered stays chosen (the core decides what it means).
  for (const n of set) if (!list.includes(n)) list.push(n);
  const def = defaultTools(choices);
  const same = list.length === def.length && def.every((n) => set.has(n));
  return same ? null : list;
}

/** Active agents first, in the order added; revoked ones last. */
export function orderAgents(agents: ConnectedAgentView[]): ConnectedAgentView[] {
  return [...agents.filter((a) => !a.revoked), ...agents.filter((a) => a.revoked)];
}

/** A setup's tab: the client's name, or (for plain HTTP) words. */
export function setupTab(client: string): { name: string } | { key: Key } {
  switch (client) {
    case 'claude-code':
      return { name: 'Claude Code' };
    case 'codex':
      return { name: 'Codex' };
    case 'cursor':
      return { name: 'Cursor' };
    case 'http':
      return { key: 'agents_setup_http' };
    default:
      return { name: client };
  }
}

/** Whether another agent asked for this call (it names itself on the card). */
export function fromAgent(call: Pick<CallView, 'requester'>): boolean {
  return !!call.requester?.trim();
}

/** How a preview field reads: `code` a block of monospace text (a command, a file's content),
 *  `mono` one monospace value (a path), `text` as any other field. */
export type FieldStyle = 'code' | 'mono' | 'text';

const CODE_LABELS = ['command', 'content'];
const MONO_LABELS = ['file', 'project'];
const PROSE_LABELS = ['description', 'details'];

/**
 * How a field of an agent's request reads. The core labels a permission request's fields 命令 /
 * Command, 内容 / Content, 文件 / File, 项目 / Project, 说明 / Description, and an unknown tool's
 * input by its keys. Fields of other calls read as text.
 */
export function fieldStyle(call: Pick<CallView, 'tool'>, f: PreviewFieldView): FieldStyle {
  const label = f.label.en.trim().toLowerCase();
  if (call.tool === APPROVE_TOOL) {
    if (CODE_LABELS.includes(label)) return 'code';
    if (PROSE_LABELS.includes(label)) return 'text';
    if (MONO_LABELS.includes(label)) return 'mono';
    // An unknown tool's input, key by key: code when it spans lines, else one value.
    return f.value.includes('\n') ? 'code' : 'mono';
  }
  if (call.tool === REQUEST_APPROVAL_TOOL && MONO_LABELS.includes(label)) return 'mono';
  return 'text';
}

/** Whether the call's changes are edits of text (a file), shown as a diff rather than "from → to". */
export function diffChanges(call: Pick<CallView, 'tool'>): boolean {
  return call.tool === APPROVE_TOOL;
}

export type DiffLine = { sign: ' ' | '-' | '+'; text: string };

/** Past this many line pairs, a diff is the old lines then the new (no common lines sought). */
const DIFF_CELLS = 250_000;

/**
 * The lines of `from` and `to` as a diff: lines both keep once (' '), removed ('-'), added ('+'),
 * removals before additions within each change. An empty side has no lines.
 */
export function lineDiff(from: string, to: string): DiffLine[] {
  const a = from === '' ? [] : from.split('\n');
  const b = to === '' ? [] : to.split('\n');
  // The common head and tail first: an edit usually touches a few lines in the middle.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const out: DiffLine[] = a.slice(0, head).map((text) => ({ sign: ' ', text }));
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  if (x.length * y.length > DIFF_CELLS) {
    out.push(...x.map((text) => ({ sign: '-' as const, text })), ...y.map((text) => ({ sign: '+' as const, text })));
  } else {
    // Longest common subsequence of the middle lines.
    const n = x.length;
    const m = y.length;
    const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    let i = 0;
    let j = 0;
    const del: DiffLine[] = [];
    const add: DiffLine[] = [];
    const flush = () => {
      out.push(...del, ...add);
      del.length = 0;
      add.length = 0;
    };
    while (i < n || j < m) {
      if (i < n && j < m && x[i] === y[j]) {
        flush();
        out.push({ sign: ' ', text: x[i] });
        i++;
        j++;
      } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) {
        add.push({ sign: '+', text: y[j++] });
      } else {
        del.push({ sign: '-', text: x[i++] });
      }
    }
    flush();
  }
  out.push(...a.slice(a.length - tail).map((text) => ({ sign: ' ' as const, text })));
  return out;
}

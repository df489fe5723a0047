// The "Always allow…" choices an approval card offers, and how long a rule lasts.
import type { CallView } from './bindings/CallView';
import type { Key } from './i18n';

/** Arguments whose value names a target worth scoping a rule to, and what to call it. */
export const KEY_ARGS: Record<string, Key> = {
  chat_id: 'key_chat',
  receive_id: 'key_chat',
  calendar_id: 'key_calendar',
  tasklist_id: 'key_tasklist',
  tasklist_guid: 'key_tasklist',
  document_id: 'key_document',
  folder_token: 'key_folder',
  user_id: 'key_user',
  open_id: 'key_user',
};

/**
 * Preview field labels (Chinese and English, compared case-insensitively) whose value names the target
 * of a key: for `chat_id`, the field labelled 会话 / Chat holds "产品周会（12 人）".
 */
export const NAME_FIELDS: Partial<Record<Key, string[]>> = {
  key_chat: ['会话', '群', '群聊', '群组', 'chat', 'group', 'group chat'],
  key_calendar: ['日历', 'calendar'],
  key_tasklist: ['任务清单', '清单', 'task list', 'tasklist'],
  key_document: ['文档', 'document', 'doc'],
  key_folder: ['文件夹', 'folder'],
  key_user: ['联系人', '接收人', '收件人', 'person', 'recipient', 'to'],
};

export interface AllowChoice {
  /** Stable id for the menu item. */
  id: string;
  /** `null`: any call of the tool; otherwise the argument that scopes it. */
  key: string | null;
  keyLabel: Key | null;
  /** The argument's raw value (what the rule is scoped to). */
  value: string | null;
  /** What to call it in the menu: its name from the preview, else the raw value. */
  display: string | null;
  constraints: Record<string, unknown>;
  /** The menu's words, when the choice has its own (an agent's command); else from `key`. */
  label?: { key: Key; params: Record<string, string> };
}

/** The value of the preview field that names the target of `keyLabel`, if there is one. */
export function targetName(preview: CallView['preview'] | undefined, keyLabel: Key): string | null {
  const labels = NAME_FIELDS[keyLabel];
  if (!labels || !preview) return null;
  const norm = (s: string | undefined) => (s ?? '').trim().replace(/[:：]$/, '').toLowerCase();
  for (const f of preview.fields ?? []) {
    if (!labels.includes(norm(f.label.zh)) && !labels.includes(norm(f.label.en))) continue;
    const v = f.value.trim();
    if (v) return v;
  }
  return null;
}

/** The first line of a command, cut short for a menu. */
export function shortCommand(command: string, max = 60): string {
  const first = command.trim().split('\n')[0].trim();
  const cut = first.length > max ? first.slice(0, max - 1).trimEnd() + '…' : first;
  return command.trim().includes('\n') && !cut.endsWith('…') ? cut + ' …' : cut;
}

/** A project folder by its last part ("/work/app" → "app"). */
export function projectName(path: string): string {
  const parts = path.trim().replace(/[\\/]+$/, '').split(/[\\/]/);
  return parts[parts.length - 1] || path.trim();
}

/**
 * An agent's permission request (`tool_name` and `command` among its arguments, as the core
 * flattens it): "…this command" anywhere, and "…this command in this project" when it names one.
 */
function commandChoices(args: Record<string, unknown> | undefined): AllowChoice[] {
  const tool = args?.tool_name;
  const command = args?.command;
  if (typeof tool !== 'string' || !tool.trim() || typeof command !== 'string' || !command.trim()) return [];
  const shown = shortCommand(command);
  const out: AllowChoice[] = [
    {
      id: 'command',
      key: 'command',
      keyLabel: null,
      value: command,
      display: shown,
      constraints: { tool_name: tool, command },
      label: { key: 'always_allow_command', params: { command: shown } },
    },
  ];
  const project = args?.project;
  if (typeof project === 'string' && project.trim()) {
    out.push({
      id: 'command:project',
      key: 'command',
      keyLabel: null,
      value: command,
      display: shown,
      constraints: { tool_name: tool, command, project },
      label: { key: 'always_allow_command_project', params: { command: shown, project: projectName(project) } },
    });
  }
  return out;
}

/** The tools through which other agents ask about their own actions: allowing one whole would
 *  allow every shell command and edit of every agent, so only scoped choices are offered. */
const NEVER_WHOLE = new Set(['approve']);

/** "Always allow <tool>", then one "…for this <key>" per target argument with a plain value, then
 *  an agent's command choices. */
export function alwaysAllowChoices(
  call: Pick<CallView, 'args'> & Partial<Pick<CallView, 'preview' | 'tool'>>,
): AllowChoice[] {
  const whole = !NEVER_WHOLE.has(call.tool ?? '');
  const out: AllowChoice[] = whole
    ? [{ id: 'tool', key: null, keyLabel: null, value: null, display: null, constraints: {} }]
    : [];
  for (const [k, label] of Object.entries(KEY_ARGS)) {
    const v = call.args?.[k];
    if ((typeof v === 'string' && v.trim() !== '') || typeof v === 'number') {
      const value = String(v);
      out.push({
        id: 'key:' + k,
        key: k,
        keyLabel: label,
        value,
        display: targetName(call.preview, label) ?? value,
        constraints: { [k]: v },
      });
    }
  }
  out.push(...commandChoices(call.args));
  return out;
}

export type RuleDuration = 'forever' | 'hour' | 'day';

/** When a rule made now lapses; `null`: never. */
export function ruleExpiry(d: RuleDuration, now: number): number | null {
  if (d === 'hour') return now + 3_600_000;
  if (d === 'day') return now + 86_400_000;
  return null;
}

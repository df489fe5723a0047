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

export interface AllowChoice {
  /** Stable id for the menu item. */
  id: string;
  /** `null`: any call of the tool; otherwise the argument that scopes it. */
  key: string | null;
  keyLabel: Key | null;
  value: string | null;
  constraints: Record<string, unknown>;
}

/** "Always allow <tool>", then one "…for this <key>" per target argument with a plain value. */
export function alwaysAllowChoices(call: Pick<CallView, 'args'>): AllowChoice[] {
  const out: AllowChoice[] = [{ id: 'tool', key: null, keyLabel: null, value: null, constraints: {} }];
  for (const [k, label] of Object.entries(KEY_ARGS)) {
    const v = call.args?.[k];
    if ((typeof v === 'string' && v.trim() !== '') || typeof v === 'number') {
      out.push({ id: 'key:' + k, key: k, keyLabel: label, value: String(v), constraints: { [k]: v } });
    }
  }
  return out;
}

export type RuleDuration = 'forever' | 'hour' | 'day';

/** When a rule made now lapses; `null`: never. */
export function ruleExpiry(d: RuleDuration, now: number): number | null {
  if (d === 'hour') return now + 3_600_000;
  if (d === 'day') return now + 86_400_000;
  return null;
}

// The sticky in-app notice for calls that wait for the user in a conversation they are not looking
// at: what it says, and what its button does.
import type { CallView } from './bindings/CallView';
import type { Key } from './i18n';

export type Translate = (key: Key, params?: Record<string, string | number>) => string;

/** What the user is asked to do for a pending call. */
export function attentionKey(status: string): Key {
  if (status === 'awaiting_auth') return 'attention_auth';
  if (status === 'outcome_unknown') return 'attention_unknown';
  return 'attention_approval';
}

/** At most `max` characters (code points), with "…" when cut: long Chinese titles stay on one line. */
export function clip(text: string, max: number): string {
  const chars = [...text.trim()];
  return chars.length <= max ? chars.join('') : chars.slice(0, Math.max(1, max - 1)).join('') + '…';
}

export interface AttentionNotice {
  /** The message (a long session title is clipped). */
  text: string;
  /** The same with the whole title, for the tooltip. */
  full: string;
  /** The button: jump to the one call, or open the inbox for several. */
  action: 'jump' | 'inbox';
  label: string;
}

export const TITLE_MAX = 18;

/** The notice for the calls that wait elsewhere; null when there are none. */
export function attentionNotice(
  calls: (Pick<CallView, 'status' | 'session_id'> & Partial<Pick<CallView, 'requester'>>)[],
  titleOf: (sessionId: string) => string,
  t: Translate,
): AttentionNotice | null {
  if (calls.length === 0) return null;
  if (calls.length > 1) {
    const text = t('attention_many', { n: calls.length });
    return { text, full: text, action: 'inbox', label: t('attention_open_inbox') };
  }
  const c = calls[0];
  // Another agent's request: named by the agent (its session is none of the user's conversations).
  if (c.requester?.trim() && c.status === 'awaiting_approval') {
    const name = c.requester.trim();
    return {
      text: t('attention_agent', { name: clip(name, TITLE_MAX) }),
      full: t('attention_agent', { name }),
      action: 'jump',
      label: t('attention_jump'),
    };
  }
  const title = titleOf(c.session_id);
  const key = attentionKey(c.status);
  return {
    text: t(key, { title: clip(title, TITLE_MAX) }),
    full: t(key, { title }),
    action: 'jump',
    label: t('attention_jump'),
  };
}

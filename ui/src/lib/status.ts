// A call's state as the status chip and the collapsed line show it.
import type { CallView } from './bindings/CallView';
import type { ToolResultView } from './bindings/ToolResultView';
import type { Key } from './i18n';

export type Tone = 'blue' | 'amber' | 'red' | 'green' | 'grey';
export interface Status {
  key: Key;
  tone: Tone;
}

export function callStatus(call: CallView | undefined, result: ToolResultView | null | undefined, running: boolean): Status {
  if (!call) {
    if (result) return result.is_error ? { key: 'st_failed', tone: 'red' } : { key: 'st_done', tone: 'green' };
    return running ? { key: 'st_running', tone: 'blue' } : { key: 'st_done', tone: 'grey' };
  }
  switch (call.status) {
    case 'awaiting_approval':
      return { key: 'st_awaiting_approval', tone: 'amber' };
    case 'awaiting_auth':
      return { key: 'st_awaiting_auth', tone: 'amber' };
    case 'outcome_unknown':
      return { key: 'st_outcome_unknown', tone: 'amber' };
    case 'approved':
      return { key: 'st_approved', tone: 'blue' };
    case 'dispatching':
      return { key: 'st_running', tone: 'blue' };
  }
  switch (call.verdict) {
    case 'rejected':
      return { key: 'st_rejected', tone: 'red' };
    case 'expired':
      return { key: 'st_expired', tone: 'grey' };
    case 'superseded':
      return { key: 'st_superseded', tone: 'grey' };
    case 'cancelled':
      return { key: 'st_cancelled', tone: 'grey' };
  }
  switch (call.outcome) {
    case 'failed':
      return { key: 'st_failed', tone: 'red' };
    case 'blocked':
      return { key: 'st_blocked', tone: 'red' };
    case 'cancelled':
      return { key: 'st_cancelled', tone: 'grey' };
  }
  if (result?.is_error) return { key: 'st_failed', tone: 'red' };
  return { key: 'st_done', tone: 'green' };
}

/** The one-line decision a resolved approval collapses into, or null when there was none. */
export function decisionLine(
  call: CallView | undefined,
): { key: Key; tone: Tone; reason?: string; reasonText?: { zh: string; en: string } } | null {
  if (!call || !call.verdict) return null;
  const byRule = call.decided_by?.startsWith('rule:') ?? false;
  const inFeishu = call.decided_by === 'user:feishu';
  switch (call.verdict) {
    case 'approved':
      if (inFeishu) return { key: 'decided_approved_feishu', tone: 'green' };
      return byRule ? { key: 'decided_by_rule', tone: 'green' } : { key: 'decided_approved', tone: 'green' };
    case 'approved_edited':
      return { key: 'decided_approved_edited', tone: 'green' };
    case 'rejected':
      if (inFeishu && !call.reason) return { key: 'decided_rejected_feishu', tone: 'red' };
      return call.reason
        ? { key: 'decided_rejected_reason', tone: 'red', reason: call.reason }
        : { key: 'decided_rejected', tone: 'red' };
    // The engine's reason, in the user's language, says why (a new message, Stop, the clock).
    case 'expired':
      return { key: 'decided_expired', tone: 'grey', reasonText: call.reason_text ?? undefined };
    case 'superseded':
      return { key: 'decided_superseded', tone: 'grey', reasonText: call.reason_text ?? undefined };
    case 'cancelled':
      return { key: 'decided_cancelled', tone: 'grey', reasonText: call.reason_text ?? undefined };
    case 'always_allowed':
      return { key: 'decided_always', tone: 'green' };
  }
  return null;
}

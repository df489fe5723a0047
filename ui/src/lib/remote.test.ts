import { describe, expect, it } from 'vitest';
import type { CallView } from './bindings/CallView';
import { decisionLine } from './status';
import { en, zh } from './i18n/remote';

const call = (decided_by: string, verdict: string, reason: string | null = null): CallView => ({
  call_id: 'fc_1', session_id: 's', invocation_id: 'i', tool: 'send_message', title: { zh: '发送消息', en: 'Send a message' },
  args: {}, original_args: null, status: 'done', pending: false, requires_approval: true, preview: null, scopes: [],
  authorize_url: null, scope_apply_url: null, verdict, decided_by, reason, reason_text: null, outcome: null, created_at: 1, expires_at: null, updated_at: 1, requester: null,
});

describe('a decision made in Feishu', () => {
  it('says so on the app’s card', () => {
    expect(decisionLine(call('user:feishu', 'approved'))?.key).toBe('decided_approved_feishu');
    expect(decisionLine(call('user:feishu', 'rejected'))?.key).toBe('decided_rejected_feishu');
    expect(decisionLine(call('user:feishu', 'rejected', '下周'))?.reason).toBe('下周');
    expect(decisionLine(call('user', 'approved'))?.key).toBe('decided_approved');
  });
  it('has every string in both languages', () => {
    for (const key of Object.keys(en) as (keyof typeof en)[]) {
      expect(en[key].trim(), key).not.toBe('');
      expect(zh[key].trim(), key).not.toBe('');
    }
  });
});

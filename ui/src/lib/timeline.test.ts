import { describe, expect, it } from 'vitest';
import type { CallView } from './bindings/CallView';
import type { TimelineItem } from './bindings/TimelineItem';
import { addLocalUser, applyEvent, emptyTimeline, entryKey, fromView } from './timeline';

const title = { zh: '发送消息', en: 'Send a message' };
function call(over: Partial<CallView> = {}): CallView {
  return {
    call_id: 'c1', session_id: 's1', invocation_id: 'i1', tool: 'send_message', title, args: { chat_id: 'oc_1' },
    original_args: null, status: 'awaiting_approval', pending: true, requires_approval: true, preview: null, scopes: [],
    authorize_url: null, scope_apply_url: null, verdict: null, decided_by: null, reason: null, reason_text: null, outcome: null, created_at: 1, expires_at: null,
    updated_at: 1, requester: null, ...over,
  };
}
const toolItem = (over: Partial<Extract<TimelineItem, { kind: 'tool' }>> = {}): TimelineItem => ({
  kind: 'tool', call_id: 'c1', at: 2, tool: 'send_message', title, args: { chat_id: 'oc_1' }, result: null, ...over,
});

describe('timeline reducer', () => {
  it('appends streamed text chunks to one draft per turn', () => {
    let s = emptyTimeline('s1');
    s = applyEvent(s, { type: 'text', session_id: 's1', invocation_id: 'i1', text: '你好' });
    s = applyEvent(s, { type: 'text', session_id: 's1', invocation_id: 'i1', text: '，世界' });
    expect(s.items).toEqual([{ kind: 'draft', invocation_id: 'i1', text: '你好，世界' }]);
    s = applyEvent(s, { type: 'text', session_id: 's1', invocation_id: 'i2', text: 'B' });
    expect(s.items.length).toBe(2);
  });

  it('ignores events of other sessions', () => {
    const s = emptyTimeline('s1');
    expect(applyEvent(s, { type: 'text', session_id: 's2', invocation_id: 'i1', text: 'x' })).toBe(s);
    expect(applyEvent(s, { type: 'call', call: call({ session_id: 's2' }) })).toBe(s);
  });

  it('stored items replace the draft of their turn, in its place', () => {
    let s = emptyTimeline('s1');
    s = applyEvent(s, { type: 'items', session_id: 's1', invocation_id: 'i0', items: [{ kind: 'user', id: 'u1', at: 1, text: 'hi' }] });
    s = applyEvent(s, { type: 'text', session_id: 's1', invocation_id: 'i1', text: 'Hel' });
    s = applyEvent(s, {
      type: 'items', session_id: 's1', invocation_id: 'i1',
      items: [{ kind: 'assistant', id: 'a1', at: 2, author: 'x', text: 'Hello', stopped: false }],
    });
    expect(s.items.map((e) => e.kind)).toEqual(['user', 'assistant']);
    expect(s.items.some((e) => e.kind === 'draft')).toBe(false);
  });

  it('a stored user message replaces the locally shown one', () => {
    let s = addLocalUser(emptyTimeline('s1'), 'local:1', 'hi', 1);
    s = applyEvent(s, { type: 'items', session_id: 's1', invocation_id: 'i1', items: [{ kind: 'user', id: 'u1', at: 1, text: 'hi' }] });
    expect(s.items).toEqual([{ kind: 'user', id: 'u1', at: 1, text: 'hi' }]);
  });

  it('merges a tool result into the entry of its call, keeping the args', () => {
    let s = emptyTimeline('s1');
    s = applyEvent(s, { type: 'items', session_id: 's1', invocation_id: 'i1', items: [toolItem()] });
    s = applyEvent(s, {
      type: 'items', session_id: 's1', invocation_id: 'i1',
      items: [toolItem({ args: {}, at: 9, result: { is_error: false, text: 'ok', lines: [] } })],
    });
    expect(s.items.length).toBe(1);
    const t = s.items[0];
    expect(t.kind === 'tool' && t.result?.text).toBe('ok');
    expect(t.kind === 'tool' && t.args).toEqual({ chat_id: 'oc_1' });
  });

  it('a call event updates the call and gives it an entry when none exists', () => {
    let s = emptyTimeline('s1');
    s = applyEvent(s, { type: 'call', call: call() });
    expect(s.calls.c1.status).toBe('awaiting_approval');
    expect(s.items.map(entryKey)).toEqual(['t:c1']);
    // The entry arrives afterwards: no duplicate.
    s = applyEvent(s, { type: 'items', session_id: 's1', invocation_id: 'i1', items: [toolItem()] });
    expect(s.items.length).toBe(1);
    s = applyEvent(s, { type: 'call', call: call({ status: 'done', pending: false, verdict: 'approved' }) });
    expect(s.calls.c1.verdict).toBe('approved');
    expect(s.items.length).toBe(1);
  });

  it('a call of a streaming turn goes before its draft', () => {
    let s = emptyTimeline('s1');
    s = applyEvent(s, { type: 'text', session_id: 's1', invocation_id: 'i1', text: 'a' });
    s = applyEvent(s, { type: 'call', call: call() });
    expect(s.items.map((e) => e.kind)).toEqual(['tool', 'draft']);
  });

  it('turn events set running', () => {
    let s = emptyTimeline('s1');
    s = applyEvent(s, { type: 'turn', session_id: 's1', invocation_id: 'i1', status: 'running' });
    expect(s.running).toBe(true);
    s = applyEvent(s, { type: 'turn', session_id: 's1', invocation_id: 'i1', status: 'suspended' });
    expect(s.running).toBe(false);
  });

  it('fromView merges results and keeps calls', () => {
    const s = fromView({
      session_id: 's1', running: false, calls: [call()], autonomy: { mode: 'ask', until: null },
      items: [toolItem(), toolItem({ args: {}, result: { is_error: true, text: 'no', lines: [] } })],
    });
    expect(s.items.length).toBe(1);
    expect(s.calls.c1).toBeDefined();
  });
});

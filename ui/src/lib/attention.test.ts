import { describe, expect, it } from 'vitest';
import { attentionKey, attentionNotice, clip } from './attention';
import { translate, type Key } from './i18n';

const zh = (key: Key, p?: Record<string, string | number>) => translate('zh', key, p);
const en = (key: Key, p?: Record<string, string | number>) => translate('en', key, p);
const titles: Record<string, string> = { s1: '本周周报', s2: '安排下周一例会' };
const titleOf = (id: string) => titles[id] ?? '新对话';

describe('attention notice', () => {
  it('says nothing when nothing waits elsewhere', () => {
    expect(attentionNotice([], titleOf, zh)).toBeNull();
  });
  it('names the conversation and what it needs', () => {
    expect(attentionNotice([{ status: 'awaiting_approval', session_id: 's1' }], titleOf, zh)).toEqual({
      text: '「本周周报」有一项需要你批准',
      full: '「本周周报」有一项需要你批准',
      action: 'jump',
      label: '查看',
    });
    expect(attentionNotice([{ status: 'awaiting_auth', session_id: 's2' }], titleOf, zh)?.text).toBe('「安排下周一例会」有一项需要登录飞书');
    const e = attentionNotice([{ status: 'awaiting_auth', session_id: 's1' }], titleOf, en);
    expect(e?.text).toBe('“本周周报” needs you to sign in');
    expect(e?.label).toBe('Jump to it');
    expect(attentionNotice([{ status: 'outcome_unknown', session_id: 's1' }], titleOf, en)?.text).toBe(
      '“本周周报” needs you to check what happened',
    );
  });
  it('names the agent that asks, not its session', () => {
    const one = [{ status: 'awaiting_approval', session_id: 'agent-s', requester: 'Claude Code' }];
    expect(attentionNotice(one, titleOf, zh)?.text).toBe('Claude Code 请求你批准');
    expect(attentionNotice(one, titleOf, en)).toEqual({
      text: 'Claude Code asks for your approval',
      full: 'Claude Code asks for your approval',
      action: 'jump',
      label: 'Jump to it',
    });
    expect(attentionNotice([{ status: 'awaiting_approval', session_id: 's1', requester: null }], titleOf, zh)?.text).toBe('「本周周报」有一项需要你批准');
  });
  it('coalesces several into one that opens the inbox', () => {
    const n = attentionNotice(
      [
        { status: 'awaiting_approval', session_id: 's1' },
        { status: 'awaiting_auth', session_id: 's2' },
        { status: 'awaiting_approval', session_id: 's2' },
      ],
      titleOf,
      zh,
    );
    expect(n).toEqual({ text: '3 项需要你处理', full: '3 项需要你处理', action: 'inbox', label: '打开待审批' });
    expect(attentionNotice([{ status: 'a', session_id: 's1' }, { status: 'b', session_id: 's1' }], titleOf, en)?.text).toBe('2 items need you');
  });
  it('clips a long title and keeps it whole for the tooltip', () => {
    const long = '请帮我整理一下第三季度产品路线图评审会议的全部纪要';
    const n = attentionNotice([{ status: 'awaiting_approval', session_id: 'x' }], () => long, zh);
    expect(n?.text).toBe('「请帮我整理一下第三季度产品路线图评…」有一项需要你批准');
    expect(n?.full).toBe(`「${long}」有一项需要你批准`);
  });
  it('clips by characters, not UTF-16 units', () => {
    expect(clip('短标题', 18)).toBe('短标题');
    expect(clip('  spaced  ', 18)).toBe('spaced');
    expect(clip('😀😀😀😀', 3)).toBe('😀😀…');
    expect([...clip('一'.repeat(40), 18)].length).toBe(18);
  });
  it('maps statuses to what the user is asked', () => {
    expect(attentionKey('awaiting_approval')).toBe('attention_approval');
    expect(attentionKey('awaiting_auth')).toBe('attention_auth');
    expect(attentionKey('outcome_unknown')).toBe('attention_unknown');
  });
});

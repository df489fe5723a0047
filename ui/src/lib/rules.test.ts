import { describe, expect, it } from 'vitest';
import { alwaysAllowChoices, ruleExpiry } from './rules';

describe('always-allow choices', () => {
  it('always offers the whole tool, with no constraints', () => {
    const c = alwaysAllowChoices({ args: { text: 'hi' } });
    expect(c).toEqual([{ id: 'tool', key: null, keyLabel: null, value: null, constraints: {} }]);
  });
  it('offers one scoped choice per target argument', () => {
    const c = alwaysAllowChoices({ args: { chat_id: 'oc_1', calendar_id: 'cal_9', text: 'x' } });
    expect(c.map((x) => x.constraints)).toEqual([{}, { chat_id: 'oc_1' }, { calendar_id: 'cal_9' }]);
    expect(c[1].keyLabel).toBe('key_chat');
  });
  it('skips empty and non-scalar values', () => {
    const c = alwaysAllowChoices({ args: { chat_id: '', calendar_id: { a: 1 } } });
    expect(c.length).toBe(1);
  });
  it('computes rule expiry from a duration', () => {
    expect(ruleExpiry('forever', 1000)).toBeNull();
    expect(ruleExpiry('hour', 1000)).toBe(1000 + 3_600_000);
    expect(ruleExpiry('day', 0)).toBe(86_400_000);
  });
});

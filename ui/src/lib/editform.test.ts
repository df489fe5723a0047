import { describe, expect, it } from 'vitest';
import { hasFormFields, joinTime, jsonErrorLine, splitTime } from './editform';

describe('the edit form', () => {
  it('edits times as wall-clock values and keeps seconds and offset', () => {
    const parts = splitTime('2026-12-02T15:00:00+08:00');
    expect(parts).toEqual({ local: '2026-12-02T15:00', suffix: ':00+08:00' });
    expect(joinTime('2026-12-02T16:30', parts!.suffix)).toBe('2026-12-02T16:30:00+08:00');
    expect(splitTime('tomorrow')).toBeNull();
  });
  it('offers itself only for calls with common fields', () => {
    expect(hasFormFields({ summary: 'x', start: 'y' })).toBe(true);
    expect(hasFormFields({ task_guid: 'x' })).toBe(false);
  });
  it('finds the line of a JSON error', () => {
    const text = '{\n  "a": 1,\n  oops\n}';
    let message = '';
    try {
      JSON.parse(text);
    } catch (e) {
      message = (e as Error).message;
    }
    const line = jsonErrorLine(text, message);
    // Node reports a position or a line; either way it points at line 3.
    expect(line === null || line === 3).toBe(true);
    expect(jsonErrorLine(text, 'Unexpected token o in JSON at position 14')).toBe(3);
    expect(jsonErrorLine(text, 'Expected property name (line 3 column 3)')).toBe(3);
  });
});

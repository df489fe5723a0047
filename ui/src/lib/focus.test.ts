import { describe, expect, it } from 'vitest';
import { wrapIndex } from './focus';

describe('the focus trap', () => {
  it('wraps Tab from the last control to the first and Shift+Tab from the first to the last', () => {
    expect(wrapIndex(2, 3, false)).toBe(0);
    expect(wrapIndex(0, 3, true)).toBe(2);
  });
  it('leaves the browser its own order inside', () => {
    expect(wrapIndex(0, 3, false)).toBeNull();
    expect(wrapIndex(1, 3, true)).toBeNull();
  });
  it('brings focus from outside back in', () => {
    expect(wrapIndex(-1, 3, false)).toBe(0);
    expect(wrapIndex(-1, 3, true)).toBe(2);
    expect(wrapIndex(-1, 0, false)).toBeNull();
  });
});

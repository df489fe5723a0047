import { describe, expect, it } from 'vitest';
import { clockUntil, connectShown, deviceOf, formatClock, isExpired, qrViewBox, remainingMs, safeQrPath, signInShown } from './connect';
import type { DeviceCodeView } from './bindings/DeviceCodeView';

const qr = { size: 21, path: 'M0 0h7v1H0zM2 2h3v3H2z' };
const device = (expires_at: number): DeviceCodeView => ({ user_code: 'ABCD-EFGH', qr, url: 'https://x', expires_at, interval_secs: 5 });

describe('countdown', () => {
  it('reads as mm:ss, rounding seconds up', () => {
    expect(formatClock(300_000)).toBe('05:00');
    expect(formatClock(299_001)).toBe('05:00');
    expect(formatClock(299_000)).toBe('04:59');
    expect(formatClock(61_000)).toBe('01:01');
    expect(formatClock(9_500)).toBe('00:10');
    expect(formatClock(1)).toBe('00:01');
    expect(formatClock(0)).toBe('00:00');
    expect(formatClock(-5_000)).toBe('00:00');
    expect(formatClock(75 * 60_000)).toBe('75:00');
  });
  it('counts down to a moment and says when it is over', () => {
    expect(remainingMs(10_000, 4_000)).toBe(6_000);
    expect(remainingMs(10_000, 12_000)).toBe(0);
    expect(clockUntil(1_000 + 90_000, 1_000)).toBe('01:30');
    expect(isExpired(10_000, 9_999)).toBe(false);
    expect(isExpired(10_000, 10_000)).toBe(true);
  });
});

describe('the QR drawing', () => {
  it('keeps plain path data and draws nothing for anything else', () => {
    expect(safeQrPath(qr)).toBe(qr.path);
    expect(safeQrPath({ size: 21, path: 'M0 0h1v1h-1z M3,4 l1 0' })).toBe('M0 0h1v1h-1z M3,4 l1 0');
    expect(safeQrPath({ size: 21, path: 'M0 0"/><script>alert(1)</script>' })).toBe('');
    expect(safeQrPath({ size: 21, path: 'url(javascript:1)' })).toBe('');
  });
  it('adds the four-module quiet zone on each side', () => {
    expect(qrViewBox(21)).toBe('-4 -4 29 29');
    expect(qrViewBox(33)).toBe('-4 -4 41 41');
  });
});

describe('a code that ran out', () => {
  const waiting = { state: 'waiting' as const, url: 'https://x', user_code: 'AB', qr, expires_at: 10_000 };
  it('reads as expired in the connect panel once its time is over', () => {
    expect(connectShown(waiting, 9_000)).toBe(waiting);
    expect(connectShown(waiting, 10_000)).toEqual({ state: 'failed', reason: 'expired', message: null });
    const connected = { state: 'connected' as const, app_id: 'cli_1', brand: 'feishu' as const, needs_model: false };
    expect(connectShown(connected, 99_999)).toBe(connected);
  });
  it('reads as expired on a device sign-in, not on a browser one', () => {
    const dev = { state: 'waiting' as const, url: 'https://x', device: device(10_000) };
    expect(signInShown(dev, 9_000)).toBe(dev);
    expect(signInShown(dev, 10_001)).toEqual({ state: 'expired' });
    const browser = { state: 'waiting' as const, url: 'https://x', device: null };
    expect(signInShown(browser, 99_999)).toBe(browser);
    expect(signInShown({ state: 'idle' }, 99_999)).toEqual({ state: 'idle' });
  });
  it('finds the device code of a waiting sign-in only', () => {
    expect(deviceOf({ state: 'waiting', device: device(1) })?.user_code).toBe('ABCD-EFGH');
    expect(deviceOf({ state: 'waiting', device: null })).toBeNull();
    expect(deviceOf({ state: 'idle' })).toBeNull();
  });
});

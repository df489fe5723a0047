import { describe, expect, it } from 'vitest';
import { formatAge, formatCountdown, formatDuration, formatStamp } from './format';

const M = 60_000;
const H = 60 * M;
describe('countdown formatting', () => {
  it('shows hours and minutes', () => {
    expect(formatCountdown(1000 + 23 * H + 59 * M, 1000, 'zh')).toBe('23 小时 59 分后过期');
    expect(formatCountdown(1000 + 23 * H + 59 * M, 1000, 'en')).toBe('expires in 23h 59m');
  });
  it('rounds partial minutes to the nearest, so a lagging clock tick does not add one', () => {
    expect(formatCountdown(23 * H + 58 * M + 30_000, 0, 'en')).toBe('expires in 23h 59m');
    expect(formatCountdown(30 * M + 900, 0, 'en')).toBe('expires in 30m');
  });
  it('shows days, minutes and seconds', () => {
    expect(formatDuration(2 * 24 * H + 3 * H, 'en')).toBe('2d 3h');
    expect(formatDuration(5 * M, 'zh')).toBe('5 分钟');
    expect(formatDuration(42_000, 'en')).toBe('42s');
    expect(formatDuration(H, 'en')).toBe('1h');
  });
  it('reads one minute for a one-minute expiry, from the first render on', () => {
    // The card renders up to a second after the engine stamped the expiry, or a clock tick late:
    // either way a 1-minute expiry must not read "2 minutes".
    expect(formatCountdown(60_000, 0, 'en')).toBe('expires in 1m');
    expect(formatCountdown(60_000, 0, 'zh')).toBe('1 分钟后过期');
    expect(formatCountdown(60_900, 0, 'en')).toBe('expires in 1m');
    expect(formatCountdown(60_000, 50, 'zh')).toBe('1 分钟后过期');
    expect(formatCountdown(60_000, 1_000, 'en')).toBe('expires in 59s');
    expect(formatCountdown(61_000, 0, 'en')).toBe('expires in 1m 01s');
    expect(formatCountdown(9 * M + 59_000, 0, 'zh')).toBe('9 分 59 秒后过期');
    expect(formatCountdown(2 * M, 0, 'en')).toBe('expires in 2m');
  });
  it('says expired once past', () => {
    expect(formatCountdown(1000, 1000, 'en')).toBe('expired');
    expect(formatCountdown(0, 1000, 'zh')).toBe('已过期');
  });
  it('formats ages', () => {
    expect(formatAge(0, 30_000, 'en')).toBe('just now');
    expect(formatAge(0, 5 * M, 'zh')).toBe('5 分钟前');
    expect(formatAge(0, 3 * H, 'en')).toBe('3h ago');
  });
});

describe('table timestamps', () => {
  const at = new Date(2026, 10, 30, 22, 30, 5).getTime();
  it('leave out this year', () => {
    const now = new Date(2026, 11, 1).getTime();
    expect(formatStamp(at, now, 'zh')).toBe('11月30日 22:30:05');
    expect(formatStamp(at, now, 'en')).toBe('Nov 30, 22:30:05');
  });
  it('show another year', () => {
    const now = new Date(2027, 0, 2).getTime();
    expect(formatStamp(at, now, 'zh')).toMatch(/^2026年11月30日 22:30:05$/);
    expect(formatStamp(at, now, 'en')).toMatch(/^Nov 30, 2026,? 22:30:05$/);
  });
});

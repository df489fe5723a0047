// Time formatting: countdowns, ages and timestamps, in the UI language.
import type { Lang } from './i18n';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/** The locale the browser formats dates in for a UI language. */
const locale = (lang: Lang) => (lang === 'zh' ? 'zh-CN' : 'en-US');

/**
 * A duration in words: "23h 59m" / "23 小时 59 分". Under ten minutes it counts seconds too
 * ("1m 01s"), so a one-minute expiry reads one minute from the first render, never "2m"; above,
 * minutes round to the nearest (a countdown under ten minutes never shows 0 early).
 */
export function formatDuration(ms: number, lang: Lang): string {
  const total = Math.max(0, ms);
  if (total < MIN) {
    const s = Math.ceil(total / 1000);
    if (s >= 60) return lang === 'zh' ? '1 分钟' : '1m';
    return lang === 'zh' ? `${s} 秒` : `${s}s`;
  }
  if (total < 10 * MIN) {
    const secs = Math.floor(total / 1000);
    const m = Math.floor(secs / 60);
    const s = secs % 60;
    if (lang === 'zh') return s > 0 ? `${m} 分 ${s} 秒` : `${m} 分钟`;
    return s > 0 ? `${m}m ${String(s).padStart(2, '0')}s` : `${m}m`;
  }
  // Nearest minute: from ten minutes up a half-minute either way does not matter, and a clock
  // tick that lags a second must not turn "30 minutes" into "31".
  const mins = Math.round(total / MIN);
  const d = Math.floor(mins / (24 * 60));
  const h = Math.floor((mins % (24 * 60)) / 60);
  const m = mins % 60;
  if (lang === 'zh') {
    if (d > 0) return h > 0 ? `${d} 天 ${h} 小时` : `${d} 天`;
    if (h > 0) return m > 0 ? `${h} 小时 ${m} 分` : `${h} 小时`;
    return `${m} 分钟`;
  }
  if (d > 0) return h > 0 ? `${d}d ${h}h` : `${d}d`;
  if (h > 0) return m > 0 ? `${h}h ${m}m` : `${h}h`;
  return `${m}m`;
}

/** "23 小时 59 分后过期" / "expires in 23h 59m", or "已过期" / "expired" once past. */
export function formatCountdown(expiresAt: number, now: number, lang: Lang): string {
  const left = expiresAt - now;
  if (left <= 0) return lang === 'zh' ? '已过期' : 'expired';
  const d = formatDuration(left, lang);
  return lang === 'zh' ? `${d}后过期` : `expires in ${d}`;
}

/** How long ago: "刚刚" / "just now", "5 分钟前" / "5m ago", … and a date beyond a week. */
export function formatAge(at: number, now: number, lang: Lang): string {
  const ago = now - at;
  if (ago < MIN) return lang === 'zh' ? '刚刚' : 'just now';
  if (ago < HOUR) {
    const n = Math.floor(ago / MIN);
    return lang === 'zh' ? `${n} 分钟前` : `${n}m ago`;
  }
  if (ago < DAY) {
    const n = Math.floor(ago / HOUR);
    return lang === 'zh' ? `${n} 小时前` : `${n}h ago`;
  }
  if (ago < 7 * DAY) {
    const n = Math.floor(ago / DAY);
    return lang === 'zh' ? `${n} 天前` : `${n}d ago`;
  }
  return formatDate(at, lang);
}

/** A short date: "5月3日" / "May 3". */
export function formatDate(at: number, lang: Lang): string {
  return new Date(at).toLocaleDateString(locale(lang), { month: 'short', day: 'numeric' });
}

/** Date and time: "2025/5/3 14:05" style, in the UI language. */
export function formatDateTime(at: number, lang: Lang): string {
  return dateAndClock(at, lang, true);
}

/** Just the clock time "14:05". */
export function formatTime(at: number, lang: Lang): string {
  return new Date(at).toLocaleTimeString(locale(lang), {
    hour: '2-digit',
    minute: '2-digit',
    hour12: false,
  });
}

/** A compact timestamp for tables: "11月30日 22:30:05" / "Nov 30, 22:30:05", with the year only when it is not this year's. */
export function formatStamp(at: number, now: number, lang: Lang): string {
  return dateAndClock(at, lang, new Date(at).getFullYear() !== new Date(now).getFullYear());
}

/** Month, day and the 24-hour time with seconds, and the year when `withYear`. */
function dateAndClock(at: number, lang: Lang, withYear: boolean): string {
  return new Date(at).toLocaleString(locale(lang), {
    year: withYear ? 'numeric' : undefined,
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false,
  });
}

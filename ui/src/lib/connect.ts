// "Connect my Feishu" and the device-flow sign-in: the countdown under a QR code, the QR's
// drawing, and what the screen shows once a code ran out before the core said so.
import type { ConnectView } from './bindings/ConnectView';
import type { DeviceCodeView } from './bindings/DeviceCodeView';
import type { QrView } from './bindings/QrView';
import type { SignInView } from './bindings/SignInView';

/** Milliseconds left until `expiresAt` (Unix ms), never below zero. */
export function remainingMs(expiresAt: number, now: number): number {
  return Math.max(0, expiresAt - now);
}

/**
 * A countdown as a clock, "mm:ss" (minutes may exceed 59: "75:00"). Seconds round up, so the
 * clock reads 00:00 only once the time is really over, and a full five minutes reads 05:00.
 */
export function formatClock(ms: number): string {
  const total = Math.ceil(Math.max(0, ms) / 1000);
  const m = Math.floor(total / 60);
  const s = total % 60;
  return `${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}`;
}

/** The clock for a code that runs out at `expiresAt`. */
export function clockUntil(expiresAt: number, now: number): string {
  return formatClock(remainingMs(expiresAt, now));
}

/** Whether a code that runs out at `expiresAt` has run out at `now`. */
export function isExpired(expiresAt: number, now: number): boolean {
  return remainingMs(expiresAt, now) === 0;
}

/** Path data as a QR code is drawn: moves, lines and closes with numbers, nothing else. */
const PATH_DATA = /^[MmLlHhVvZz0-9eE.,\s+-]*$/;

/** The QR's path data when it is plain path data, or `''` (nothing is drawn) when it is not. */
export function safeQrPath(qr: QrView): string {
  return PATH_DATA.test(qr.path) ? qr.path : '';
}

/** The viewBox of a QR code of `size` modules with its four-module quiet zone. */
export function qrViewBox(size: number): string {
  const n = Math.max(0, Math.floor(size)) + 8;
  return `-4 -4 ${n} ${n}`;
}

/** The dialog's state: before Start (`intro`), asked (`starting`), or as the core says. */
export type ConnectState = { state: 'intro' } | { state: 'starting' } | ConnectView;

/** What the connect panel shows in its failed state: the core's message, or none when the UI found the expiry itself. */
export type ConnectShown =
  | Exclude<ConnectState, { state: 'failed' }>
  | { state: 'failed'; reason: Extract<ConnectView, { state: 'failed' }>['reason']; message: { zh: string; en: string } | null };

/** The connect state as shown at `now`: a waiting code whose time is over reads as expired at once. */
export function connectShown(c: ConnectState, now: number): ConnectShown {
  if (c.state === 'waiting' && isExpired(c.expires_at, now)) return { state: 'failed', reason: 'expired', message: null };
  return c;
}

/** The device code a sign-in waits on, if it is a device-flow sign-in. */
export function deviceOf(s: { state: string } & Partial<{ device: DeviceCodeView | null }>): DeviceCodeView | null {
  return s.state === 'waiting' ? (s.device ?? null) : null;
}

/** A sign-in as shown at `now`: a device-flow sign-in whose QR ran out reads as expired at once. */
export function signInShown<T extends { state: string }>(s: T | SignInView, now: number): T | SignInView {
  if (s.state === 'waiting') {
    const d = (s as Extract<SignInView, { state: 'waiting' }>).device;
    if (d && isExpired(d.expires_at, now)) return { state: 'expired' };
  }
  return s;
}

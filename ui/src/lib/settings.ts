// Settings checks the page shows inline (the backend checks again and may reject with a message).
import type { Settings } from './bindings/Settings';
import type { Key } from './i18n';

export type FieldErrors = Partial<Record<'base_url' | 'app_id' | 'port' | 'expiry', Key>>;

/** The redirect URL for a port as typed, exactly as it must be registered. */
export function redirectUrl(port: string | number): string {
  return `http://127.0.0.1:${String(port).trim()}/callback`;
}

export function validPort(text: string): boolean {
  if (!/^\d+$/.test(text.trim())) return false;
  const n = Number(text);
  return n >= 1024 && n <= 65535;
}

export function validateSettings(s: Settings, portText: string, expiryText: string): FieldErrors {
  const e: FieldErrors = {};
  const base = (s.model.base_url ?? '').trim();
  if (s.model.preset === 'custom' && !base) e.base_url = 'base_url_required';
  else if (base && !/^https?:\/\/\S+$/i.test(base)) e.base_url = 'base_url_invalid';
  const id = s.feishu.app_id.trim();
  if (id && !id.startsWith('cli_')) e.app_id = 'app_id_invalid';
  if (!validPort(portText)) e.port = 'port_invalid';
  if (!/^\d+$/.test(expiryText.trim()) || Number(expiryText) < 1) e.expiry = 'expiry_invalid';
  return e;
}

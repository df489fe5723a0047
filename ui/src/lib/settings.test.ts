import { describe, expect, it } from 'vitest';
import type { Settings } from './bindings/Settings';
import { redirectUrl, validateSettings } from './settings';

const base: Settings = {
  language: 'system', theme: 'system', model: { preset: 'deepseek', base_url: null, model: null },
  feishu: { brand: 'feishu', app_id: '', redirect_port: 53682, sign_in_flow: 'auto', created_by_app: false }, approval_expiry_minutes: 1440, time_zone: '',
  check_for_updates: true,
  assistant: { instruction: null, disabled_tools: [], python_files: {} },
  remote_approval: { enabled: false, when: 'away', away_minutes: 10 },
};
describe('settings checks', () => {
  it('accepts the defaults', () => {
    expect(validateSettings(base, '53682', '24')).toEqual({});
  });
  it('needs a base URL for custom', () => {
    expect(validateSettings({ ...base, model: { ...base.model, preset: 'custom' } }, '53682', '1').base_url).toBe('base_url_required');
  });
  it('checks App ID, port and expiry', () => {
    const e = validateSettings({ ...base, feishu: { ...base.feishu, app_id: 'app_1' } }, '80', '0');
    expect(e).toEqual({ app_id: 'app_id_invalid', port: 'port_invalid', expiry: 'expiry_invalid' });
  });
  it('computes the redirect URL', () => {
    expect(redirectUrl('8765')).toBe('http://127.0.0.1:8765/callback');
  });
});

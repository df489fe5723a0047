import { describe, expect, it } from 'vitest';
import { en, zh, translate, resolveLang, pick, type Key } from './i18n';

describe('i18n', () => {
  it('every key has a non-empty zh and en string', () => {
    const keys = Object.keys(en) as Key[];
    expect(keys.length).toBeGreaterThan(100);
    for (const k of keys) {
      expect(en[k].trim(), `en.${k}`).not.toBe('');
      expect((zh[k] ?? '').trim(), `zh.${k}`).not.toBe('');
    }
    expect(Object.keys(zh).sort()).toEqual(keys.sort());
  });
  it('placeholders match between languages', () => {
    const ph = (s: string) => (s.match(/\{\w+\}/g) ?? []).sort();
    for (const k of Object.keys(en) as Key[]) expect(ph(zh[k]), k).toEqual(ph(en[k]));
  });
  it('fills placeholders', () => {
    expect(translate('en', 'approve_selected', { n: 3 })).toBe('Approve selected (3)');
    expect(translate('zh', 'decided_rejected_reason', { reason: '改到周五' })).toBe('已拒绝：改到周五');
  });
  it('follows the system unless set', () => {
    expect(resolveLang('system', 'zh-CN')).toBe('zh');
    expect(resolveLang('system', 'en-GB')).toBe('en');
    expect(resolveLang('en', 'zh-TW')).toBe('en');
    expect(resolveLang('zh', 'en-US')).toBe('zh');
  });
  it('picks backend text with a fallback', () => {
    expect(pick({ zh: '中', en: 'EN' }, 'zh')).toBe('中');
    expect(pick({ zh: '', en: 'EN' }, 'zh')).toBe('EN');
    expect(pick(null, 'en')).toBe('');
  });
});

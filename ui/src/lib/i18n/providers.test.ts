import { describe, expect, it } from 'vitest';
import { en, zh, MODEL_ERROR_CODES, secondsLeft } from './providers';

// Every finish reason the backend can send (view.rs, TimelineItem::Stopped).
const REASONS = ['max_tokens', 'content_filter', 'refusal', 'recitation', 'malformed_function_call', 'other'];

describe('provider strings', () => {
  it('every stop reason and model error has words and what to do, in both languages', () => {
    for (const r of REASONS) {
      for (const k of [`stopped_${r}`, `stopped_${r}_do`]) {
        expect(en[k as keyof typeof en], k).toBeTruthy();
        expect(zh[k as keyof typeof zh], k).toBeTruthy();
      }
    }
    for (const c of MODEL_ERROR_CODES) {
      expect(en[`err_${c}` as keyof typeof en], c).toBeTruthy();
      expect(zh[`err_${c}` as keyof typeof zh], c).toBeTruthy();
      if (c !== 'rate_limited') expect(zh[`err_${c}_do` as keyof typeof zh], c).toBeTruthy();
    }
    expect(zh.reasoning_title).toBe('思考过程');
  });
  it('counts down whole seconds, never below zero', () => {
    expect(secondsLeft(10_000, 0)).toBe(10);
    expect(secondsLeft(10_000, 9_001)).toBe(1);
    expect(secondsLeft(10_000, 10_000)).toBe(0);
    expect(secondsLeft(10_000, 20_000)).toBe(0);
  });
});

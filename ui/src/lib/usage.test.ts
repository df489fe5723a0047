import { describe, expect, it } from 'vitest';
import type { Entry } from './timeline';
import { usageByTurn, visibleEntries } from './usage';

const usage = (id: string, inv: string, input: number, output: number, reasoning = 0): Entry => ({
  kind: 'usage',
  id,
  invocation_id: inv,
  at: 0,
  input_tokens: input,
  output_tokens: output,
  reasoning_tokens: reasoning,
});

describe('token usage per turn', () => {
  it('sums each turn over its model calls and shows one line where the turn ends', () => {
    const items: Entry[] = [
      { kind: 'user', id: 'u1', at: 0, text: '明天？' },
      usage('e1', 'inv1', 100, 20, 10),
      { kind: 'assistant', id: 'e2', at: 0, author: 'a', text: '明天有周会。', stopped: false },
      usage('e2', 'inv1', 150, 30, 5),
      { kind: 'user', id: 'u2', at: 0, text: '谢谢' },
      usage('e3', 'inv2', 200, 5),
    ];
    const turns = usageByTurn(items);
    expect(turns.get('inv1')).toEqual({ input: 250, output: 50, reasoning: 15, last: 'e2' });
    expect(turns.get('inv2')).toEqual({ input: 200, output: 5, reasoning: 0, last: 'e3' });
    const shown = visibleEntries(items, turns).map((e) => e.kind + ':' + ('id' in e ? e.id : ''));
    expect(shown).toEqual(['user:u1', 'assistant:e2', 'usage:e2', 'user:u2', 'usage:e3']);
  });
});

// Token usage per turn: the backend sends one usage entry per model call; the conversation shows
// one line per turn, summed, where the turn's last usage entry is.
import type { Entry } from './timeline';

export type TurnUsage = { input: number; output: number; reasoning: number; last: string };

/** The summed usage of each turn (by invocation id), with the id of its last usage entry. */
export function usageByTurn(items: readonly Entry[]): Map<string, TurnUsage> {
  const turns = new Map<string, TurnUsage>();
  for (const e of items) {
    if (e.kind !== 'usage') continue;
    const t = turns.get(e.invocation_id) ?? { input: 0, output: 0, reasoning: 0, last: e.id };
    t.input += e.input_tokens;
    t.output += e.output_tokens;
    t.reasoning += e.reasoning_tokens;
    t.last = e.id;
    turns.set(e.invocation_id, t);
  }
  return turns;
}

/** The entries to show: usage entries only where a turn's line goes. */
export function visibleEntries(items: readonly Entry[], turns: Map<string, TurnUsage>): Entry[] {
  return items.filter((e) => e.kind !== 'usage' || turns.get(e.invocation_id)?.last === e.id);
}

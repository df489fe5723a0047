// The conversation's state and how events change it. Pure functions over immutable values, so
// they are easy to test and cheap to hand to a $state.raw store.
import type { AutonomyView } from './bindings/AutonomyView';
import type { CallView } from './bindings/CallView';
import type { TimelineItem } from './bindings/TimelineItem';
import type { TimelineView } from './bindings/TimelineView';
import type { UiEventView } from './bindings/UiEventView';

/** Streamed text of a turn, not stored yet. */
export type DraftEntry = { kind: 'draft'; invocation_id: string; text: string };
export type Entry = TimelineItem | DraftEntry;

export interface TimelineState {
  session_id: string;
  items: Entry[];
  calls: Record<string, CallView>;
  running: boolean;
  /** The turn in progress (or last seen). */
  invocation_id: string | null;
  /** How writes are treated in this conversation. */
  autonomy: AutonomyView;
}

const ASK: AutonomyView = { mode: 'ask', until: null };

export function emptyTimeline(session_id: string): TimelineState {
  return { session_id, items: [], calls: {}, running: false, invocation_id: null, autonomy: ASK };
}

export function fromView(view: TimelineView): TimelineState {
  const calls: Record<string, CallView> = {};
  for (const c of view.calls) calls[c.call_id] = c;
  // The backend merges results already; merge again in case, and give each call an entry.
  // One pass with an index by key: a long conversation (10,000 entries) loads in linear time.
  const items: Entry[] = [];
  const at = new Map<string, number>();
  for (const item of view.items) {
    const key = entryKey(item);
    const i = item.kind === 'tool' && item.call_id === '' ? undefined : at.get(key);
    if (i === undefined) {
      at.set(key, items.length);
      items.push(item);
    } else {
      const prev = items[i];
      items[i] = prev.kind === 'tool' && item.kind === 'tool' ? mergeTool(prev, item) : item;
    }
  }
  const state: TimelineState = {
    session_id: view.session_id,
    items,
    calls,
    running: view.running,
    invocation_id: null,
    autonomy: view.autonomy ?? ASK,
  };
  return ensureCallEntries(state, view.calls);
}

/** A stable key for an entry (for keyed rendering and measured heights). */
export function entryKey(e: Entry): string {
  switch (e.kind) {
    case 'tool':
      return 't:' + e.call_id;
    case 'draft':
      return 'd:' + e.invocation_id;
    default:
      return e.kind[0] + ':' + e.id;
  }
}

function sameEntry(a: Entry, b: Entry): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'tool' && b.kind === 'tool') return a.call_id !== '' && a.call_id === b.call_id;
  if (a.kind === 'draft' && b.kind === 'draft') return a.invocation_id === b.invocation_id;
  if ('id' in a && 'id' in b) return a.id === b.id;
  return false;
}

type ToolEntry = Extract<TimelineItem, { kind: 'tool' }>;

/** A tool entry and a later one of the same call: a response carries no args, so keep the call's. */
function mergeTool(prev: ToolEntry, item: ToolEntry): ToolEntry {
  return {
    ...prev,
    ...item,
    args: Object.keys(item.args).length ? item.args : prev.args,
    result: item.result ?? prev.result,
    title: item.title ?? prev.title,
    tool: item.tool || prev.tool,
    at: prev.at,
  };
}

/** Adds stored entries: a tool result merges into its call's entry, a known entry is replaced. */
export function mergeItems(items: Entry[], incoming: TimelineItem[], at?: number): Entry[] {
  const out = items.slice();
  let insertAt = at ?? out.length;
  for (const item of incoming) {
    const idx = out.findIndex((e) => sameEntry(e, item));
    if (idx >= 0) {
      const prev = out[idx];
      if (item.kind === 'tool' && prev.kind === 'tool') {
        out[idx] = mergeTool(prev, item);
      } else {
        out[idx] = item;
      }
      continue;
    }
    out.splice(insertAt, 0, item);
    insertAt++;
  }
  return out;
}

/** Calls of the session with no entry yet get one (a call event can come before its entry). */
function ensureCallEntries(state: TimelineState, calls: CallView[]): TimelineState {
  let items = state.items;
  for (const c of calls) {
    if (c.session_id !== state.session_id) continue;
    if (items.some((e) => e.kind === 'tool' && e.call_id === c.call_id)) continue;
    const entry: TimelineItem = {
      kind: 'tool',
      call_id: c.call_id,
      at: c.created_at,
      tool: c.tool,
      title: c.title,
      args: c.args,
      result: null,
    };
    items = items === state.items ? items.slice() : items;
    // Keep the streamed draft last: a call of the same turn goes before it.
    const d = items.findIndex((e) => e.kind === 'draft' && e.invocation_id === c.invocation_id);
    if (d >= 0) items.splice(d, 0, entry);
    else items.push(entry);
  }
  return items === state.items ? state : { ...state, items };
}

/** The state after an event; events of another session leave it as it is. */
export function applyEvent(state: TimelineState, ev: UiEventView): TimelineState {
  switch (ev.type) {
    case 'text': {
      if (ev.session_id !== state.session_id) return state;
      const idx = state.items.findIndex((e) => e.kind === 'draft' && e.invocation_id === ev.invocation_id);
      const items = state.items.slice();
      if (idx >= 0) {
        const d = items[idx] as DraftEntry;
        items[idx] = { ...d, text: d.text + ev.text };
      } else {
        items.push({ kind: 'draft', invocation_id: ev.invocation_id, text: ev.text });
      }
      return { ...state, items, invocation_id: ev.invocation_id };
    }
    case 'items': {
      if (ev.session_id !== state.session_id) return state;
      let items = state.items;
      // A message shown locally before it was stored gives way to the stored one.
      for (const it of ev.items) {
        if (it.kind !== 'user') continue;
        const local = items.findIndex((e) => e.kind === 'user' && e.id.startsWith('local:') && e.text === it.text);
        if (local >= 0) items = items.filter((_, i) => i !== local);
      }
      // The stored entries take the place of the turn's draft.
      const idx = items.findIndex((e) => e.kind === 'draft' && e.invocation_id === ev.invocation_id);
      if (idx >= 0) items = items.filter((_, i) => i !== idx);
      items = mergeItems(items, ev.items, idx >= 0 ? idx : undefined);
      return { ...state, items };
    }
    case 'call': {
      const c = ev.call;
      if (c.session_id !== state.session_id) return state;
      const next = { ...state, calls: { ...state.calls, [c.call_id]: c } };
      return ensureCallEntries(next, [c]);
    }
    case 'turn': {
      if (ev.session_id !== state.session_id) return state;
      const running = ev.status === 'running';
      let items = state.items;
      if (!running) {
        // A turn that ended keeps no half-streamed draft unless its text never got stored.
        const stale = items.findIndex((e) => e.kind === 'draft' && e.invocation_id === ev.invocation_id && e.text === '');
        if (stale >= 0) items = items.filter((_, i) => i !== stale);
      }
      return { ...state, running, invocation_id: ev.invocation_id, items };
    }
    default:
      return state;
  }
}

/** A user message shown at once, before the backend stores it. */
export function addLocalUser(state: TimelineState, id: string, text: string, at: number): TimelineState {
  return { ...state, items: [...state.items, { kind: 'user', id, at, text }] };
}

/** Drops a local entry (the stored one arrived, or the send failed). */
export function removeEntry(state: TimelineState, key: string): TimelineState {
  const items = state.items.filter((e) => entryKey(e) !== key);
  return items.length === state.items.length ? state : { ...state, items };
}

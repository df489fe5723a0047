import { describe, expect, it } from 'vitest';
import type { AgentToolChoiceView } from './bindings/AgentToolChoiceView';
import type { ConnectedAgentView } from './bindings/ConnectedAgentView';
import { chosenTools, defaultTools, diffChanges, fieldStyle, fromAgent, lineDiff, orderAgents, setupTab, toggledTools } from './agents';

const tool = (name: string, default_on: boolean, read = false): AgentToolChoiceView => ({ name, title: { zh: name, en: name }, read, default_on });
const choices = [tool('list_calendar_events', true, true), tool('send_message', true), tool('mcp__github__create_issue', false)];
const agent = (over: Partial<ConnectedAgentView> = {}): ConnectedAgentView => ({
  id: 'a1', name: 'Claude Code', paused: false, revoked: false, created_at: 1, tools: null, effective_tools: [], ...over,
});
const field = (en: string, value: string) => ({ label: { zh: en, en }, value });

describe('an agent’s tools', () => {
  it('are Feishu’s own by default', () => {
    expect(defaultTools(choices)).toEqual(['list_calendar_events', 'send_message']);
    expect([...chosenTools(agent(), choices)]).toEqual(['list_calendar_events', 'send_message']);
    expect([...chosenTools(agent({ tools: ['send_message'] }), choices)]).toEqual(['send_message']);
  });
  it('switch one on or off, in the order offered', () => {
    expect(toggledTools(agent(), choices, 'mcp__github__create_issue', true)).toEqual(['list_calendar_events', 'send_message', 'mcp__github__create_issue']);
    expect(toggledTools(agent(), choices, 'send_message', false)).toEqual(['list_calendar_events']);
    expect(toggledTools(agent({ tools: [] }), choices, 'send_message', true)).toEqual(['send_message']);
  });
  it('follow the default again once the choice is the default', () => {
    expect(toggledTools(agent({ tools: ['list_calendar_events'] }), choices, 'send_message', true)).toBeNull();
  });
  it('keep a chosen tool no longer offered', () => {
    expect(toggledTools(agent({ tools: ['gone'] }), choices, 'send_message', true)).toEqual(['send_message', 'gone']);
  });
});

describe('the list and the setups', () => {
  it('puts revoked agents last, each side in the order added', () => {
    const list = orderAgents([agent({ id: 'x', revoked: true }), agent({ id: 'y' }), agent({ id: 'z', paused: true })]);
    expect(list.map((a) => a.id)).toEqual(['y', 'z', 'x']);
  });
  it('names each setup’s tab', () => {
    expect(setupTab('claude-code')).toEqual({ name: 'Claude Code' });
    expect(setupTab('codex')).toEqual({ name: 'Codex' });
    expect(setupTab('cursor')).toEqual({ name: 'Cursor' });
    expect(setupTab('http')).toEqual({ key: 'agents_setup_http' });
    expect(setupTab('zed')).toEqual({ name: 'zed' });
  });
});

describe('an agent’s request on the card', () => {
  it('is from an agent when the call names a requester', () => {
    expect(fromAgent({ requester: 'Claude Code' })).toBe(true);
    expect(fromAgent({ requester: null })).toBe(false);
    expect(fromAgent({ requester: '  ' })).toBe(false);
  });
  it('shows a permission request’s command and content as code, its file and project in monospace', () => {
    const approve = { tool: 'approve' };
    expect(fieldStyle(approve, field('Command', 'npm test'))).toBe('code');
    expect(fieldStyle(approve, field('Content', 'a\nb'))).toBe('code');
    expect(fieldStyle(approve, field('File', 'src/a.rs'))).toBe('mono');
    expect(fieldStyle(approve, field('Project', '/work/app'))).toBe('mono');
    expect(fieldStyle(approve, field('Description', 'Run the tests'))).toBe('text');
    // An unknown tool's input, key by key.
    expect(fieldStyle(approve, field('url', 'https://x'))).toBe('mono');
    expect(fieldStyle(approve, field('prompt', 'one\ntwo'))).toBe('code');
  });
  it('leaves other calls’ fields as text', () => {
    expect(fieldStyle({ tool: 'send_message' }, field('Content', 'hi'))).toBe('text');
    expect(fieldStyle({ tool: 'request_approval' }, field('Details', 'x\ny'))).toBe('text');
    expect(fieldStyle({ tool: 'request_approval' }, field('Project', '/work/app'))).toBe('mono');
    expect(diffChanges({ tool: 'approve' })).toBe(true);
    expect(diffChanges({ tool: 'update_calendar_event' })).toBe(false);
  });
});

describe('a file edit as a diff', () => {
  const signs = (from: string, to: string) => lineDiff(from, to).map((l) => l.sign + l.text);
  it('keeps the lines both have and marks the ones removed and added', () => {
    expect(signs('a\nb\nc', 'a\nB\nc')).toEqual([' a', '-b', '+B', ' c']);
  });
  it('shows a replacement of one line as a removal then an addition', () => {
    expect(signs('old', 'new')).toEqual(['-old', '+new']);
  });
  it('handles pure insertions and deletions, and empty sides', () => {
    expect(signs('a\nc', 'a\nb\nc')).toEqual([' a', '+b', ' c']);
    expect(signs('a\nb\nc', 'a\nc')).toEqual([' a', '-b', ' c']);
    expect(signs('', 'x\ny')).toEqual(['+x', '+y']);
    expect(signs('x', '')).toEqual(['-x']);
    expect(signs('', '')).toEqual([]);
  });
  it('finds the lines kept in the middle of a larger change', () => {
    expect(signs('h\n1\nk\n2\nt', 'h\nA\nk\nB\nt')).toEqual([' h', '-1', '+A', ' k', '-2', '+B', ' t']);
  });
  it('keeps blank lines and indentation as they are', () => {
    expect(lineDiff('  if x:\n\n    y()', '  if x:\n\n    z()')).toEqual([
      { sign: ' ', text: '  if x:' },
      { sign: ' ', text: '' },
      { sign: '-', text: '    y()' },
      { sign: '+', text: '    z()' },
    ]);
  });
  it('gives up looking for common lines in a huge change, still showing every line', () => {
    const from = Array.from({ length: 600 }, (_, i) => 'a' + i).join('\n');
    const to = Array.from({ length: 600 }, (_, i) => 'b' + i).join('\n');
    const d = lineDiff(from, to);
    expect(d.length).toBe(1200);
    expect(d[0]).toEqual({ sign: '-', text: 'a0' });
    expect(d[600]).toEqual({ sign: '+', text: 'b0' });
  });
});

import { describe, expect, it } from 'vitest';
import type { PreviewView } from './bindings/PreviewView';
import { alwaysAllowChoices, projectName, ruleExpiry, shortCommand, targetName } from './rules';

const preview = (fields: [string, string, string][]): PreviewView => ({
  summary: { zh: '', en: '' },
  risk: 'normal',
  fields: fields.map(([zh, en, value]) => ({ label: { zh, en }, value })),
  changes: [],
});

describe('always-allow choices', () => {
  it('always offers the whole tool, with no constraints', () => {
    const c = alwaysAllowChoices({ args: { text: 'hi' } });
    expect(c).toEqual([{ id: 'tool', key: null, keyLabel: null, value: null, display: null, constraints: {} }]);
  });
  it('offers one scoped choice per target argument', () => {
    const c = alwaysAllowChoices({ args: { chat_id: 'oc_1', calendar_id: 'cal_9', text: 'x' } });
    expect(c.map((x) => x.constraints)).toEqual([{}, { chat_id: 'oc_1' }, { calendar_id: 'cal_9' }]);
    expect(c[1].keyLabel).toBe('key_chat');
  });
  it('skips empty and non-scalar values', () => {
    const c = alwaysAllowChoices({ args: { chat_id: '', calendar_id: { a: 1 } } });
    expect(c.length).toBe(1);
  });
  it('computes rule expiry from a duration', () => {
    expect(ruleExpiry('forever', 1000)).toBeNull();
    expect(ruleExpiry('hour', 1000)).toBe(1000 + 3_600_000);
    expect(ruleExpiry('day', 0)).toBe(86_400_000);
  });
});

describe('what a scoped choice calls its target', () => {
  it('the chat by the name the preview gives it, keeping the raw id as the value', () => {
    const c = alwaysAllowChoices({
      args: { chat_id: 'oc_product', text: 'hi' },
      preview: preview([
        ['会话', 'Chat', '产品周会（12 人）'],
        ['内容', 'Message', 'hi'],
      ]),
    });
    expect(c[1]).toMatchObject({ key: 'chat_id', value: 'oc_product', display: '产品周会（12 人）', constraints: { chat_id: 'oc_product' } });
  });
  it('the calendar, task list, document and folder by theirs', () => {
    const c = alwaysAllowChoices({
      args: { calendar_id: 'cal_1', tasklist_guid: 'tl_1', document_id: 'doc_1', folder_token: 'fld_1' },
      preview: preview([
        ['日历', 'Calendar', '团队日历'],
        ['任务清单', 'Task list', '发布清单'],
        ['文档', 'Document', '周报模板'],
        ['文件夹', 'Folder', '共享空间'],
      ]),
    });
    expect(Object.fromEntries(c.slice(1).map((x) => [x.key, x.display]))).toEqual({
      calendar_id: '团队日历',
      tasklist_guid: '发布清单',
      document_id: '周报模板',
      folder_token: '共享空间',
    });
  });
  it('matches either language of the label, case and a trailing colon aside', () => {
    expect(targetName(preview([['', 'CHAT:', 'Design crit']]), 'key_chat')).toBe('Design crit');
    expect(targetName(preview([['日历：', '', '个人日历']]), 'key_calendar')).toBe('个人日历');
  });
  it('falls back to the raw id without such a field, or with an empty one', () => {
    const none = alwaysAllowChoices({ args: { chat_id: 'oc_product' }, preview: preview([['内容', 'Message', 'hi']]) });
    expect(none[1].display).toBe('oc_product');
    const empty = alwaysAllowChoices({ args: { chat_id: 'oc_product' }, preview: preview([['会话', 'Chat', '  ']]) });
    expect(empty[1].display).toBe('oc_product');
    expect(alwaysAllowChoices({ args: { chat_id: 'oc_product' }, preview: null })[1].display).toBe('oc_product');
    expect(alwaysAllowChoices({ args: { calendar_id: 7 } })[1].display).toBe('7');
  });
  it('does not take another target’s field', () => {
    const c = alwaysAllowChoices({ args: { calendar_id: 'cal_1' }, preview: preview([['会话', 'Chat', '产品周会']]) });
    expect(c[1].display).toBe('cal_1');
    // A member count is not the chat's name.
    expect(targetName(preview([['群成员', 'Members', '12']]), 'key_chat')).toBeNull();
  });
});

describe('an agent’s permission request', () => {
  const bash = { tool_name: 'Bash', input: { command: 'npm test' }, command: 'npm test', project: '/work/app' };
  it('can be always allowed for this command, and for this command in this project', () => {
    const c = alwaysAllowChoices({ args: bash });
    expect(c.map((x) => x.id)).toEqual(['tool', 'command', 'command:project']);
    expect(c[1].constraints).toEqual({ tool_name: 'Bash', command: 'npm test' });
    expect(c[2].constraints).toEqual({ tool_name: 'Bash', command: 'npm test', project: '/work/app' });
    expect(c[1].label).toEqual({ key: 'always_allow_command', params: { command: 'npm test' } });
    expect(c[2].label).toEqual({ key: 'always_allow_command_project', params: { command: 'npm test', project: 'app' } });
  });
  it('offers only "this command" without a project', () => {
    const { project: _, ...anywhere } = bash;
    expect(alwaysAllowChoices({ args: anywhere }).map((x) => x.id)).toEqual(['tool', 'command']);
    expect(alwaysAllowChoices({ args: { ...bash, project: ' ' } }).map((x) => x.id)).toEqual(['tool', 'command']);
  });
  it('offers no command choice without a tool name or a command (a file edit, a plain request)', () => {
    expect(alwaysAllowChoices({ args: { tool_name: 'Edit', input: {}, file_path: 'a.rs', project: '/p' } }).map((x) => x.id)).toEqual(['tool']);
    expect(alwaysAllowChoices({ args: { command: 'ls' } }).map((x) => x.id)).toEqual(['tool']);
    expect(alwaysAllowChoices({ args: { tool_name: 'Bash', command: '' } }).map((x) => x.id)).toEqual(['tool']);
    expect(alwaysAllowChoices({ args: { summary: 'Deploy', project: '/p' } }).map((x) => x.id)).toEqual(['tool']);
  });
  it('keeps the whole command in the rule, and a short one in the menu', () => {
    const long = 'cargo test --workspace --all-features -- --nocapture --test-threads=1 integration';
    const c = alwaysAllowChoices({ args: { tool_name: 'Bash', command: long } });
    expect(c[1].constraints).toEqual({ tool_name: 'Bash', command: long });
    expect(c[1].display).toBe(shortCommand(long));
    expect(shortCommand(long).length).toBeLessThanOrEqual(60);
    expect(shortCommand(long).endsWith('…')).toBe(true);
    expect(shortCommand('npm ci\nnpm test')).toBe('npm ci …');
    expect(shortCommand('  ls  ')).toBe('ls');
  });
  it('names a project by its folder', () => {
    expect(projectName('/work/app')).toBe('app');
    expect(projectName('/work/app/')).toBe('app');
    expect(projectName('C:\\src\\site')).toBe('site');
    expect(projectName('/')).toBe('/');
  });

  it('never offers to allow every permission request of every agent at once', () => {
    const c = alwaysAllowChoices({ tool: 'approve', args: { tool_name: 'Bash', command: 'rm -rf /', input: {} } });
    expect(c.map((x) => x.id)).not.toContain('tool');
    expect(c.every((x) => x.constraints.command === 'rm -rf /')).toBe(true);
  });
});

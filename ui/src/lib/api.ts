// The only place the UI talks to the backend: Tauri commands and events. Tests replace
// window.__TAURI_INTERNALS__, so everything here goes through @tauri-apps/api.
import { invoke } from '@tauri-apps/api/core';
import { listen, type UnlistenFn } from '@tauri-apps/api/event';
import type { AccountView } from './bindings/AccountView';
import type { AgentToolsInput } from './bindings/AgentToolsInput';
import type { ConnectedAgentsView } from './bindings/ConnectedAgentsView';
import type { NewAgentView } from './bindings/NewAgentView';
import type { AssistantInput } from './bindings/AssistantInput';
import type { AssistantView } from './bindings/AssistantView';
import type { CallbackTryView } from './bindings/CallbackTryView';
import type { PythonFileSettings } from './bindings/PythonFileSettings';
import type { PythonFileView } from './bindings/PythonFileView';
import type { PythonRunView } from './bindings/PythonRunView';
import type { AppInfo } from './bindings/AppInfo';
import type { AuditQuery } from './bindings/AuditQuery';
import type { AuditView } from './bindings/AuditView';
import type { AutonomyInput } from './bindings/AutonomyInput';
import type { AutonomyView } from './bindings/AutonomyView';
import type { BatchDecision } from './bindings/BatchDecision';
import type { CheckView } from './bindings/CheckView';
import type { ConnectView } from './bindings/ConnectView';
import type { RemoteApprovalView } from './bindings/RemoteApprovalView';
import type { CallView } from './bindings/CallView';
import type { DataView } from './bindings/DataView';
import type { DecisionInput } from './bindings/DecisionInput';
import type { EditCheckView } from './bindings/EditCheckView';
import type { ExportFormat } from './bindings/ExportFormat';
import type { LarkMcpView } from './bindings/LarkMcpView';
import type { McpAnswerInput } from './bindings/McpAnswerInput';
import type { McpImportSourceView } from './bindings/McpImportSourceView';
import type { McpImportView } from './bindings/McpImportView';
import type { McpServerInput } from './bindings/McpServerInput';
import type { McpServerView } from './bindings/McpServerView';
import type { McpQuestionView } from './bindings/McpQuestionView';
import type { ModelListView } from './bindings/ModelListView';
import type { ForgetSecretsResult } from './bindings/ForgetSecretsResult';
import type { RuleView } from './bindings/RuleView';
import type { SavedSettings } from './bindings/SavedSettings';
import type { SessionView } from './bindings/SessionView';
import type { Settings } from './bindings/Settings';
import type { SettingsView } from './bindings/SettingsView';
import type { SettlementInput } from './bindings/SettlementInput';
import type { SignInTicketView } from './bindings/SignInTicketView';
import type { TimelineView } from './bindings/TimelineView';
import type { TurnView } from './bindings/TurnView';
import type { UiError } from './bindings/UiError';
import type { UiEventView } from './bindings/UiEventView';

/** The payload of `companion://open`: a notification or the tray asks to show this. */
export type OpenRequest = { session_id: string; call_id: string | null };

/** The language a command's error is read in: the page's (App.svelte keeps `<html lang>` on the
 *  user's language). */
function pageLang(): 'zh' | 'en' {
  return typeof document !== 'undefined' && document.documentElement.lang.startsWith('zh') ? 'zh' : 'en';
}

/** A command's failure as the core words it ([UiError]): both languages and a code. */
export function isUiError(e: unknown): e is UiError {
  return !!e && typeof e === 'object' && 'code' in e && 'zh' in e && 'en' in e;
}

/** A rejected command's message, as a string for the user, in their language when the core
 *  worded it in both. */
export function errorMessage(e: unknown, lang: 'zh' | 'en' = pageLang()): string {
  if (isUiError(e)) return e[lang];
  if (typeof e === 'string') return e;
  if (e instanceof Error) return e.message;
  if (e && typeof e === 'object' && 'message' in e) return String((e as { message: unknown }).message);
  try {
    return JSON.stringify(e);
  } catch {
    return String(e);
  }
}

export const api = {
  appInfo: () => invoke<AppInfo>('app_info'),
  /** Why the core could not open, or null once it is open. */
  startupError: () => invoke<string | null>('startup_error'),
  /** Tells the shell the first frame is painted. */
  uiReady: () => invoke<number>('ui_ready'),
  listSessions: () => invoke<SessionView[]>('list_sessions'),
  createSession: () => invoke<string>('create_session'),
  timeline: (sessionId: string) => invoke<TimelineView>('timeline', { sessionId }),
  /** `cancelWaiting`: the user chose to call off the approvals still waiting in the conversation. */
  sendMessage: (sessionId: string, text: string, cancelWaiting = false) =>
    invoke<TurnView>('send_message', { sessionId, text, cancelWaiting }),
  cancelTurn: (sessionId: string) => invoke<boolean>('cancel_turn', { sessionId }),
  decide: (callId: string, decision: DecisionInput) => invoke<TurnView>('decide', { callId, decision }),
  decideMany: (decisions: BatchDecision[]) => invoke<TurnView[]>('decide_many', { decisions }),
  settle: (callId: string, settlement: SettlementInput) => invoke<TurnView>('settle', { callId, settlement }),
  pending: () => invoke<CallView[]>('pending'),
  rules: () => invoke<RuleView[]>('rules'),
  revokeRule: (ruleId: string) => invoke<RuleView>('revoke_rule', { ruleId }),
  audit: (query: AuditQuery) => invoke<AuditView[]>('audit', { query }),
  exportAudit: (query: AuditQuery, format: ExportFormat) => invoke<string>('export_audit', { query, format }),
  revealPath: (path: string) => invoke<null>('reveal_path', { path }),
  account: () => invoke<AccountView | null>('account'),
  signOut: () => invoke<null>('sign_out'),
  signIn: (scopes: string[], embedded: boolean) => invoke<SignInTicketView>('sign_in', { scopes, embedded }),
  openSignInInBrowser: () => invoke<null>('open_sign_in_in_browser'),
  /** Opens an http(s) link in the system browser (the shell refuses any other scheme). */
  openLink: (url: string) => invoke<null>('open_link', { url }),
  cancelSignIn: () => invoke<null>('cancel_sign_in'),
  /** Opens the waiting device sign-in's verification page in the embedded sign-in window. */
  openSignInWindow: () => invoke<null>('open_sign_in_window'),
  /** "Connect my Feishu": Feishu creates a personal app; progress arrives as `connect` events. */
  connectFeishu: () => invoke<ConnectView>('connect_feishu'),
  /** Opens the waiting registration's page in the embedded sign-in window (no phone at hand). */
  openConnectPage: () => invoke<null>('open_connect_page'),
  cancelConnect: () => invoke<null>('cancel_connect'),
  /** Opens the page where the Feishu app applies for a permission it lacks (`scope_apply_url`). */
  openScopeApply: (callId: string) => invoke<null>('open_scope_apply', { callId }),
  /** Runs a call held for a missing app permission again, once the permission was granted. */
  retryAuthCall: (callId: string) => invoke<TurnView>('retry_auth_call', { callId }),
  declineSignIn: (callId: string) => invoke<TurnView>('decline_sign_in', { callId }),
  settings: () => invoke<SettingsView>('settings'),
  saveSettings: (settings: Settings) => invoke<SavedSettings>('save_settings', { settings }),
  setAppSecret: (secret: string) => invoke<null>('set_app_secret', { secret }),
  setModelKey: (preset: string, key: string) => invoke<null>('set_model_key', { preset, key }),
  checkConnection: () => invoke<CheckView>('check_connection'),
  /** Where approving from Feishu stands: the long connection, cards waiting and queued. */
  remoteApprovalStatus: () => invoke<RemoteApprovalView>('remote_approval_status'),
  setAutonomy: (sessionId: string, mode: AutonomyInput) => invoke<AutonomyView>('set_autonomy', { sessionId, mode }),
  /** Checks an approval's edited arguments and previews them, before Approve is enabled. */
  checkEdit: (callId: string, args: Record<string, unknown>) => invoke<EditCheckView>('check_edit', { callId, args }),
  listModels: (preset: string, baseUrl: string | null) =>
    invoke<ModelListView>('list_models', { preset, baseUrl }),
  dataStatus: () => invoke<DataView>('data_status'),
  /** Only after the user confirmed: the shell refuses the call otherwise. */
  forgetSecrets: () => invoke<ForgetSecretsResult>('forget_secrets', { confirmed: true }),
  /** Only after the user confirmed: asks the next start to delete the app's files, and restarts. */
  resetApp: () => invoke<null>('reset_app', { confirmed: true }),
  assistant: () => invoke<AssistantView>('assistant'),
  saveAssistant: (input: AssistantInput) => invoke<AssistantView>('save_assistant', { input }),
  pythonSource: (name: string) => invoke<string>('python_source', { name }),
  savePythonFile: (name: string, source: string) => invoke<PythonFileView>('save_python_file', { name, source }),
  createPythonFile: (name: string) => invoke<PythonFileView>('create_python_file', { name }),
  deletePythonFile: (name: string) => invoke<null>('delete_python_file', { name }),
  setPythonFileSettings: (name: string, settings: PythonFileSettings) =>
    invoke<PythonFileView>('set_python_file_settings', { name, settings }),
  runPythonTool: (file: string, tool: string, args: string, approved: boolean) =>
    invoke<PythonRunView>('run_python_tool', { file, tool, args, approved }),
  tryPythonCallback: (file: string, kind: string) => invoke<CallbackTryView>('try_python_callback', { file, kind }),
  // Settings → Tools · MCP servers.
  mcpServers: () => invoke<McpServerView[]>('mcp_servers'),
  /** `input.id` null adds a server; every secret goes in order, `value: null` keeps the stored one. */
  saveMcpServer: (input: McpServerInput) => invoke<McpServerView>('save_mcp_server', { input }),
  removeMcpServer: (id: string) => invoke<null>('remove_mcp_server', { id }),
  /** Adds the servers of an `mcpServers` configuration (the text of the file). */
  importMcpServers: (config: string) => invoke<McpImportView>('import_mcp_servers', { config }),
  importMcpFile: (path: string) => invoke<McpImportView>('import_mcp_file', { path }),
  /** Other apps' MCP configuration files found on this machine. */
  mcpImportSources: () => invoke<McpImportSourceView[]>('mcp_import_sources'),
  /** Starts the server now and lists its tools; a failure shows in the view's phase and error. */
  restartMcpServer: (id: string) => invoke<McpServerView>('restart_mcp_server', { id }),
  mcpServerLog: (id: string) => invoke<string>('mcp_server_log', { id }),
  setMcpToolRead: (id: string, tool: string, read: boolean) => invoke<McpServerView>('set_mcp_tool_read', { id, tool, read }),
  /** The lark-mcp preset: switched on or not, what it needs and whether it is there, its server. */
  larkMcp: () => invoke<LarkMcpView>('lark_mcp'),
  /** Switches the preset; `tools` (lark-mcp's `-t`) null keeps the choice, `""` goes back to the default. */
  setLarkMcp: (enabled: boolean, tools: string | null) => invoke<LarkMcpView>('set_lark_mcp', { enabled, tools }),
  /** Fetches Node.js if needed and installs lark-mcp into the data folder (long; `mcp_setup` events report it). */
  installLarkMcp: () => invoke<LarkMcpView>('install_lark_mcp'),
  /** What MCP servers ask the user now (elicitation), oldest first. */
  mcpQuestions: () => invoke<McpQuestionView[]>('mcp_questions'),
  /** Answers one; a form's values that break its schema are refused (in both languages) and it keeps waiting. */
  answerMcpQuestion: (id: string, input: McpAnswerInput) => invoke<null>('answer_mcp_question', { id, input }),
  // Settings → Connected agents: the user's other agents, served MCP by the app.
  connectedAgents: () => invoke<ConnectedAgentsView>('connected_agents'),
  /** The answer carries the agent's token: shown once, never kept by the UI after its panel closes. */
  addConnectedAgent: (name: string) => invoke<NewAgentView>('add_connected_agent', { name }),
  setConnectedAgentPaused: (id: string, paused: boolean) => invoke<ConnectedAgentsView>('set_connected_agent_paused', { id, paused }),
  revokeConnectedAgent: (id: string) => invoke<ConnectedAgentsView>('revoke_connected_agent', { id }),
  /** `input.tools` null goes back to the default (Feishu's own tools). */
  setConnectedAgentTools: (input: AgentToolsInput) => invoke<ConnectedAgentsView>('set_connected_agent_tools', { input }),

  onEvent: (handler: (ev: UiEventView) => void): Promise<UnlistenFn> =>
    listen<UiEventView>('companion://event', (e) => handler(e.payload)),
  onOpen: (handler: (req: OpenRequest) => void): Promise<UnlistenFn> =>
    listen<OpenRequest>('companion://open', (e) => handler(e.payload)),
};

export type Api = typeof api;

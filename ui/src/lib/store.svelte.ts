// The app's state, shared by every component, and the actions that change it.
import { api, errorMessage, isUiError, type OpenRequest } from './api';
import type { AccountView } from './bindings/AccountView';
import type { AppInfo } from './bindings/AppInfo';
import type { AuditView } from './bindings/AuditView';
import type { AutonomyInput } from './bindings/AutonomyInput';
import type { LarkMcpView } from './bindings/LarkMcpView';
import type { McpQuestionView } from './bindings/McpQuestionView';
import type { CallView } from './bindings/CallView';
import type { DecisionInput } from './bindings/DecisionInput';
import type { Language } from './bindings/Language';
import type { SessionView } from './bindings/SessionView';
import type { SettingsView } from './bindings/SettingsView';
import type { SettlementInput } from './bindings/SettlementInput';
import type { SignInView } from './bindings/SignInView';
import type { Theme } from './bindings/Theme';
import type { UiEventView } from './bindings/UiEventView';
import type { ConnectState } from './connect';
import { pick, resolveLang, translate, type Key, type Lang } from './i18n';
import { applyProgress, setupFromEvent, type ProgressMap, type SetupProgress } from './mcp';
import { addLocalUser, applyEvent, emptyTimeline, fromView, removeEntry, type TimelineState } from './timeline';

export type View = 'chat' | 'inbox' | 'audit' | 'settings';
export type Drawer =
  | { kind: 'call'; callId: string; edit: boolean }
  | { kind: 'audit'; entry: AuditView }
  | { kind: 'account' };
export type SignInState = { state: 'idle' } | { state: 'starting' } | SignInView;
export type Toast = { id: number; kind: 'error' | 'info' | 'success'; text: string; action?: { label: string; run: () => void } };

export type CardDraft = { edit?: string; reason?: string };

let toastSeq = 0;
let localSeq = 0;

class Store {
  info = $state.raw<AppInfo | null>(null);
  sessions = $state.raw<SessionView[]>([]);
  currentId = $state<string | null>(null);
  tl = $state.raw<TimelineState | null>(null);
  /** Everything that waits for the user, across sessions, by call id. */
  pendingCalls = $state.raw<Record<string, CallView>>({});
  /** Calls seen outside the open timeline (decided in the inbox), by id. */
  knownCalls = $state.raw<Record<string, CallView>>({});
  account = $state.raw<AccountView | null>(null);
  settingsView = $state.raw<SettingsView | null>(null);
  langSetting = $state<Language>('system');
  themeSetting = $state<Theme>('system');
  systemDark = $state(false);
  navLang = $state(typeof navigator !== 'undefined' ? navigator.language : 'en');
  view = $state<View>('chat');
  drawer = $state.raw<Drawer | null>(null);
  signIn = $state.raw<SignInState>({ state: 'idle' });
  signInCall = $state<string | null>(null);
  /** The remote MCP server whose own sign-in (`mcp:<id>`) the current sign-in is, if it is one. */
  signInMcp = $state<string | null>(null);
  toasts = $state.raw<Toast[]>([]);
  now = $state(Date.now());
  highlight = $state<string | null>(null);
  /** What the user is typing, per session, so a failed send or a switch loses nothing. */
  composer = $state<Record<string, string>>({});
  /** What the user typed into an approval card (edited arguments, a reason), per call, until it is decided. */
  cardDrafts = $state.raw<Record<string, CardDraft>>({});
  sending = $state(false);
  /** The approval editor shows the raw JSON instead of the form (the user chose it). */
  editAdvanced = $state(false);
  /** Call ids with a decision in flight (guards double clicks). */
  busy = $state.raw<Set<string>>(new Set());
  ready = $state(false);
  /** Why the core could not open (shown instead of the app). */
  startupError = $state<string | null>(null);
  /** Calls the user answered with "Always allow…" (their verdict reads "approved"). */
  alwaysIds = $state.raw<Set<string>>(new Set());
  /** Calls that started to wait while the user looked elsewhere (the attention notice), oldest first. */
  attentionIds = $state.raw<string[]>([]);
  /** Calls whose approval card also waits in Feishu (Approve from Feishu): the core says so at start and on every change. */
  inFeishu = $state.raw<Set<string>>(new Set());
  /** "Connect my Feishu": whether its dialog is open, and where the registration stands. */
  connectOpen = $state(false);
  connect = $state.raw<ConnectState>({ state: 'intro' });
  /** Settings scrolls to this section when it opens (the connect dialog's "Open model settings"). */
  settingsFocus = $state<'model' | 'feishu' | null>(null);
  /** Settings → Feishu's "Advanced" disclosure, once the user opened or closed it (null: by the rule). */
  feishuAdvancedOpen = $state<boolean | null>(null);
  /** Calls retried after their app permission was applied for, that Feishu still refused (the card says so). */
  stillLacking = $state.raw<Set<string>>(new Set());
  /** Running MCP calls' latest progress, by call id, until the call is over. */
  mcpProgress = $state.raw<ProgressMap>({});
  /** Counts the core's "MCP servers changed" events: Settings reads the servers again on each. */
  mcpServersSeq = $state(0);
  /** What MCP servers ask the user (elicitation), as the core last said; read again on each
   *  `mcp_questions` event. `openQuestions` are those whose time has not run out. */
  mcpQuestions = $state.raw<McpQuestionView[]>([]);
  /** The lark-mcp preset's install: under way (its latest step, from `mcp_setup` events), or how
   *  the last one failed. Kept here so leaving Settings loses nothing. */
  larkInstall = $state.raw<{ running: boolean; progress: SetupProgress | null; error: string | null }>({ running: false, progress: null, error: null });

  lang: Lang = $derived(resolveLang(this.langSetting, this.navLang));
  theme: 'light' | 'dark' = $derived(
    this.themeSetting === 'system' ? (this.systemDark ? 'dark' : 'light') : this.themeSetting,
  );
  pendingList: CallView[] = $derived(
    Object.values(this.pendingCalls)
      .filter((c) => !expiredAt(c, this.now))
      .sort((a, b) => a.created_at - b.created_at || (a.call_id < b.call_id ? -1 : 1)),
  );
  pendingCount: number = $derived(this.pendingList.length);
  /** A question whose time ran out leaves the second it does (the core dismisses it then too). */
  openQuestions: McpQuestionView[] = $derived(this.mcpQuestions.filter((q) => q.expires_at > this.now));
  pendingBySession: Record<string, number> = $derived.by(() => {
    const m: Record<string, number> = {};
    for (const c of this.pendingList) m[c.session_id] = (m[c.session_id] ?? 0) + 1;
    return m;
  });
  /** What the attention notice is about: still pending, and not in the conversation on screen. */
  attention: CallView[] = $derived(
    this.attentionIds
      .map((id) => this.pendingCalls[id])
      .filter((c): c is CallView => !!c && c.pending && !this.isViewing(c.session_id)),
  );

  t = (key: Key, params?: Record<string, string | number>) => translate(this.lang, key, params);
  pick = (text: { zh: string; en: string } | null | undefined) => pick(text, this.lang);

  // ---- lookups
  /** Whether the conversation of `sessionId` is what the user has on screen. */
  isViewing(sessionId: string): boolean {
    return this.view === 'chat' && this.currentId === sessionId;
  }
  /**
   * A call as the screen shows it: an approval whose time ran out reads as expired the second it
   * expires, before the engine's sweep records it (the engine refuses a late decision either way).
   */
  call(callId: string): CallView | undefined {
    const c = this.tl?.calls[callId] ?? this.pendingCalls[callId] ?? this.knownCalls[callId];
    return c && expiredAt(c, this.now) ? asExpired(c) : c;
  }
  sessionTitle(id: string | null | undefined): string {
    if (!id) return '';
    const s = this.sessions.find((x) => x.id === id);
    return s?.title || this.t('untitled');
  }

  // ---- toasts
  toast(kind: Toast['kind'], text: string, action?: Toast['action']) {
    const id = ++toastSeq;
    this.toasts = [...this.toasts, { id, kind, text, action }];
    setTimeout(() => this.dismiss(id), kind === 'error' ? 8000 : 5000);
  }
  dismiss(id: number) {
    this.toasts = this.toasts.filter((t) => t.id !== id);
  }
  fail(e: unknown) {
    this.toast('error', errorMessage(e, this.lang));
  }
  /** A refused decision: an expiry or a decision taken elsewhere is news, not an error. */
  failDecision(e: unknown) {
    if (isUiError(e) && e.code === 'expired') this.toast('info', this.t('decide_expired'));
    else if (isUiError(e) && e.code === 'not_pending') this.toast('info', errorMessage(e, this.lang));
    else this.fail(e);
  }

  // ---- start
  async init() {
    try {
      const err = await api.startupError();
      if (err) {
        this.startupError = err;
        this.ready = true;
        return;
      }
    } catch {
      // An older shell without the command: carry on.
    }
    const results = await Promise.allSettled([
      api.appInfo().then((i) => (this.info = i)),
      api.settings().then((s) => this.applySettingsView(s)),
      api.account().then((a) => (this.account = a)),
      this.refreshPending(),
      this.refreshSessions(),
    ]);
    for (const r of results) if (r.status === 'rejected') this.fail(r.reason);
    try {
      await api.onEvent((ev) => this.onEvent(ev));
      await api.onOpen((req) => this.onOpen(req));
    } catch (e) {
      this.fail(e);
    }
    // Servers' questions: read once the events are heard, so none falls between.
    this.refreshQuestions().catch((e) => this.fail(e));
    // Which cards wait in Feishu: asked once the events are heard, so no change falls between the
    // answer and the first event. Not worth an error if it fails.
    api
      .remoteApprovalStatus()
      .then((s) => (this.inFeishu = new Set(s.waiting_in_feishu)))
      .catch(() => {});
    if (!this.currentId && this.sessions.length) await this.selectSession(this.sessions[0].id);
    this.ready = true;
    setInterval(() => (this.now = Date.now()), 1000);
    // A sign-in can end without the UI doing anything (a refresh token lapses): check now and then.
    setInterval(() => this.refreshAccount(), 60_000);
  }

  applySettingsView(s: SettingsView) {
    this.settingsView = s;
    this.langSetting = s.settings.language;
    this.themeSetting = s.settings.theme;
  }

  async refreshSessions() {
    const list = await api.listSessions();
    this.sessions = [...list].sort((a, b) => b.updated_at - a.updated_at);
  }
  private sessionsTimer: ReturnType<typeof setTimeout> | null = null;
  refreshSessionsSoon() {
    if (this.sessionsTimer) return;
    this.sessionsTimer = setTimeout(() => {
      this.sessionsTimer = null;
      this.refreshSessions().catch(() => {});
    }, 300);
  }

  async refreshPending() {
    const list = await api.pending();
    const m: Record<string, CallView> = {};
    for (const c of list) m[c.call_id] = c;
    this.pendingCalls = m;
    if (this.attentionIds.some((id) => !(id in m))) this.attentionIds = this.attentionIds.filter((id) => id in m);
  }

  // ---- the attention notice
  /** The user has seen what waits in `sessionId`: the notice forgets it. */
  private seen(sessionId: string) {
    const keep = this.attentionIds.filter((id) => this.pendingCalls[id]?.session_id !== sessionId);
    if (keep.length !== this.attentionIds.length) this.attentionIds = keep;
  }
  dismissAttention() {
    const shown = new Set(this.attention.map((c) => c.call_id));
    this.attentionIds = this.attentionIds.filter((id) => !shown.has(id));
  }
  /** The notice's button: the one call's card, or the inbox for several. */
  async jumpToAttention() {
    const list = this.attention;
    if (list.length === 1) {
      await this.onOpen({ session_id: list[0].session_id, call_id: list[0].call_id });
    } else if (list.length > 1) {
      this.dismissAttention();
      this.view = 'inbox';
    }
  }
  /** Ctrl/Cmd+Shift+J: what the notice points at, or else the oldest call that waits. */
  async jumpToNextPending() {
    if (this.attention.length) return this.jumpToAttention();
    const next = this.pendingList.find((c) => !this.isViewing(c.session_id)) ?? this.pendingList[0];
    if (next) await this.onOpen({ session_id: next.session_id, call_id: next.call_id });
  }

  // ---- sessions
  async selectSession(id: string) {
    this.view = 'chat';
    this.seen(id);
    if (this.currentId === id && this.tl) return;
    this.currentId = id;
    this.tl = emptyTimeline(id);
    try {
      const view = await api.timeline(id);
      if (this.currentId === id) this.tl = fromView(view);
    } catch (e) {
      this.fail(e);
    }
  }

  async newSession(): Promise<string | null> {
    try {
      const id = await api.createSession();
      const now = Date.now();
      this.sessions = [{ id, title: '', created_at: now, updated_at: now, pending: 0 }, ...this.sessions.filter((s) => s.id !== id)];
      this.currentId = id;
      this.tl = emptyTimeline(id);
      this.view = 'chat';
      this.refreshSessionsSoon();
      return id;
    } catch (e) {
      this.fail(e);
      return null;
    }
  }

  // ---- conversation
  /** Approvals (not sign-ins) waiting in a conversation, oldest first. */
  waitingApprovals(sessionId: string | null): CallView[] {
    if (!sessionId) return [];
    return this.pendingList.filter((c) => c.session_id === sessionId && c.status === 'awaiting_approval');
  }

  /** Sends `text`; `cancelWaiting` calls off the approvals still waiting there (the user chose so). */
  async send(text: string, cancelWaiting = false) {
    const body = text.trim();
    if (!body || this.sending) return;
    let sid = this.currentId;
    if (!sid) sid = await this.newSession();
    if (!sid) return;
    const localId = 'local:' + ++localSeq;
    this.composer[sid] = '';
    if (this.tl && this.tl.session_id === sid) this.tl = addLocalUser(this.tl, localId, body, Date.now());
    this.sending = true;
    try {
      await api.sendMessage(sid, body, cancelWaiting);
    } catch (e) {
      if (this.tl && this.tl.session_id === sid) this.tl = removeEntry(this.tl, 'u:' + localId);
      // Give the text back unless the user has typed something new meanwhile.
      if (!this.composer[sid]) this.composer[sid] = text;
      this.fail(e);
    } finally {
      this.sending = false;
      this.refreshSessionsSoon();
    }
  }

  /** Sets how writes are treated in the open conversation (audited by the engine). */
  async setAutonomy(mode: AutonomyInput) {
    const sid = this.currentId;
    if (!sid) return;
    try {
      const view = await api.setAutonomy(sid, mode);
      if (this.tl && this.tl.session_id === sid) this.tl = { ...this.tl, autonomy: view };
    } catch (e) {
      this.fail(e);
    }
  }

  async stop() {
    if (!this.currentId) return;
    try {
      await api.cancelTurn(this.currentId);
    } catch (e) {
      this.fail(e);
    }
  }

  // ---- card drafts
  draftOf(callId: string): CardDraft {
    return this.cardDrafts[callId] ?? {};
  }
  setDraft(callId: string, patch: CardDraft) {
    const next: CardDraft = { ...this.cardDrafts[callId], ...patch };
    for (const k of Object.keys(next) as (keyof CardDraft)[]) if (next[k] === undefined) delete next[k];
    const { [callId]: _old, ...rest } = this.cardDrafts;
    this.cardDrafts = Object.keys(next).length ? { ...rest, [callId]: next } : rest;
  }

  // ---- decisions
  private setBusy(ids: string[], on: boolean) {
    const next = new Set(this.busy);
    for (const id of ids) on ? next.add(id) : next.delete(id);
    this.busy = next;
  }
  markAlways(id: string) {
    this.alwaysIds = new Set([...this.alwaysIds, id]);
  }
  isBusy(id: string) {
    return this.busy.has(id);
  }

  /** Calls decided from this window (the inbox drawer follows to the next row after them, but
   *  closes when its approval was decided somewhere else). Not reactive: read in effects. */
  decidedHere = new Set<string>();

  async decide(callId: string, decision: DecisionInput): Promise<boolean> {
    if (this.busy.has(callId)) return false;
    this.decidedHere.add(callId);
    this.setBusy([callId], true);
    try {
      await api.decide(callId, decision);
      this.setDraft(callId, { edit: undefined, reason: undefined });
      return true;
    } catch (e) {
      this.failDecision(e);
      if (this.alwaysIds.has(callId)) this.alwaysIds = new Set([...this.alwaysIds].filter((x) => x !== callId));
      this.refreshPending().catch(() => {});
      return false;
    } finally {
      this.setBusy([callId], false);
    }
  }

  async decideMany(ids: string[], decision: DecisionInput): Promise<boolean> {
    const todo = ids.filter((id) => !this.busy.has(id));
    if (!todo.length) return false;
    for (const id of todo) this.decidedHere.add(id);
    this.setBusy(todo, true);
    try {
      await api.decideMany(todo.map((call_id) => ({ call_id, decision })));
      return true;
    } catch (e) {
      this.failDecision(e);
      return false;
    } finally {
      this.setBusy(todo, false);
      this.refreshPending().catch(() => {});
    }
  }

  async settle(callId: string, settlement: SettlementInput) {
    if (this.busy.has(callId)) return;
    this.setBusy([callId], true);
    try {
      await api.settle(callId, settlement);
    } catch (e) {
      this.fail(e);
    } finally {
      this.setBusy([callId], false);
    }
  }

  /** After settings or secrets changed: they applied at once, possibly leaving (or going back
   * to) demo mode, whose conversations and approvals are kept apart; reload what depends on it. */
  async reloadAfterSettings() {
    const results = await Promise.allSettled([
      api.appInfo().then((i) => (this.info = i)),
      api.account().then((a) => (this.account = a)),
      this.refreshPending(),
      this.refreshSessions(),
    ]);
    for (const r of results) if (r.status === 'rejected') this.fail(r.reason);
  }

  // ---- sign-in
  async startSignIn(callId: string | null, scopes: string[], embedded: boolean) {
    this.signInCall = callId;
    this.signInMcp = scopes.find((s) => s.startsWith('mcp:'))?.slice(4) ?? null;
    this.signIn = { state: 'starting' };
    try {
      const ticket = await api.signIn(scopes, embedded);
      // An event may have moved it on already.
      if (this.signIn.state === 'starting') this.signIn = { state: 'waiting', url: ticket.url, device: ticket.device ?? null };
      // By scanning no window opens: a sign-in asked from the status bar shows its QR code in
      // the account drawer (a card or the connect dialog shows its own).
      if (ticket.device && callId === null && !this.connectOpen) this.drawer = { kind: 'account' };
    } catch (e) {
      this.signIn = { state: 'failed', message: errorMessage(e) };
      this.fail(e);
    }
  }
  async openInBrowser(callId: string | null, scopes: string[]) {
    if (this.signIn.state === 'waiting') {
      try {
        await api.openSignInInBrowser();
      } catch (e) {
        this.fail(e);
      }
    } else {
      await this.startSignIn(callId, scopes, false);
    }
  }
  async cancelSignIn() {
    try {
      await api.cancelSignIn();
      this.signIn = { state: 'idle' };
    } catch (e) {
      this.fail(e);
    }
  }
  async declineSignIn(callId: string) {
    if (this.busy.has(callId)) return;
    this.setBusy([callId], true);
    try {
      await api.declineSignIn(callId);
      if (this.signInCall === callId) this.signIn = { state: 'idle' };
    } catch (e) {
      this.fail(e);
    } finally {
      this.setBusy([callId], false);
    }
  }
  /** Opens the sign-in window on the waiting device sign-in's page (no phone at hand). */
  async openSignInWindow() {
    try {
      await api.openSignInWindow();
    } catch (e) {
      this.fail(e);
    }
  }

  // ---- the Feishu app lacks a permission (scope_apply_url)
  async openScopeApply(callId: string) {
    try {
      await api.openScopeApply(callId);
    } catch (e) {
      this.fail(e);
    }
  }
  /** Runs the held call again once the app's permission was granted; says so when Feishu still refuses. */
  async retryAuthCall(callId: string) {
    if (this.busy.has(callId)) return;
    this.setBusy([callId], true);
    this.stillLacking = new Set([...this.stillLacking].filter((x) => x !== callId));
    try {
      const turn = await api.retryAuthCall(callId);
      // Still held: the turn waits again on the same call.
      if (turn.status === 'suspended' && this.call(callId)?.scope_apply_url) this.stillLacking = new Set([...this.stillLacking, callId]);
    } catch (e) {
      this.fail(e);
    } finally {
      this.setBusy([callId], false);
    }
  }

  // ---- MCP servers' questions
  private questionsSeq = 0;
  async refreshQuestions() {
    const seq = ++this.questionsSeq;
    const list = await api.mcpQuestions();
    // Only the latest answer counts when two reads cross.
    if (seq === this.questionsSeq) this.mcpQuestions = list;
  }
  /** An answered question leaves at once, before the core's event. */
  dropQuestion(id: string) {
    this.questionsSeq++; // a read under way may predate the answer
    this.mcpQuestions = this.mcpQuestions.filter((q) => q.id !== id);
  }

  // ---- the lark-mcp preset
  /** Installs lark-mcp (and Node.js if needed); its view once done, null if it failed (the error
   *  stays in `larkInstall`) or another install is under way. */
  async installLarkMcp(): Promise<LarkMcpView | null> {
    if (this.larkInstall.running) return null;
    this.larkInstall = { running: true, progress: null, error: null };
    try {
      const v = await api.installLarkMcp();
      this.larkInstall = { running: false, progress: null, error: null };
      return v;
    } catch (e) {
      this.larkInstall = { running: false, progress: null, error: errorMessage(e, this.lang) };
      return null;
    }
  }

  // ---- "Connect my Feishu"
  /** Opens the dialog at its start (a finished or failed registration is not shown again). */
  openConnect() {
    if (this.connect.state !== 'waiting' && this.connect.state !== 'starting') this.connect = { state: 'intro' };
    this.connectOpen = true;
  }
  async startConnect() {
    this.connect = { state: 'starting' };
    try {
      const v = await api.connectFeishu();
      // An event may have moved it on already.
      if (this.connect.state === 'starting') this.onConnect(v);
    } catch (e) {
      const message = isUiError(e) ? { zh: e.zh, en: e.en } : { zh: errorMessage(e, 'zh'), en: errorMessage(e, 'en') };
      this.connect = { state: 'failed', reason: 'other', message };
    }
  }
  async openConnectPage() {
    try {
      await api.openConnectPage();
    } catch (e) {
      this.fail(e);
    }
  }
  /** Esc, Cancel or Close: a waiting registration is called off; a waiting second-step sign-in too. */
  async closeConnect() {
    const st = this.connect.state;
    this.connectOpen = false;
    if (st === 'waiting' || st === 'starting') {
      this.connect = { state: 'intro' };
      try {
        await api.cancelConnect();
      } catch (e) {
        this.fail(e);
      }
    } else if (st === 'connected' && (this.signIn.state === 'waiting' || this.signIn.state === 'starting')) {
      await this.cancelSignIn();
    }
  }
  /** Where the registration stands, from the command's answer or a `connect` event. */
  private onConnect(v: ConnectState) {
    const was = this.connect.state;
    this.connect = v;
    if (v.state === 'connected' && was !== 'connected') {
      // The core switched to the new app at once: leave demo mode's data, and start step 2 clean
      // (unless its sign-in already arrived).
      if (this.signIn.state !== 'waiting' && this.signIn.state !== 'starting') {
        this.signIn = { state: 'idle' };
        this.signInCall = null;
      }
      this.reloadAfterSettings().catch(() => {});
      api
        .settings()
        .then((s) => this.applySettingsView(s))
        .catch(() => {});
    }
  }
  /** "Open model settings" from the dialog: Settings, scrolled to the model. */
  goToModelSettings() {
    this.connectOpen = false;
    this.settingsFocus = 'model';
    this.view = 'settings';
  }
  /** "I already have an app": Settings → Feishu with the advanced fields open. */
  goToOwnApp() {
    this.connectOpen = false;
    this.feishuAdvancedOpen = true;
    this.settingsFocus = 'feishu';
    this.view = 'settings';
  }

  /** Reads the account and whose conversations these are again (the status bar shows both). */
  refreshAccount() {
    api.account().then((a) => (this.account = a)).catch(() => {});
    api.appInfo().then((i) => (this.info = i)).catch(() => {});
  }

  async signOut() {
    try {
      await api.signOut();
      this.account = null;
      this.refreshAccount();
      this.signIn = { state: 'idle' };
    } catch (e) {
      this.fail(e);
    }
  }

  // ---- events
  onEvent(ev: UiEventView) {
    if (this.tl) this.tl = applyEvent(this.tl, ev);
    this.mcpProgress = applyProgress(this.mcpProgress, ev);
    switch (ev.type) {
      case 'call': {
        const c = ev.call;
        const wasPending = c.call_id in this.pendingCalls;
        if (c.pending) this.pendingCalls = { ...this.pendingCalls, [c.call_id]: c };
        else if (wasPending) {
          const { [c.call_id]: _gone, ...rest } = this.pendingCalls;
          this.pendingCalls = rest;
        }
        // Tell the user when something starts to wait where they are not looking; forget it once
        // it no longer waits (decided here, in the inbox, or anywhere else).
        if (c.pending && !wasPending && !this.isViewing(c.session_id)) {
          this.attentionIds = [...this.attentionIds.filter((id) => id !== c.call_id), c.call_id];
        } else if (!c.pending && this.attentionIds.includes(c.call_id)) {
          this.attentionIds = this.attentionIds.filter((id) => id !== c.call_id);
        }
        if (!this.tl || this.tl.session_id !== c.session_id) this.knownCalls = { ...this.knownCalls, [c.call_id]: c };
        // A call that waits for a sign-in may mean the last one ended: the status bar must not
        // go on naming an account that is gone.
        if (c.status === 'awaiting_auth' && !wasPending) this.refreshAccount();
        if (wasPending !== c.pending) this.refreshSessionsSoon();
        // A new permission request starts from a clean sign-in state (not another card's result).
        if (c.status === 'awaiting_auth' && !wasPending && c.call_id !== this.signInCall) {
          if (this.signIn.state !== 'waiting' && this.signIn.state !== 'starting') {
            this.signIn = { state: 'idle' };
            this.signInCall = null;
          }
        }
        break;
      }
      case 'turn':
        if (ev.status !== 'running') {
          this.refreshSessionsSoon();
          this.dropProgressOf(ev.session_id);
        }
        break;
      case 'mcp_servers':
        this.mcpServersSeq++;
        break;
      case 'mcp_questions':
        this.refreshQuestions().catch(() => {});
        break;
      case 'mcp_setup':
        if (this.larkInstall.running) this.larkInstall = { ...this.larkInstall, progress: setupFromEvent(ev) };
        break;
      case 'items':
        this.refreshSessionsSoon();
        break;
      case 'open_call': {
        // "Open in app" on the call's card in Feishu: the shell brought the window forward;
        // show the conversation at that call.
        const c = this.pendingCalls[ev.call_id] ?? this.knownCalls[ev.call_id];
        if (c) this.onOpen({ session_id: c.session_id, call_id: c.call_id }).catch((e) => this.fail(e));
        else this.view = 'inbox';
        break;
      }
      case 'remote_cards':
        this.inFeishu = new Set(ev.call_ids);
        break;
      case 'open_inbox':
        // "Open in app" on the summary card in Feishu (more waiting than the chat shows).
        this.view = 'inbox';
        break;
      case 'connect':
        this.onConnect(ev.status);
        break;
      case 'sign_in':
        this.signIn = ev.status;
        if (ev.status.state === 'signed_in') {
          this.refreshAccount();
          const previous = ev.status.switched_from;
          if (previous) {
            this.toast('info', this.t('switched_person', { name: ev.status.name, previous }));
            this.refreshSessions().catch(() => {});
            this.refreshPending().catch(() => {});
          }
        }
        break;
    }
  }

  /** A turn that ended leaves none of its calls running: their progress bars go. */
  private dropProgressOf(sessionId: string) {
    const ids = Object.keys(this.mcpProgress);
    if (!ids.length) return;
    const inSession = (id: string) => {
      const c = this.tl?.calls[id] ?? this.knownCalls[id] ?? this.pendingCalls[id];
      if (c) return c.session_id === sessionId;
      return this.tl?.session_id === sessionId && this.tl.items.some((e) => e.kind === 'tool' && e.call_id === id);
    };
    const keep = ids.filter((id) => !inSession(id));
    if (keep.length !== ids.length) this.mcpProgress = Object.fromEntries(keep.map((id) => [id, this.mcpProgress[id]]));
  }

  async onOpen(req: OpenRequest) {
    // Another agent's request waits in a session of its own, none of the user's conversations:
    // its card opens in Approvals.
    const asked = req.call_id ? this.pendingCalls[req.call_id] : undefined;
    if (asked?.requester) {
      this.attentionIds = this.attentionIds.filter((id) => id !== asked.call_id);
      this.view = 'inbox';
      this.openCall(asked.call_id);
      return;
    }
    await this.selectSession(req.session_id);
    if (req.call_id) {
      this.highlight = req.call_id;
      setTimeout(() => {
        if (this.highlight === req.call_id) this.highlight = null;
      }, 4000);
    }
  }

  openCall(callId: string, edit = false) {
    this.drawer = { kind: 'call', callId, edit };
  }
  closeDrawer() {
    this.drawer = null;
  }
}

/** Whether `c` is an approval whose expiry has passed at `now`. */
export function expiredAt(c: CallView, now: number): boolean {
  return c.status === 'awaiting_approval' && c.expires_at != null && c.expires_at <= now;
}

/** `c` as the engine will record it once its expiry is swept. */
function asExpired(c: CallView): CallView {
  return { ...c, status: 'done', pending: false, verdict: 'expired', decided_by: 'engine', outcome: 'cancelled' };
}

export const store = new Store();
export { pick };

// A fake Tauri backend, injected before the app loads (page.addInitScript). It implements the
// IPC surface @tauri-apps/api v2 calls (window.__TAURI_INTERNALS__) and a small state machine of
// the companion commands. Tests read window.__fake.log and drive window.__fake.emit(...).
(() => {
  const opts = Object.assign({ demo: true, pending: 0, signedIn: false, sessions: 1, chunkDelay: 15 }, window.__FAKE_OPTS__ || {});
  const now = () => Date.now();
  const HOUR = 3600e3;
  const callbacks = new Map();
  const listeners = new Map(); // event name -> [{eventId, handlerId}]
  let cbSeq = 1;
  let evSeq = 1;
  let seq = 1;
  const log = [];

  const text = (zh, en) => ({ zh, en });
  // A command's failure as the real core words it (companion::user_error::UiError).
  const uiError = (code, en, zh) => ({ code, message: en, zh, en });
  const notPending = () =>
    uiError('not_pending', 'This action no longer waits for your decision (it may have been decided elsewhere).', '这项操作已不再等待你的决定（可能已在别处处理）。');
  const sessions = [];
  const timelines = {}; // session id -> items
  const calls = {}; // call id -> CallView
  let account = opts.signedIn
    ? { name: '张三', open_id: 'ou_fake_1', scopes: [{ scope: 'offline_access', label: text('保持登录状态', 'Stay signed in') }], expires_at: now() + 2 * HOUR, refresh_expires_at: now() + 30 * 24 * HOUR }
    : null;
  let settings = {
    language: opts.language || 'system',
    theme: opts.theme || 'system',
    model: { preset: 'deepseek', base_url: null, model: null },
    feishu: { brand: 'feishu', app_id: opts.appId ?? 'cli_demo', redirect_port: 53682, sign_in_flow: opts.signInFlow || 'auto', created_by_app: !!opts.createdByApp },
    approval_expiry_minutes: 1440,
    time_zone: '',
    check_for_updates: true,
    remote_approval: { enabled: false, when: 'away', away_minutes: 10 },
  };
  let secretSet = false;
  const keys = { deepseek: false, openai: true };
  const rules = [
    { id: 'r1', tool: 'send_message', title: text('发送消息', 'Send a message'), effect: 'always_allow', constraints: { chat_id: 'oc_team' }, expires_at: null, created_at: now() - 5 * HOUR, revoked_at: null },
  ];
  const audit = [];
  let signIn = null;
  // "Connect my Feishu" (issue 22): the registration that waits, if any.
  let connect = null;
  // Calls whose missing app permission an administrator approved (a retry then goes through).
  const granted = new Set();

  /** A QR-looking drawing of `seed` (finder patterns, timing, pseudo-random data): the core's
   *  QrView shape, not a scannable code. */
  function fakeQr(seed) {
    const n = 29;
    let h = 2166136261;
    for (const ch of String(seed)) h = Math.imul(h ^ ch.charCodeAt(0), 16777619) >>> 0;
    const rnd = () => ((h = Math.imul(h ^ (h >>> 15), 2246822507) >>> 0), (h ^= h >>> 13), (h >>> 0) / 4294967296);
    const dark = Array.from({ length: n }, () => Array(n).fill(false));
    const inFinder = (x, y) => [[0, 0], [n - 7, 0], [0, n - 7]].some(([fx, fy]) => x >= fx - 1 && x <= fx + 7 && y >= fy - 1 && y <= fy + 7);
    for (const [fx, fy] of [[0, 0], [n - 7, 0], [0, n - 7]])
      for (let y = 0; y < 7; y++)
        for (let x = 0; x < 7; x++) {
          const ring = Math.max(Math.abs(x - 3), Math.abs(y - 3));
          dark[fy + y][fx + x] = ring !== 2;
        }
    for (let y = 0; y < n; y++)
      for (let x = 0; x < n; x++) {
        if (inFinder(x, y)) continue;
        if (y === 6 || x === 6) dark[y][x] = (x + y) % 2 === 0;
        else dark[y][x] = rnd() < 0.5;
      }
    let path = '';
    for (let y = 0; y < n; y++) for (let x = 0; x < n; x++) if (dark[y][x]) path += `M${x} ${y}h1v1h-1z`;
    return { size: n, path };
  }
  const userCode = () => ['WDJB', 'MJHT', 'QXPR', 'LKZN'][seq % 4] + '-' + ['KQ7F', 'R2VD', 'H8MS', 'TC4B'][(seq + 1) % 4];
  /** Whether a sign-in goes by scanning: chosen, or `auto` for an app the companion created. */
  const byDevice = () => opts.device || settings.feishu.sign_in_flow === 'device' || (settings.feishu.sign_in_flow === 'auto' && settings.feishu.created_by_app);
  function deviceCode() {
    const url = 'https://accounts.feishu.cn/oauth/v1/device/verify?user_code=' + userCode();
    return { user_code: userCode(), qr: fakeQr(url + seq++), url, expires_at: now() + (opts.deviceExpiresMs ?? 300e3), interval_secs: 5 };
  }
  // Updates (opts.update: the version the release server offers).
  let update = opts.update
    ? { state: 'available', update: { version: opts.update, current_version: '0.1.0', notes: opts.updateNotes ?? '', date: '2026-11-30T08:00:00Z' } }
    : { state: 'up_to_date' };
  let resetRequested = false;
  // Settings → Data; a test passes `data` in the options to show locked or unreadable secrets.
  const data = opts.data || {
    secrets_locked: null,
    unreadable: [],
    sign_in_problem: null,
    database: { state: 'ok' },
    reset_deletes: [
      { what: text('数据库：全部对话、待审批事项、规则、审计记录，以及加密保存的登录信息、App Secret 和模型密钥', 'The database: every conversation, pending approval, rule and the audit trail, and the encrypted sign-in, App Secret and model keys'), path: '/home/u/.local/share/feishu-companion/companion.db' },
      { what: text('设置', 'Settings'), path: '/home/u/.config/feishu-companion/settings.json' },
      { what: text('主密钥文件（仅在系统钥匙串不可用时使用）', 'The master key file (used only where no system keychain is available)'), path: '/home/u/.local/share/feishu-companion/master.key' },
    ],
  };

  function addSession(title, pendingN) {
    const id = 's' + (sessions.length + 1);
    sessions.push({ id, title, created_at: now() - (sessions.length + 1) * HOUR, updated_at: now() - sessions.length * 600e3, pending: pendingN || 0 });
    timelines[id] = [];
    return id;
  }
  for (let i = 0; i < opts.sessions; i++) addSession((opts.titles && opts.titles[i]) ?? (i === 0 ? '' : ['本周周报', '安排下周一例会', 'Q3 roadmap review'][(i - 1) % 3]), 0);

  function call(over) {
    const id = over.call_id || 'c' + seq++;
    const c = Object.assign(
      {
        call_id: id,
        session_id: 's1',
        invocation_id: 'inv' + seq,
        tool: 'send_message',
        title: text('发送消息', 'Send a message'),
        args: { chat_id: 'oc_product', text: '大家好，明天下午 3 点产品评审会，请准时参加。' },
        original_args: null,
        status: 'awaiting_approval',
        pending: true,
        requires_approval: true,
        preview: {
          summary: text('以你的身份向「产品周会」发送消息', 'Send a message to 产品周会 as you'),
          risk: 'normal',
          fields: [
            { label: text('会话', 'Chat'), value: '产品周会（12 人）' },
            { label: text('内容', 'Message'), value: '大家好，明天下午 3 点产品评审会，请准时参加。' },
          ],
          changes: [],
        },
        scopes: [],
        authorize_url: null,
        scope_apply_url: null,
        verdict: null,
        decided_by: null,
        reason: null,
        reason_text: null,
        outcome: null,
        created_at: now(),
        expires_at: now() + 24 * HOUR,
        updated_at: now(),
        requester: null,
      },
      over,
    );
    calls[id] = c;
    return c;
  }

  // Seed pending approvals across sessions for the inbox.
  if (opts.pending > 0) {
    const s2 = sessions[1] ? sessions[1].id : addSession('本周周报', 0);
    const s3 = sessions[2] ? sessions[2].id : addSession('安排下周一例会', 0);
    const sids = ['s1', s2, s3];
    for (let i = 0; i < opts.pending; i++) {
      const sid = sids[i % 3];
      const ev = i % 4 === 1;
      const c = call({
        call_id: 'p' + i,
        session_id: sid,
        tool: ev ? 'create_calendar_event' : 'send_message',
        title: ev ? text('创建日程', 'Create a calendar event') : text('发送消息', 'Send a message'),
        args: ev ? { calendar_id: 'cal_primary', summary: '评审 #' + i, start: '2025-06-03T15:00' } : { chat_id: 'oc_' + (i % 7), text: '消息 #' + i },
        preview: {
          summary: ev ? text(`创建日程「评审 #${i}」`, `Create the event “Review #${i}”`) : text(`向「群 ${i % 7}」发送消息 #${i}`, `Send message #${i} to group ${i % 7}`),
          risk: i % 10 === 3 ? 'high' : 'normal',
          fields: [{ label: text('内容', 'Message'), value: '消息 #' + i }],
          changes: [],
        },
        created_at: now() - (opts.pending - i) * 60e3,
        expires_at: now() + 24 * HOUR - (opts.pending - i) * 60e3,
      });
      timelines[sid].push({ kind: 'tool', call_id: c.call_id, at: c.created_at, tool: c.tool, title: c.title, args: c.args, result: null });
    }
  }

  if (opts.longTimeline) {
    const tl = timelines['s1'];
    sessions[0].title = '很长的对话';
    for (let i = 0; i < opts.longTimeline; i++) {
      tl.push(i % 2 ? { kind: 'assistant', id: 'L' + i, at: now() - (opts.longTimeline - i) * 1000, author: 'companion', text: '消息 #' + i } : { kind: 'user', id: 'L' + i, at: now() - (opts.longTimeline - i) * 1000, text: '消息 #' + i });
    }
  }

  for (let i = 0; i < 60; i++) {
    const kinds = ['approval.requested', 'approval.approved', 'approval.rejected', 'call.dispatched', 'call.completed', 'rule.created', 'auth.signed_in'];
    const k = kinds[i % kinds.length];
    audit.push({ at: now() - i * 37 * 60e3, session_id: 's1', call_id: 'c' + i, tool: k.startsWith('auth') ? null : 'send_message', tool_title: k.startsWith('auth') ? null : { zh: '发送消息', en: 'Send a message' }, kind: k, label: { zh: { 'approval.requested': '请求批准', 'approval.approved': '已批准', 'approval.rejected': '已拒绝' }[k] ?? k, en: { 'approval.requested': 'Approval requested', 'approval.approved': 'Approved', 'approval.rejected': 'Rejected' }[k] ?? k }, actor: k.startsWith('approval.a') ? 'user' : 'engine', detail: { n: i, reason: k.endsWith('rejected') ? '改到周五' : undefined } });
  }

  // ---- events
  function emit(event, payload) {
    for (const l of listeners.get(event) || []) {
      const cb = callbacks.get(l.handlerId);
      if (cb) cb({ event, id: l.eventId, payload });
    }
  }
  const ui = (payload) => emit('companion://event', payload);
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  function pushItems(sid, inv, items) {
    for (const it of items) {
      const tl = timelines[sid];
      if (it.kind === 'tool' && it.result) {
        const prev = tl.find((x) => x.kind === 'tool' && x.call_id === it.call_id);
        if (prev) {
          prev.result = it.result;
          continue;
        }
      }
      tl.push(it);
    }
    ui({ type: 'items', session_id: sid, invocation_id: inv, items });
  }
  // Approve from Feishu: the calls whose card waits in Feishu (the core's set).
  let inFeishu = [...(opts.inFeishu || [])];
  function setInFeishu(ids) {
    inFeishu = [...ids].sort();
    ui({ type: 'remote_cards', call_ids: inFeishu });
  }
  function updateCall(c, over) {
    Object.assign(c, over, { updated_at: now() });
    ui({ type: 'call', call: JSON.parse(JSON.stringify(c)) });
    // The core finishes a decided call's card in Feishu and says so.
    if (!c.pending && inFeishu.includes(c.call_id)) setInFeishu(inFeishu.filter((id) => id !== c.call_id));
  }
  let running = {};
  function turn(sid, inv, status) {
    running[sid] = status === 'running';
    ui({ type: 'turn', session_id: sid, invocation_id: inv, status });
  }
  async function stream(sid, inv, chunks) {
    for (const ch of chunks) {
      ui({ type: 'text', session_id: sid, invocation_id: inv, text: ch });
      await sleep(opts.chunkDelay);
    }
  }

  async function sendMessage({ sessionId, text: body, cancelWaiting }) {
    if (opts.failSend) throw opts.failSend;
    const sid = sessionId;
    // As the engine does: waiting approvals survive a new message unless the user called them off.
    if (cancelWaiting) {
      for (const c of Object.values(calls)) {
        if (c.session_id === sid && c.status === 'awaiting_approval') {
          updateCall(c, {
            status: 'done',
            pending: false,
            verdict: 'cancelled',
            decided_by: 'user',
            reason: 'cancelled by the user when they sent a new message',
            reason_text: text('你发送新消息时选择了取消等待中的审批', 'You cancelled it when you sent a new message'),
            outcome: 'cancelled',
          });
        }
      }
    }
    const inv = 'inv' + seq++;
    const s = sessions.find((x) => x.id === sid);
    if (s && !s.title) s.title = body.slice(0, 20);
    if (s) s.updated_at = now();
    pushItems(sid, inv, [{ kind: 'user', id: 'e' + seq++, at: now(), text: body }]);
    turn(sid, inv, 'running');
    if (/markdown|xss/i.test(body)) {
      const md = '**Bold** and a [bad link](javascript:alert(1)) <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> <a href="https://open.feishu.cn" target="_blank">docs</a> [data link](data:text/html;base64,PHNjcmlwdD4=) [mail](mailto:a@example.com) [plain](http://example.com/a?b=1)';
      await stream(sid, inv, ['Here ', 'it is: ']);
      pushItems(sid, inv, [{ kind: 'assistant', id: 'e' + seq++, at: now(), author: 'companion', text: md }]);
      turn(sid, inv, 'completed');
      return { invocation_id: inv, status: 'completed' };
    }
    if (/思考|reasoning|限流|rate limit/i.test(body)) {
      // A thinking model's turn: reasoning, an answer cut at its limit, the turn's token usage;
      // or a rate limit with the wait the service asked for.
      if (/限流|rate limit/i.test(body)) {
        pushItems(sid, inv, [{ kind: 'notice', id: 'e' + seq++, at: now(), level: 'error', text: 'Google Gemini is limiting requests (HTTP 429). The service asked to wait 36 s before trying again.', code: 'rate_limited', retry_at: now() + (opts.retryMs ?? 36000) }]);
        turn(sid, inv, 'failed');
        return { invocation_id: inv, status: 'failed' };
      }
      await stream(sid, inv, ['明天上午 10 点有', '产品周会，下午']);
      const id = 'e' + seq++;
      pushItems(sid, inv, [
        { kind: 'reasoning', id, at: now(), text: '用户问明天的安排。先查日历：明天有产品周会和一个评审会。' },
        { kind: 'assistant', id, at: now(), author: 'companion', text: '明天上午 10 点有产品周会，下午' },
        { kind: 'stopped', id, at: now(), reason: 'max_tokens' },
        { kind: 'usage', id, invocation_id: inv, at: now(), input_tokens: 1200, output_tokens: 512, reasoning_tokens: 380 },
      ]);
      turn(sid, inv, 'completed');
      return { invocation_id: inv, status: 'completed' };
    }
    if (/待办|task|auth|授权/i.test(body)) {
      await stream(sid, inv, ['我需要', '先获得读取待办的权限。']);
      const c = call({
        session_id: sid,
        invocation_id: inv,
        tool: 'list_tasks',
        title: text('查看待办', 'Read your tasks'),
        args: { completed: false },
        status: 'awaiting_auth',
        requires_approval: false,
        preview: null,
        expires_at: null,
        scopes: [
          { scope: 'task:task:read', label: text('查看你的待办', 'See your tasks') },
          { scope: 'offline_access', label: text('保持登录状态', 'Stay signed in') },
        ],
        authorize_url: 'http://127.0.0.1:53682/fallback-authorize',
      });
      pushItems(sid, inv, [
        { kind: 'assistant', id: 'e' + seq++, at: now(), author: 'companion', text: '我需要先获得读取待办的权限。' },
        { kind: 'tool', call_id: c.call_id, at: now(), tool: c.tool, title: c.title, args: c.args, result: null },
      ]);
      updateCall(c, {});
      turn(sid, inv, 'suspended');
      return { invocation_id: inv, status: 'suspended' };
    }
    await stream(sid, inv, ['好的，', '我来', '帮你通知大家。']);
    const c = call({ session_id: sid, invocation_id: inv });
    pushItems(sid, inv, [
      { kind: 'assistant', id: 'e' + seq++, at: now(), author: 'companion', text: '好的，我来帮你通知大家。' },
      { kind: 'tool', call_id: c.call_id, at: now(), tool: c.tool, title: c.title, args: c.args, result: null },
    ]);
    updateCall(c, {});
    turn(sid, inv, 'suspended');
    return { invocation_id: inv, status: 'suspended' };
  }

  async function finish(c, decision) {
    const sid = c.session_id;
    const inv = c.invocation_id;
    if (decision.kind === 'reject') {
      updateCall(c, { status: 'done', pending: false, verdict: 'rejected', decided_by: 'user', reason: decision.reason, outcome: 'cancelled' });
      turn(sid, inv, 'running');
      pushItems(sid, inv, [
        { kind: 'tool', call_id: c.call_id, at: now(), tool: c.tool, title: c.title, args: {}, result: { is_error: true, text: 'rejected by the user' } },
        { kind: 'assistant', id: 'e' + seq++, at: now(), author: 'companion', text: '好的，我不发送这条消息了。' },
      ]);
    } else {
      const edited = decision.kind === 'approve_edited';
      updateCall(c, { status: 'dispatching', pending: false, verdict: edited ? 'approved_edited' : 'approved', decided_by: 'user', original_args: edited ? c.args : null, args: edited ? decision.args : c.args });
      turn(sid, inv, 'running');
      await sleep(20);
      updateCall(c, { status: 'done', outcome: 'completed' });
      pushItems(sid, inv, [
        { kind: 'tool', call_id: c.call_id, at: now(), tool: c.tool, title: c.title, args: {}, result: { is_error: false, text: '{"message_id":"om_1"}' } },
        { kind: 'assistant', id: 'e' + seq++, at: now(), author: 'companion', text: '消息已发送到「产品周会」。' },
      ]);
    }
    turn(sid, inv, 'completed');
    return { invocation_id: inv, status: 'completed' };
  }

  function pendingList() {
    return Object.values(calls).filter((c) => c.pending).map((c) => JSON.parse(JSON.stringify(c)));
  }

  const presets = () => [
    { id: 'deepseek', name: text('DeepSeek', 'DeepSeek'), kind: 'openai_compatible', base_url: 'https://api.deepseek.com', default_model: 'deepseek-chat', takes_key: true, key_set: keys.deepseek },
    { id: 'openai', name: text('OpenAI', 'OpenAI'), kind: 'openai_compatible', base_url: 'https://api.openai.com/v1', default_model: 'gpt-4o-mini', takes_key: true, key_set: keys.openai },
    { id: 'ollama', name: text('Ollama（本机）', 'Ollama (local)'), kind: 'openai_compatible', base_url: 'http://127.0.0.1:11434/v1', default_model: 'qwen2.5', takes_key: false, key_set: false },
    { id: 'custom', name: text('自定义', 'Custom'), kind: 'openai_compatible', base_url: '', default_model: '', takes_key: true, key_set: false },
  ];

  // ---- MCP servers (Settings → Tools · MCP servers). Configs with their secrets apart, as the
  // core keeps them; a view is made from them on every answer. opts.mcpServers seeds configs;
  // opts.mcpStartMs is how long a start takes; a server whose command is `fail` fails to start.
  const mcpTools = (id) => [
    { name: 'read_file', agent_name: `mcp__${id}__read_file`, title: 'Read a file', description: 'Reads the complete contents of a file from the file system as text. Handles various text encodings and gives detailed error messages if the file cannot be read. Only works within allowed directories.', read_only_hint: true, destructive_hint: null },
    { name: 'delete_file', agent_name: `mcp__${id}__delete_file`, title: null, description: 'Deletes a file.', read_only_hint: false, destructive_hint: true },
  ];
  const feishuDocs = {
    id: 'feishu', name: '飞书文档 · Feishu Docs', transport: 'http', command: '', args: [], cwd: null, url: 'https://mcp.feishu.cn/mcp', env: [], headers: [],
    enabled: true, trusted: false, timeout_secs: 60, builtin: true, read_tools: ['fetch-doc', 'locate-doc'], phase: 'idle', error: null, starts: 0, server_info: null,
    tools: ['create-doc', 'fetch-doc', 'locate-doc', 'update-doc'].map((n) => ({ name: n, agent_name: `mcp__feishu__${n}`, title: null, description: { 'create-doc': 'Creates a Feishu document from Markdown.', 'fetch-doc': 'Fetches a Feishu document as Markdown.', 'locate-doc': 'Finds documents by title or content.', 'update-doc': 'Updates a Feishu document with Markdown.' }[n], read_only_hint: null, destructive_hint: null })),
    log: '',
  };
  const mcp = [...(opts.mcpBuiltin === false ? [] : [feishuDocs]), ...(opts.mcpServers || []).map((c) => Object.assign({ transport: 'stdio', command: '', args: [], cwd: null, url: '', env: [], headers: [], enabled: true, trusted: false, timeout_secs: 60, builtin: false, read_tools: [], phase: 'idle', error: null, starts: 0, server_info: null, tools: [], log: '' }, c))];
  const mcpVault = {}; // `${id}/${env|header}/${name}` -> value
  for (const c of opts.mcpServers || []) for (const [k, v] of Object.entries(c.values || {})) mcpVault[`${c.id}/env/${k}`] = v;
  const mcpView = (c) => ({
    builtin: c.builtin, needs_sign_in: !!c.needs_sign_in, id: c.id, name: c.name, transport: c.transport, command: c.command, args: c.args, cwd: c.cwd, url: c.url, env: c.env, headers: c.headers,
    missing_values: [...c.env.filter((n) => !(`${c.id}/env/${n}` in mcpVault)), ...c.headers.filter((n) => !(`${c.id}/header/${n}` in mcpVault))],
    enabled: c.enabled, trusted: c.trusted, timeout_secs: c.timeout_secs, phase: c.phase, error: c.error, starts: c.starts, server_info: c.server_info,
    tools: c.tools.map((t) => {
      const marked = c.read_tools.includes(t.name);
      return { ...t, marked_read: marked, runs_without_approval: marked || (c.trusted && t.read_only_hint === true) };
    }),
  });
  const mcpFind = (id) => {
    const c = mcp.find((x) => x.id === id);
    if (!c) throw uiError('other', `no MCP server ${id}`, `no MCP server ${id}`);
    return c;
  };
  const mcpChanged = () => ui({ type: 'mcp_servers' });
  const mcpSlug = (name) => (name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 24) || 'server');
  const mcpUniqueId = (base) => {
    let id = base;
    for (let n = 2; mcp.some((x) => x.id === id); n++) id = `${base}-${n}`;
    return id;
  };
  const mcpInvalid = (msg) => uiError('other', msg, msg);
  const mcpFiles = {
    '/home/u/.config/Claude/claude_desktop_config.json': JSON.stringify({ mcpServers: { memory: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] }, github: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'], env: { GITHUB_TOKEN: 'ghp_x' } } } }),
    '/home/u/.cursor/mcp.json': JSON.stringify({ mcpServers: { linear: { url: 'https://mcp.linear.app/mcp' } } }),
  };
  function mcpImport(text) {
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw mcpInvalid('The configuration is not JSON: ' + e.message);
    }
    const entries = parsed.mcpServers || parsed.servers || (parsed.mcp && parsed.mcp.servers);
    if (!entries || typeof entries !== 'object') throw mcpInvalid('No "mcpServers" (or VS Code "servers") object in the configuration');
    const added = [];
    const warnings = [];
    for (const [name, e] of Object.entries(entries)) {
      if (!e.command && !e.url) {
        warnings.push(`“${name}” was skipped: it has neither a command nor a url`);
        continue;
      }
      const id = mcpUniqueId(mcpSlug(name));
      const c = { id, name, transport: e.url ? 'http' : 'stdio', command: e.command || '', args: e.args || [], cwd: e.cwd || null, url: e.url || '', env: Object.keys(e.env || {}), headers: Object.keys(e.headers || {}), enabled: true, trusted: false, timeout_secs: 60, builtin: false, read_tools: [], phase: 'idle', error: null, starts: 0, server_info: null, tools: [], log: '' };
      for (const [k, v] of Object.entries(e.env || {})) {
        if (/\$\{input:/.test(String(v))) warnings.push(`${id}: the value of ${k} is a VS Code prompt (${v}); enter it in the app`);
        else mcpVault[`${id}/env/${k}`] = String(v);
      }
      for (const [k, v] of Object.entries(e.headers || {})) mcpVault[`${id}/header/${k}`] = String(v);
      mcp.push(c);
      added.push(id);
    }
    if (added.length) mcpChanged();
    return { added, warnings };
  }
  // ---- the lark-mcp preset, as the core keeps it: opts.lark = { node: 'v20.18.0' | null (no
  // Node.js 20+), npm: false (Node.js without npm), installed: '0.5.1' | null, enabled }. Its
  // server joins the list once it is on and ready, as the core's does.
  const LARK_VERSION = '0.5.1';
  const LARK_DEFAULT = 'preset.default,docx.v1.document.create';
  const larkPresets = {
    'preset.default': ['im.v1.chat.create', 'im.v1.chat.list', 'im.v1.chatMembers.get', 'im.v1.message.create', 'im.v1.message.list', 'bitable.v1.app.create', 'bitable.v1.appTable.create', 'bitable.v1.appTable.list', 'bitable.v1.appTableField.list', 'bitable.v1.appTableRecord.search', 'bitable.v1.appTableRecord.create', 'bitable.v1.appTableRecord.update', 'docx.v1.document.rawContent', 'docx.builtin.import', 'docx.builtin.search', 'drive.v1.permissionMember.create', 'wiki.v2.space.getNode', 'wiki.v1.node.search', 'contact.v3.user.batchGetId'],
    'preset.light': ['im.v1.message.list', 'im.v1.message.create', 'im.v1.chat.search', 'contact.v3.user.batchGetId', 'docx.v1.document.rawContent', 'docx.builtin.import', 'docx.builtin.search', 'wiki.v2.space.getNode', 'bitable.v1.appTableRecord.search', 'bitable.v1.appTableRecord.batchCreate'],
  };
  const larkTools = new Set([...Object.values(larkPresets).flat(), 'docx.v1.document.create', 'sheets.v3.spreadsheet.create', 'calendar.v4.calendarEvent.create', 'task.v2.task.create']);
  const larkReads = new Set(['im.v1.chat.list', 'im.v1.chatMembers.get', 'im.v1.message.list', 'im.v1.chat.search', 'bitable.v1.appTable.list', 'bitable.v1.appTableField.list', 'bitable.v1.appTableRecord.search', 'docx.v1.document.rawContent', 'docx.builtin.search', 'wiki.v2.space.getNode', 'wiki.v1.node.search', 'contact.v3.user.batchGetId']);
  const lark = Object.assign({ node: 'v20.18.0', npm: true, installed: null, enabled: false, tools: null }, opts.lark || {});
  const larkSelection = () => lark.tools ?? LARK_DEFAULT;
  const larkExpand = (sel) => {
    const chosen = new Set();
    const unknown = [];
    for (const item of sel.split(/[, ]/).filter(Boolean)) {
      if (larkPresets[item]) larkPresets[item].forEach((t) => chosen.add(t));
      else if (larkTools.has(item)) chosen.add(item);
      else unknown.push(item);
    }
    return { chosen: [...chosen], unknown };
  };
  const snake = (t) => t.replace(/\./g, '_');
  const larkReady = () => !!lark.node && lark.npm && lark.installed === LARK_VERSION;
  const larkProblem = () => {
    if (!lark.node) return text('未找到 Node.js 20 或更新版本。飞书助手可以从 npm 仓库下载 Node.js 22 到它的数据文件夹。', 'No Node.js 20 or newer was found. Feishu Companion can fetch Node.js 22 from the npm registry into its data folder.');
    if (!lark.npm) return text(`Node.js ${lark.node} 旁没有 npm。飞书助手可以下载带 npm 的 Node.js 22。`, `Node.js ${lark.node} has no npm beside it. Feishu Companion can fetch Node.js 22 with npm.`);
    if (lark.installed !== LARK_VERSION) return text(`lark-mcp ${LARK_VERSION} 尚未安装。可以用 npm 安装到数据文件夹。`, `lark-mcp ${LARK_VERSION} is not installed yet. It can be installed into the data folder with npm.`);
    return null;
  };
  const larkNodePath = () => (!lark.node ? null : lark.fetched ? '/home/u/.local/share/feishu-companion/node/bin/node' : '/usr/bin/node');
  /** The preset's server in the list while it is on and ready (the core's all_configs), started. */
  async function larkSync() {
    const at = mcp.findIndex((x) => x.id === 'lark');
    if (!(lark.enabled && larkReady())) {
      if (at >= 0) {
        mcp.splice(at, 1);
        mcpChanged();
      }
      return;
    }
    const { chosen } = larkExpand(larkSelection());
    const reads = chosen.filter((t) => larkReads.has(t)).map(snake);
    let c = mcp[at];
    if (!c) {
      c = { id: 'lark', name: '飞书开放平台 · Feishu Open API (lark-mcp)', transport: 'stdio', command: larkNodePath(), args: ['/home/u/.local/share/feishu-companion/lark-mcp/node_modules/@larksuiteoapi/lark-mcp/dist/cli.js', 'mcp', '-a', settings.feishu.app_id, '-s', 'unused-in-user-token-mode', '--token-mode', 'user_access_token', '-t', larkSelection()], cwd: '/home/u/.local/share/feishu-companion/lark-mcp', url: '', env: [], headers: [], enabled: true, trusted: false, timeout_secs: 60, builtin: true, read_tools: [], phase: 'idle', error: null, starts: 0, server_info: null, tools: [], log: '' };
      mcp.splice(opts.mcpBuiltin === false ? 0 : 1, 0, c);
    }
    Object.assign(c, { phase: 'starting', read_tools: reads });
    mcpChanged();
    await sleep(opts.larkStartMs ?? 150);
    c.starts++;
    Object.assign(c, {
      phase: 'running',
      server_info: `lark-mcp ${LARK_VERSION}`,
      tools: chosen.map((t) => ({ name: snake(t), agent_name: `mcp__lark__${snake(t)}`, title: null, description: `Feishu Open API: ${t}`, read_only_hint: null, destructive_hint: null })),
    });
    c.log += `[lark-mcp] started with ${chosen.length} tools\n`;
    mcpChanged();
  }
  const larkView = () => {
    const { chosen } = larkExpand(larkSelection());
    const server = mcp.find((x) => x.id === 'lark');
    return {
      enabled: lark.enabled, tools: larkSelection(), default_tools: LARK_DEFAULT, node_path: larkNodePath(), node_version: lark.node, node_ready: !!lark.node && lark.npm,
      installed: lark.installed, version: LARK_VERSION, package_dir: '/home/u/.local/share/feishu-companion/lark-mcp', problem: larkProblem(),
      read_tools: chosen.filter((t) => larkReads.has(t)).map(snake), server: server ? mcpView(server) : null,
    };
  };
  const larkCommands = {
    lark_mcp: () => larkView(),
    set_lark_mcp: async ({ enabled, tools }) => {
      const chosen = tools == null ? null : tools.trim();
      if (chosen) {
        const { unknown } = larkExpand(chosen);
        // As the core words it: CompanionError::Other("zh / en"), read through "That did not work".
        const both = `lark-mcp 没有这些工具或预设：${unknown.join(', ')} / lark-mcp knows no tool or preset ${unknown.join(', ')}`;
        if (unknown.length) throw uiError('other', `That did not work: ${both}`, `操作没有完成：${both}`);
      }
      lark.enabled = enabled;
      if (chosen !== null) lark.tools = chosen || null;
      // A new selection restarts a running server with it.
      if (chosen !== null) {
        const at = mcp.findIndex((x) => x.id === 'lark');
        if (at >= 0) mcp.splice(at, 1);
      }
      await larkSync();
      return larkView();
    },
    // ~1 s of mcp_setup events: Node.js downloaded when none will do, then npm's fetches.
    install_lark_mcp: async () => {
      const step = opts.larkStepMs ?? 120;
      const setup = (stepName, done, total, zh, en) => ui({ type: 'mcp_setup', step: stepName, done, total, message: text(zh, en) });
      if (!lark.node || !lark.npm) {
        const name = 'node-v22.12.0-linux-x64.tar.gz';
        const total = 29_800_000;
        for (const done of [0, 9_000_000, 18_500_000, total]) {
          setup('node', done, total, `正在下载 ${name}`, `Downloading ${name}`);
          await sleep(step);
        }
        Object.assign(lark, { node: 'v22.12.0', npm: true, fetched: true });
      }
      for (const [i, pkg] of ['lark-mcp', 'axios', 'zod', '@modelcontextprotocol/sdk'].entries()) {
        setup('lark-mcp', i + 1, null, `正在获取 ${pkg}`, `Fetching ${pkg}`);
        await sleep(step);
      }
      if (opts.larkInstallFail) throw uiError('other', `That did not work: ${opts.larkInstallFail}`, `操作没有完成：${opts.larkInstallFail}`);
      lark.installed = LARK_VERSION;
      await larkSync();
      return larkView();
    },
  };
  if (lark.enabled && larkReady()) larkSync();

  const mcpCommands = {
    mcp_servers: () => mcp.map(mcpView),
    save_mcp_server: ({ input }) => {
      if (input.id === 'feishu') throw mcpInvalid('the built-in Feishu Docs server cannot be changed');
      const old = input.id ? mcpFind(input.id) : null;
      const id = old ? old.id : mcpUniqueId(mcpSlug(input.name));
      if (input.transport === 'stdio' && !input.command.trim()) throw mcpInvalid(`server "${id}" has no command`);
      if (input.transport === 'http' && !/^https?:\/\/\S+$/.test(input.url)) throw mcpInvalid(`server "${id}": "${input.url}" is not an http(s) URL`);
      if (opts.mcpRefuse && input.command === opts.mcpRefuse) throw mcpInvalid(`server "${id}": the program ${input.command} was not found`);
      const c = old || { id, builtin: false, read_tools: [], phase: 'idle', error: null, starts: 0, server_info: null, tools: [], log: '' };
      const kind = input.transport === 'stdio' ? 'env' : 'header';
      const rows = input.transport === 'stdio' ? input.env : input.headers;
      for (const key of Object.keys(mcpVault)) if (key.startsWith(`${id}/`) && !rows.some((r) => key === `${id}/${kind}/${r.name}`)) delete mcpVault[key];
      for (const r of rows) if (r.value !== null) mcpVault[`${id}/${kind}/${r.name}`] = r.value;
      Object.assign(c, { name: input.name, transport: input.transport, command: input.command, args: input.args, cwd: input.cwd, url: input.url, env: input.transport === 'stdio' ? input.env.map((r) => r.name) : [], headers: input.transport === 'http' ? input.headers.map((r) => r.name) : [], enabled: input.enabled, trusted: input.trusted, timeout_secs: input.timeout_secs });
      if (!old) mcp.push(c);
      mcpChanged();
      return mcpView(c);
    },
    remove_mcp_server: ({ id }) => {
      const c = mcpFind(id);
      if (c.builtin) throw mcpInvalid('the built-in Feishu Docs server cannot be removed');
      mcp.splice(mcp.indexOf(c), 1);
      for (const key of Object.keys(mcpVault)) if (key.startsWith(`${id}/`)) delete mcpVault[key];
      mcpChanged();
      return null;
    },
    import_mcp_servers: ({ config }) => mcpImport(config),
    import_mcp_file: ({ path }) => {
      if (!(path in mcpFiles)) throw mcpInvalid(`cannot read ${path}: not found`);
      return mcpImport(mcpFiles[path]);
    },
    mcp_import_sources: () =>
      opts.mcpSources ?? [
        { app: 'Claude Desktop', path: '/home/u/.config/Claude/claude_desktop_config.json', servers: 2 },
        { app: 'Cursor', path: '/home/u/.cursor/mcp.json', servers: 1 },
      ],
    restart_mcp_server: async ({ id }) => {
      const c = mcpFind(id);
      Object.assign(c, { phase: 'starting', error: null });
      mcpChanged();
      await sleep(opts.mcpStartMs ?? 300);
      c.starts++;
      if (c.command === 'fail') {
        Object.assign(c, { phase: 'failed', error: 'the server exited before it answered (exit status 1)', tools: [] });
        c.log += 'Error: Cannot find module \'@example/missing-server\'\n    at Module._resolveFilename (node:internal/modules/cjs/loader:1140:15)\n';
      } else {
        Object.assign(c, { phase: 'running', server_info: `${c.id}-server 1.2.0`, tools: c.builtin ? c.tools : mcpTools(c.id) });
        c.log += `[${c.id}] Secure MCP Filesystem Server running on stdio\n[${c.id}] Allowed directories: [ '/home/u/Documents' ]\n`;
      }
      mcpChanged();
      return mcpView(c);
    },
    mcp_server_log: ({ id }) => mcpFind(id).log,
    set_mcp_tool_read: ({ id, tool, read }) => {
      const c = mcpFind(id);
      if (c.builtin) throw mcpInvalid(`no MCP server ${id}`);
      c.read_tools = c.read_tools.filter((t) => t !== tool);
      if (read) c.read_tools.push(tool);
      mcpChanged();
      return mcpView(c);
    },
  };

  // ---- Connected agents (Settings → Connected agents): the user's other agents, served MCP by the
  // core. Tokens are obviously fake, and only the answer to add_connected_agent carries one (the
  // core keeps a hash). opts.agents seeds agents; opts.agentsProblem says the server is elsewhere
  // (opts.agentsUrl null: not running at all).
  const AGENTS_URL = opts.agentsUrl === undefined ? 'http://127.0.0.1:47821/mcp' : opts.agentsUrl;
  const agentChoices = [
    { name: 'list_calendar_events', title: text('查看日程', 'Read your calendar'), read: true, default_on: true },
    { name: 'search_docs', title: text('搜索文档', 'Search docs'), read: true, default_on: true },
    { name: 'send_message', title: text('发送消息', 'Send a message'), read: false, default_on: true },
    { name: 'create_calendar_event', title: text('创建日程', 'Create a calendar event'), read: false, default_on: true },
    { name: 'mcp__feishu__fetch-doc', title: text('MCP 工具 · feishu · fetch-doc', 'MCP tool · feishu · fetch-doc'), read: true, default_on: true },
    { name: 'mcp__github__create_issue', title: text('MCP 工具 · github · create_issue', 'MCP tool · github · create_issue'), read: false, default_on: false },
  ];
  const APPROVAL_TOOLS = ['approve', 'request_approval'];
  const agentsList = (opts.agents || []).map((a, i) => Object.assign({ id: 'ag' + (i + 1), name: 'Agent', paused: false, revoked: false, created_at: now() - (i + 1) * 24 * HOUR, tools: null }, a));
  let agentSeq = agentsList.length;
  /** Which agent asked for each call (the core keeps it as the call's agent name). */
  const callAgent = {};
  const agentView = (a) => {
    const tools = a.tools ?? agentChoices.filter((t) => t.default_on).map((t) => t.name);
    return { ...a, effective_tools: a.revoked ? [] : [...tools, ...APPROVAL_TOOLS] };
  };
  const agentsView = () => ({
    agents: [...agentsList.filter((a) => !a.revoked), ...agentsList.filter((a) => a.revoked)].map(agentView),
    url: AGENTS_URL,
    problem: opts.agentsProblem ?? null,
    relay_command: 'feishu-companion',
    tools: agentChoices,
  });
  const agentFind = (id) => {
    const a = agentsList.find((x) => x.id === id);
    if (!a) throw uiError('other', `That did not work: no connected agent has id ${id}`, `操作没有完成：no connected agent has id ${id}`);
    return a;
  };
  const agentSetups = (url, token) => [
    { client: 'claude-code', title: text('Claude Code（在终端运行）', 'Claude Code (run in a terminal)'), text: `claude mcp add --transport http feishu-companion ${url} --header "Authorization: Bearer ${token}"\n# 让 Claude Code 的权限请求在飞书助手中审批 / approve Claude Code's own permission prompts here:\nclaude --permission-prompt-tool mcp__feishu-companion__approve` },
    { client: 'codex', title: text('Codex（~/.codex/config.toml）', 'Codex (~/.codex/config.toml)'), text: `[mcp_servers.feishu-companion]\ncommand = "feishu-companion"\nargs = ["mcp"]\nenv = { FEISHU_COMPANION_TOKEN = "${token}" }` },
    { client: 'cursor', title: text('Cursor（~/.cursor/mcp.json）', 'Cursor (~/.cursor/mcp.json)'), text: JSON.stringify({ mcpServers: { 'feishu-companion': { url, headers: { Authorization: `Bearer ${token}` } } } }, null, 2) },
    { client: 'http', title: text('其他客户端（HTTP）', 'Any other client (HTTP)'), text: `URL: ${url}\nAuthorization: Bearer ${token}` },
  ];
  const agentCommands = {
    connected_agents: () => agentsView(),
    add_connected_agent: ({ name }) => {
      const n = String(name ?? '').trim();
      if (!n || [...n].length > 60) throw uiError('other', "That did not work: an agent's name must be 1 to 60 characters", "操作没有完成：an agent's name must be 1 to 60 characters");
      const a = { id: 'ag' + ++agentSeq, name: n, paused: false, revoked: false, created_at: now(), tools: null };
      agentsList.push(a);
      const token = `fct_FAKE-TOKEN-NOT-REAL-${agentSeq}-0000`;
      return { agent: agentView(a), token, setups: agentSetups(AGENTS_URL ?? 'http://127.0.0.1:47821/mcp', token) };
    },
    set_connected_agent_paused: ({ id, paused }) => {
      agentFind(id).paused = !!paused;
      return agentsView();
    },
    // As the core does: the token stops working, and what the agent still has waiting is abandoned.
    revoke_connected_agent: ({ id }) => {
      const a = agentFind(id);
      a.revoked = true;
      for (const c of Object.values(calls))
        if (c.pending && callAgent[c.call_id] === id)
          updateCall(c, { status: 'done', pending: false, verdict: 'cancelled', decided_by: 'engine', outcome: 'cancelled', reason_text: text('智能体已被撤销', 'The agent was revoked') });
      return agentsView();
    },
    set_connected_agent_tools: ({ input }) => {
      const unknown = (input.tools || []).find((t) => !agentChoices.some((c) => c.name === t));
      if (unknown) throw uiError('other', `That did not work: there is no tool named ${unknown}`, `操作没有完成：there is no tool named ${unknown}`);
      agentFind(input.id).tools = input.tools;
      return agentsView();
    },
  };
  /** A connected agent's permission request (Claude Code's `approve`), held for the user in a
   *  session of its own (not one of the user's conversations), as the core flattens it. */
  function agentRequest({ command = 'npm test -- --watch=false', project = '/home/u/code/web-app', ...over } = {}) {
    const agent = agentsList.find((a) => a.name === (over.requester ?? 'Claude Code') && !a.revoked);
    const sid = 'agent-s' + seq++;
    timelines[sid] = [];
    const c = call({
      session_id: sid,
      tool: 'approve',
      title: text('允许智能体的操作', "Allow an agent's action"),
      args: { tool_name: 'Bash', input: { command, description: 'Run the unit tests' }, command, project },
      requester: 'Claude Code',
      preview: {
        summary: text(`运行命令：${command.split('\n')[0]}`, `Run a command: ${command.split('\n')[0]}`),
        risk: /rm -r|sudo |git push/.test(command) ? 'high' : 'normal',
        fields: [
          { label: text('命令', 'Command'), value: command },
          { label: text('说明', 'Description'), value: 'Run the unit tests' },
          { label: text('项目', 'Project'), value: project },
        ],
        changes: [],
      },
      ...over,
    });
    if (agent) callAgent[c.call_id] = agent.id;
    updateCall(c, {});
    return c.call_id;
  }
  if (opts.agentRequest) agentRequest(typeof opts.agentRequest === 'object' ? opts.agentRequest : {});

  // ---- MCP servers' questions (elicitation), kept as the core keeps them until answered,
  // declined or dismissed. Tests ask with window.__fake.ask(question); answers land in __fake.answers.
  const questions = [];
  const answers = [];
  // The core words a refusal "中文 / English" (CompanionError::Other, as UiError "other").
  const questionRefusal = (m) => ({ code: 'other', message: m, zh: '操作没有完成：' + m, en: 'That did not work: ' + m });
  const questionCommands = {
    mcp_questions: () => [...questions].sort((a, b) => a.expires_at - b.expires_at),
    answer_mcp_question: ({ id, input }) => {
      const q = questions.find((x) => x.id === id);
      if (!q) throw questionRefusal('这个问题已经不在等待了 / this question no longer waits');
      if (!['accept', 'decline', 'cancel'].includes(input.action)) throw questionRefusal(`unknown answer "${input.action}"`);
      if (input.action === 'accept' && q.kind === 'form') {
        // The core's check: required fields present, each value of its type, an enum's value listed.
        const values = input.content || {};
        const props = (q.schema && q.schema.properties) || {};
        for (const name of (q.schema && q.schema.required) || []) if (!(name in values)) throw questionRefusal(`「${name}」必填 / ${name} is required`);
        for (const [name, v] of Object.entries(values)) {
          const p = props[name];
          if (!p) throw questionRefusal(`the server did not ask for ${name}`);
          const fits = { string: typeof v === 'string', number: typeof v === 'number', integer: Number.isInteger(v), boolean: typeof v === 'boolean' }[p.type || 'string'] ?? true;
          if (!fits || (p.enum && !p.enum.includes(v))) throw questionRefusal(`「${name}」的值不合要求 / ${name}: ${JSON.stringify(v)} is not what the server asks for`);
        }
      }
      questions.splice(questions.indexOf(q), 1);
      answers.push({ id, action: input.action, content: input.action === 'accept' && q.kind === 'form' ? input.content || {} : null });
      ui({ type: 'mcp_questions' });
      return null;
    },
  };

  const commands = {
    ...mcpCommands,
    ...agentCommands,
    ...larkCommands,
    ...questionCommands,
    startup_error: () => opts.startupError || null,
    ui_ready: () => 321,
    app_info: () => ({ version: '0.1.0', demo: opts.demo, model: opts.demo ? 'Demo · scripted' : 'DeepSeek · deepseek-chat', brand: 'feishu', key_source: 'keychain', key_notice: null, data_dir: '/home/u/.local/share/feishu-companion', redirect_url: 'http://127.0.0.1:53682/callback', person: opts.person || (account ? { name: account.name, open_id: account.open_id } : null) }),
    list_sessions: () => sessions.map((s) => ({ ...s, pending: Object.values(calls).filter((c) => c.pending && c.session_id === s.id).length })),
    create_session: () => addSession('', 0),
    timeline: ({ sessionId }) => ({ session_id: sessionId, items: JSON.parse(JSON.stringify(timelines[sessionId] || [])), calls: Object.values(calls).filter((c) => c.session_id === sessionId), running: !!running[sessionId] }),
    send_message: sendMessage,
    cancel_turn: () => true,
    decide: ({ callId, decision }) => {
      const c = calls[callId];
      if (!c || !c.pending) throw notPending();
      return finish(c, decision);
    },
    decide_many: async ({ decisions }) => {
      const out = [];
      for (const d of decisions) {
        const c = calls[d.call_id];
        if (!c || !c.pending) continue;
        updateCall(c, { status: 'done', pending: false, verdict: d.decision.kind === 'reject' ? 'rejected' : 'approved', decided_by: 'user', outcome: d.decision.kind === 'reject' ? 'cancelled' : 'completed' });
        out.push({ invocation_id: c.invocation_id, status: 'completed' });
      }
      return out;
    },
    settle: ({ callId }) => ({ invocation_id: calls[callId].invocation_id, status: 'completed' }),
    pending: pendingList,
    rules: () => rules,
    revoke_rule: ({ ruleId }) => {
      const r = rules.find((x) => x.id === ruleId);
      r.revoked_at = now();
      return r;
    },
    audit: ({ query }) => audit.filter((a) => (!query.kind_prefix || a.kind.startsWith(query.kind_prefix)) && (!query.since || a.at >= query.since) && (!query.tool || a.tool === query.tool)),
    export_audit: ({ format }) => '/home/u/Downloads/feishu-companion-audit.' + format,
    reveal_path: () => null,
    account: () => account,
    sign_out: () => ((account = null), null),
    sign_in: ({ scopes, embedded }) => {
      // A remote MCP server's own sign-in (`mcp:<id>`) is its page, never Feishu's QR code.
      if (byDevice() && !scopes.some((x) => x.startsWith('mcp:'))) {
        const device = deviceCode();
        signIn = { url: device.url, scopes, embedded, device };
        setTimeout(() => ui({ type: 'sign_in', status: { state: 'waiting', url: device.url, device } }), 5);
        return { url: device.url, redirect_uri: '', device };
      }
      const url = 'https://accounts.feishu.cn/open-apis/authen/v1/authorize?client_id=cli_demo&state=st' + seq++ + '&scope=' + encodeURIComponent(scopes.join(' '));
      signIn = { url, scopes, embedded };
      setTimeout(() => ui({ type: 'sign_in', status: { state: 'waiting', url, device: null } }), 5);
      return { url, redirect_uri: 'http://127.0.0.1:53682/callback', device: null };
    },
    open_sign_in_window: () => {
      if (!signIn || !signIn.device) throw uiError('no_sign_in', 'No sign-in by QR code is waiting.', '没有等待扫码的登录。');
      return null;
    },
    // "Connect my Feishu": the registration waits for a scan; tests drive it on (window.__fake.connect*).
    connect_feishu: () => {
      if (opts.connectError) throw opts.connectError;
      const url = 'https://open.feishu.cn/page/launcher?from=companion&user_code=' + userCode();
      connect = { state: 'waiting', url, user_code: userCode(), qr: fakeQr(url + seq++), expires_at: now() + (opts.connectExpiresMs ?? 600e3) };
      return connect;
    },
    open_connect_page: () => {
      if (!connect || connect.state !== 'waiting') throw uiError('no_connect', 'No connection is waiting.', '没有等待中的连接。');
      return null;
    },
    cancel_connect: () => {
      if (connect && connect.state === 'waiting') {
        connect = { state: 'failed', reason: 'cancelled', message: text('已取消连接。', 'Connecting was cancelled.') };
        setTimeout(() => ui({ type: 'connect', status: connect }), 5);
      }
      return null;
    },
    // The Feishu app lacks a permission (99991672): its apply page, and running the call again.
    open_scope_apply: ({ callId }) => {
      const c = calls[callId];
      if (!c || !c.scope_apply_url) throw notPending();
      return null;
    },
    retry_auth_call: async ({ callId }) => {
      const c = calls[callId];
      if (!c || !c.pending) throw notPending();
      if (!granted.has(callId)) {
        updateCall(c, {});
        return { invocation_id: c.invocation_id, status: 'suspended' };
      }
      updateCall(c, { status: 'dispatching', pending: false, scope_apply_url: null });
      turn(c.session_id, c.invocation_id, 'running');
      await sleep(20);
      updateCall(c, { status: 'done', outcome: 'completed' });
      turn(c.session_id, c.invocation_id, 'completed');
      return { invocation_id: c.invocation_id, status: 'completed' };
    },
    open_sign_in_in_browser: () => null,
    // The shell opens http(s) links in the system browser and refuses anything else.
    open_link: ({ url }) => {
      if (!/^https?:\/\//i.test(String(url))) throw 'only http and https links open';
      return null;
    },
    cancel_sign_in: () => ((signIn = null), null),
    decline_sign_in: ({ callId }) => {
      const c = calls[callId];
      updateCall(c, { status: 'done', pending: false, outcome: 'needs_user_auth' });
      return { invocation_id: c.invocation_id, status: 'completed' };
    },
    settings: () => ({ settings: JSON.parse(JSON.stringify(settings)), redirect_url: `http://127.0.0.1:${settings.feishu.redirect_port}/callback`, presets: presets(), app_secret_set: secretSet, system_time_zone: 'Asia/Shanghai', app_scopes: [{ scope: 'calendar:calendar.event:read', label: text('查看日程详情', 'See your calendar events') }, { scope: 'task:task:read', label: text('查看你的待办', 'See your tasks') }] }),
    save_settings: ({ settings: s }) => {
      if (s.feishu.redirect_port < 1024)
        throw uiError('settings', `There is a problem with the settings: feishu.redirect_port is ${s.feishu.redirect_port}, but it must be between 1024 and 65535`, `设置有问题：feishu.redirect_port is ${s.feishu.redirect_port}, but it must be between 1024 and 65535`);
      settings = JSON.parse(JSON.stringify(s));
      return {};
    },
    // Settings → Approve from Feishu (issue 18): connected once on and signed in, one card out.
    remote_approval_status: () =>
      settings.remote_approval.enabled
        ? { state: account ? 'connected' : 'not_signed_in', error: null, queued: 0, open_cards: account ? 1 : 0, sending: settings.remote_approval.when === 'always', waiting_in_feishu: inFeishu }
        : { state: 'off', error: null, queued: 0, open_cards: 0, sending: false, waiting_in_feishu: inFeishu },
    // Settings → Assistant (issue 16): the built-in instruction, two tools, no Python files yet.
    assistant: () => ({
      instruction: 'You are Feishu Companion.',
      default_instruction: 'You are Feishu Companion.',
      builtin_tools: [
        { name: 'list_calendar_events', title: text('查看日程', 'See calendar events'), writes: false, enabled: true },
        { name: 'send_message', title: text('发送消息', 'Send a message'), writes: true, enabled: true },
      ],
      // opts.python: { preparingMs, failed } — one Python file while the sandbox is prepared at
      // the first start, ready after preparingMs (or failed). Without Python files the sandbox is
      // not started.
      sandbox: !opts.python
        ? { state: 'idle' }
        : opts.python.failed
          ? { state: 'failed', message: 'wasm component is damaged' }
          : performance.now() < opts.python.preparingMs
            ? { state: 'preparing', elapsed_ms: Math.round(performance.now()) }
            : { state: 'ready', compiled_ms: opts.python.preparingMs },
      folder: '/home/u/.config/feishu-companion/python',
      files: opts.python
        ? [{ name: 'notes.py', status: 'waiting', tools: [], callbacks: [], settings: { allowed_hosts: [], feishu_api: false }, error: null, error_line: null, reports: [] }]
        : [],
    }),
    update_status: () => update,
    check_for_update: () => update,
    install_update: async () => {
      if (update.state !== 'available') return (update = { state: 'failed', message: 'no update to install' });
      const version = update.update.version;
      for (const received of [0, 4e6, 8e6]) {
        emit('companion://update', { state: 'installing', version, received, total: 8e6 });
        await sleep(20);
      }
      update = { state: 'installed', version };
      emit('companion://update', update);
      return update;
    },
    restart_to_update: () => null,
    set_app_secret: () => ((secretSet = true), null),
    set_model_key: ({ preset }) => ((keys[preset] = true), null),
    check_edit: ({ callId, args }) => {
      const c = calls[callId];
      if (!c || !c.pending) throw notPending();
      if (c.tool === 'send_message' && typeof args.chat_id !== 'string')
        return { error: text('修改后的参数不符合这个操作的要求：缺少 chat_id', 'The edited arguments do not fit this action: chat_id is missing'), raw_error: '"chat_id" is a required property', preview: null };
      const fields = Object.entries(args).map(([k, v]) => ({ label: text(k, k), value: Array.isArray(v) ? v.join('、') : String(v) }));
      return { error: null, raw_error: null, preview: { summary: c.preview ? c.preview.summary : text('操作', 'Action'), risk: 'normal', fields, changes: [] } };
    },
    set_autonomy: ({ mode }) => (mode === 'allow_touched' ? { mode, until: now() + 30 * 60e3 } : { mode, until: null }),
    list_models: ({ preset }) => {
      const p = presets().find((x) => x.id === preset);
      if (!p) throw 'unknown model preset';
      if (p.takes_key && !keys[preset]) throw 'Enter and save the API key first. 请先填写并保存 API 密钥。';
      const chosen = settings.model.preset === preset && settings.model.model ? settings.model.model : p.default_model;
      const models = [...new Set([p.default_model, chosen, p.default_model + '-pro', 'another-model'])].filter(Boolean).sort();
      return { preset, models, selected: chosen, default_model: p.default_model };
    },
    data_status: () => JSON.parse(JSON.stringify(data)),
    forget_secrets: ({ confirmed }) => {
      if (confirmed !== true) throw 'This needs the user\'s confirmation first.';
      const deleted = (secretSet ? 1 : 0) + Object.values(keys).filter(Boolean).length + (data.secrets_locked ? data.unreadable.length : 0);
      secretSet = false;
      for (const k of Object.keys(keys)) keys[k] = false;
      account = null;
      data.secrets_locked = null;
      data.unreadable = [];
      return { deleted, restart_needed: true };
    },
    reset_app: ({ confirmed }) => {
      if (confirmed !== true) throw 'This needs the user\'s confirmation first.';
      resetRequested = true;
      return null;
    },
    'plugin:event|listen': ({ event, handler }) => {
      const eventId = evSeq++;
      if (!listeners.has(event)) listeners.set(event, []);
      listeners.get(event).push({ eventId, handlerId: handler });
      return eventId;
    },
    'plugin:event|unlisten': ({ event, eventId }) => {
      listeners.set(event, (listeners.get(event) || []).filter((l) => l.eventId !== eventId));
      return null;
    },
  };

  window.__TAURI_INTERNALS__ = {
    invoke(cmd, args, _options) {
      log.push({ cmd, args: args === undefined ? {} : JSON.parse(JSON.stringify(args)) });
      const f = commands[cmd];
      if (!f) return Promise.reject('unknown command ' + cmd);
      return new Promise((resolve, reject) => {
        setTimeout(() => {
          Promise.resolve()
            .then(() => f(args || {}))
            // Results cross IPC as JSON: never hand the app the fake's own objects.
            .then((r) => resolve(r === undefined ? null : JSON.parse(JSON.stringify(r))), reject);
        }, opts.latency || 0);
      });
    },
    transformCallback(cb, once) {
      const id = cbSeq++;
      callbacks.set(id, (payload) => {
        if (once) callbacks.delete(id);
        return cb && cb(payload);
      });
      return id;
    },
    unregisterCallback(id) {
      callbacks.delete(id);
    },
    convertFileSrc(path, protocol = 'asset') {
      return `${protocol}://localhost/${encodeURIComponent(path)}`;
    },
    metadata: { currentWindow: { label: 'main' }, currentWebview: { windowLabel: 'main', label: 'main' } },
  };
  window.__TAURI_EVENT_PLUGIN_INTERNALS__ = { unregisterListener() {} };

  window.__fake = {
    log,
    calls,
    sessions,
    timelines,
    opts,
    emit: ui,
    emitOpen: (p) => emit('companion://open', p),
    commandsCalled: (name) => log.filter((l) => l.cmd === name),
    resetRequested: () => resetRequested,
    /** The agent of `session_id` proposes a call that waits for the user (as the backend would emit it). */
    propose(over = {}) {
      const c = call(Object.assign({ session_id: 's1' }, over));
      const sid = c.session_id;
      const s = sessions.find((x) => x.id === sid);
      if (s) s.updated_at = now();
      pushItems(sid, c.invocation_id, [{ kind: 'tool', call_id: c.call_id, at: now(), tool: c.tool, title: c.title, args: c.args, result: null }]);
      updateCall(c, {});
      return c.call_id;
    },
    /** A connected agent asks for something (default: Claude Code runs `npm test`); see agentRequest. */
    agentRequest,
    /** The connected agents as the core holds them (never a token). */
    agents: agentsList,
    /** MCP: the servers as the core holds them (values never: only whether each is stored). */
    mcp,
    mcpVault: () => Object.keys(mcpVault),
    /** Something happens to a server on its own (a crash, a restart): the core's mcp_servers event. */
    mcpSet(id, patch) {
      Object.assign(mcp.find((x) => x.id === id), patch);
      ui({ type: 'mcp_servers' });
    },
    /** The user finished signing in to remote MCP server `id` on its page: the core says so
     *  (sign_in), the server lists its tools, and the servers changed (mcp_servers). */
    async mcpSignedIn(id) {
      signIn = null;
      ui({ type: 'sign_in', status: { state: 'signed_in', name: id, scopes: [{ scope: 'mcp:' + id, label: text('登录 MCP 服务器 ' + id, 'Sign in to the MCP server ' + id) }], switched_from: null } });
      await sleep(20);
      Object.assign(mcp.find((x) => x.id === id), { needs_sign_in: false, phase: 'running', server_info: `${id}-server 1.2.0`, tools: mcpTools(id) });
      ui({ type: 'mcp_servers' });
    },
    /** The lark-mcp preset as the core holds it. */
    lark: () => JSON.parse(JSON.stringify(lark)),
    /** An MCP server asks the user something (the core's mcp_questions event): a form (`schema`,
     *  its defaults taken as the core takes them) or a page (`kind: 'url'`, `url`). The core
     *  dismisses it at `expires_at`; `{ sweep: false }` leaves it, so the UI must drop it itself. */
    ask(q = {}, { sweep = true } = {}) {
      const schema = q.schema ?? null;
      const defaults = {};
      for (const [k, p] of Object.entries((schema && schema.properties) || {})) if (p && 'default' in p) defaults[k] = p.default;
      const view = Object.assign({ id: 'q' + seq++, server_id: 'everything', kind: 'form', message: '', schema, defaults, url: null, expires_at: now() + 10 * 60e3 }, q);
      questions.push(view);
      ui({ type: 'mcp_questions' });
      if (sweep)
        setTimeout(() => {
          if (questions.includes(view)) questions.splice(questions.indexOf(view), 1), ui({ type: 'mcp_questions' });
        }, view.expires_at - now());
      return view.id;
    },
    questions,
    answers,
    /** A running MCP call reports progress (the core's mcp_progress event). */
    mcpProgress(callId, progress, total = null, message = null) {
      ui({ type: 'mcp_progress', call_id: callId, progress, total, message });
    },
    /** Approve from Feishu sent the call's card to Feishu (the core's remote_cards event). */
    sendToFeishu(callId) {
      setInFeishu([...inFeishu.filter((id) => id !== callId), callId]);
    },
    /** A pending call is decided somewhere else (another window, the notification, a rule). */
    resolve(callId, verdict = 'approved') {
      const c = calls[callId];
      updateCall(c, { status: 'done', pending: false, verdict, decided_by: 'user', outcome: verdict === 'rejected' ? 'cancelled' : 'completed' });
    },
    /** "Connect my Feishu": the user confirmed in Feishu; the core switches to the new app and,
     *  with a model set up, starts the first sign-in by scanning (step 2). */
    connectDone({ needsModel = false, appId = 'cli_a7f3c2e1d0b9', brand = 'feishu' } = {}) {
      connect = { state: 'connected', app_id: appId, brand, needs_model: needsModel };
      settings.feishu = { ...settings.feishu, app_id: appId, brand, created_by_app: true };
      secretSet = true;
      opts.demo = needsModel;
      ui({ type: 'connect', status: connect });
      if (!needsModel) {
        setTimeout(() => {
          const device = deviceCode();
          signIn = { url: device.url, scopes: [], embedded: true, device };
          ui({ type: 'sign_in', status: { state: 'waiting', url: device.url, device } });
        }, opts.step2Delay ?? 30);
      }
    },
    /** The registration failed (expired, denied, offline, other), as the core says it. */
    connectFail(reason, message) {
      connect = { state: 'failed', reason, message: message || text('飞书返回了错误：' + reason, 'Feishu answered with an error: ' + reason) };
      ui({ type: 'connect', status: connect });
    },
    /** The QR code of the waiting device sign-in ran out. */
    expireSignIn() {
      signIn = null;
      ui({ type: 'sign_in', status: { state: 'expired' } });
    },
    /** An administrator approved the app's permission: a retry of the call now goes through. */
    grantScope(callId) {
      granted.add(callId);
    },
    /** The user finished signing in on Feishu's page: the held call resumes. */
    async completeSignIn() {
      account = { name: '张三', open_id: 'ou_fake_1', scopes: [{ scope: 'task:task:read', label: text('查看你的待办', 'See your tasks') }], expires_at: now() + 2 * HOUR, refresh_expires_at: null };
      ui({ type: 'sign_in', status: { state: 'signed_in', name: '张三', scopes: account.scopes, switched_from: null } });
      await sleep(50);
      const c = Object.values(calls).find((x) => x.status === 'awaiting_auth');
      if (!c) return;
      updateCall(c, { status: 'dispatching', pending: false });
      turn(c.session_id, c.invocation_id, 'running');
      await sleep(20);
      updateCall(c, { status: 'done', outcome: 'completed' });
      pushItems(c.session_id, c.invocation_id, [
        { kind: 'tool', call_id: c.call_id, at: now(), tool: c.tool, title: c.title, args: {}, result: { is_error: false, text: '[{"summary":"提交周报"}]' } },
        { kind: 'assistant', id: 'e' + seq++, at: now(), author: 'companion', text: '你有 1 个未完成的待办：**提交周报**。' },
      ]);
      turn(c.session_id, c.invocation_id, 'completed');
    },
  };
})();

// Strings of the real-tenant work: sign-in failures, the browser handoff, settings that apply at
// once, and the connection check. Spread into the main catalogue in ../i18n.ts.

export const en = {
  auth_in_browser:
    'Your organisation signs in on its own page, which opened in your browser. Finish signing in there; this continues by itself.',
  auth_refused_copy: 'Copy',
  auth_refused_copied: 'Copied',
  auth_refused_console: 'Open the developer console',
  auth_retry: 'Sign in again',
  settings_applied: 'Saved and applied.',
  check_title: 'Check connection',
  check_hint: 'Tries the App ID and App Secret, the redirect port and the model, as saved.',
  check_run: 'Check connection',
  check_running: 'Checking…',
  check_ok: 'Works',
  check_bad: 'Needs attention',
} as const;

export const zh: Record<keyof typeof en, string> = {
  auth_in_browser: '你的企业使用自己的登录页面，已在浏览器中打开。请在浏览器中完成登录，完成后这里会自动继续。',
  auth_refused_copy: '复制',
  auth_refused_copied: '已复制',
  auth_refused_console: '打开开发者后台',
  auth_retry: '重新登录',
  settings_applied: '已保存并生效。',
  check_title: '检查连接',
  check_hint: '按已保存的设置，检查 App ID 与 App Secret、重定向端口和模型。',
  check_run: '检查连接',
  check_running: '正在检查…',
  check_ok: '正常',
  check_bad: '需要处理',
};

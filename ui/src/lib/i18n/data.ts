// Settings → Data: unreadable secrets, the database check, forgetting every secret, resetting.

export const en = {
  sec_data: 'Data',
  data_locked_title: 'Your saved secrets cannot be read',
  data_locked_body:
    'The key that protects them is missing or damaged, so the sign-in, the App Secret and model keys cannot be used. The app runs in demo mode until you forget them and enter them again.',
  data_unreadable_title: 'Some saved secrets cannot be read',
  data_unreadable_body: 'Enter them again above, or forget all secrets below.',
  data_sign_in_problem: 'The saved Feishu sign-in cannot be read; you are signed out. Signing in again replaces it.',
  data_db_checking: 'Checking the database…',
  data_db_ok: 'The database is sound.',
  data_db_damaged: 'The database is damaged',
  data_db_failed: 'The database could not be checked',
  data_forget: 'Sign out and forget all secrets',
  data_forget_confirm_title: 'Forget all secrets?',
  data_forget_confirm_body:
    'This deletes your Feishu sign-in, the App Secret and every model API key. Conversations, pending approvals, rules and the audit trail are kept.',
  data_forget_do: 'Forget all secrets',
  data_forgotten: '{n} secrets forgotten.',
  data_forgotten_restart: '{n} secrets forgotten. Restart the app to continue in demo mode, or enter them again.',
  data_reset: 'Reset the app…',
  data_reset_confirm_title: 'Reset the app? This deletes:',
  data_reset_confirm_foot: 'Nothing else in these folders is touched. The app restarts with nothing set up.',
  data_reset_do: 'Delete all of this and restart',
  data_uninstall_note: 'Uninstalling the app never deletes these files; reset the app first if you want them gone.',
  startup_reset_body:
    'Resetting deletes the app\'s database (conversations, approvals, rules, the audit trail and the encrypted secrets), its settings file and its key file in the folders named above, then restarts the app with nothing set up. Nothing else in those folders is touched.',
};

export const zh: Record<keyof typeof en, string> = {
  sec_data: '数据',
  data_locked_title: '已保存的密钥无法读取',
  data_locked_body:
    '保护它们的主密钥丢失或损坏，登录信息、App Secret 和模型密钥都无法使用。在你清除并重新填写之前，应用以演示模式运行。',
  data_unreadable_title: '部分已保存的密钥无法读取',
  data_unreadable_body: '请在上方重新填写，或在下方清除全部密钥。',
  data_sign_in_problem: '已保存的飞书登录信息无法读取，你已处于退出状态。重新登录即可替换。',
  data_db_checking: '正在检查数据库…',
  data_db_ok: '数据库完好。',
  data_db_damaged: '数据库已损坏',
  data_db_failed: '无法检查数据库',
  data_forget: '退出登录并清除全部密钥',
  data_forget_confirm_title: '清除全部密钥？',
  data_forget_confirm_body: '这会删除你的飞书登录信息、App Secret 和所有模型 API 密钥。对话、待审批事项、规则和审计记录都会保留。',
  data_forget_do: '清除全部密钥',
  data_forgotten: '已清除 {n} 项密钥。',
  data_forgotten_restart: '已清除 {n} 项密钥。重启应用后以演示模式继续，或重新填写。',
  data_reset: '重置应用…',
  data_reset_confirm_title: '重置应用？将删除：',
  data_reset_confirm_foot: '这些文件夹中的其他文件不会被动。应用将重启，回到未设置的状态。',
  data_reset_do: '全部删除并重启',
  data_uninstall_note: '卸载应用不会删除这些文件；如需删除，请先重置应用。',
  startup_reset_body:
    '重置将删除上面所示文件夹中应用的数据库（对话、审批、规则、审计记录和加密保存的密钥）、设置文件和密钥文件，然后重启应用，回到未设置的状态。这些文件夹中的其他文件不会被动。',
};

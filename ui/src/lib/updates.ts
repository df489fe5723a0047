// Updates of the app itself: the shell's update commands and its `companion://update` event.
import { invoke } from '@tauri-apps/api/core';
import { listen, type UnlistenFn } from '@tauri-apps/api/event';
import type { UpdateStatusView } from './bindings/UpdateStatusView';

export const updatesApi = {
  status: () => invoke<UpdateStatusView>('update_status'),
  check: () => invoke<UpdateStatusView>('check_for_update'),
  /** Downloads, verifies and installs the update the last check found. */
  install: () => invoke<UpdateStatusView>('install_update'),
  restart: () => invoke<null>('restart_to_update'),
  onStatus: (handler: (s: UpdateStatusView) => void): Promise<UnlistenFn> =>
    listen<UpdateStatusView>('companion://update', (e) => handler(e.payload)),
};

/** "45%" of a download, or "" when its size is unknown. */
export function percent(received: number, total: number | null): string {
  if (!total || total <= 0) return '';
  return `${Math.min(100, Math.floor((received / total) * 100))}%`;
}

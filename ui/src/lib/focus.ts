// Keeping the keyboard inside a modal dialog: Tab from the last control goes to the first, and
// Shift+Tab from the first to the last.

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex="-1"])';

/** The controls in `root` the keyboard can reach, in order. */
export function focusables(root: HTMLElement): HTMLElement[] {
  return [...root.querySelectorAll<HTMLElement>(FOCUSABLE)].filter((el) => !el.hidden && el.getClientRects().length > 0);
}

/**
 * Where Tab should go from `index` among `count` controls (`-1`: focus is outside them), or
 * `null` when the browser's own order stays inside.
 */
export function wrapIndex(index: number, count: number, back: boolean): number | null {
  if (count === 0) return null;
  if (index < 0) return back ? count - 1 : 0;
  if (back && index === 0) return count - 1;
  if (!back && index === count - 1) return 0;
  return null;
}

/** A Svelte action: Tab and Shift+Tab cycle inside the node; the node gets focus first, and the focus goes back when it leaves. */
export function trapFocus(node: HTMLElement) {
  const before = document.activeElement as HTMLElement | null;
  const onKey = (e: KeyboardEvent) => {
    if (e.key !== 'Tab') return;
    const list = focusables(node);
    const next = wrapIndex(list.indexOf(document.activeElement as HTMLElement), list.length, e.shiftKey);
    if (next === null) return;
    e.preventDefault();
    list[next].focus();
  };
  node.addEventListener('keydown', onKey);
  queueMicrotask(() => {
    if (!node.contains(document.activeElement)) (focusables(node)[0] ?? node).focus();
  });
  return {
    destroy() {
      node.removeEventListener('keydown', onKey);
      if (before && document.contains(before)) before.focus();
    },
  };
}

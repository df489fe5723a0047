// Assistant Markdown → sanitised HTML. Nothing rendered can run script, load a frame or navigate
// the app: scripts, event handlers and javascript: URLs go, and links lose their target.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';

const marked = new Marked({ gfm: true, breaks: true, async: false });

let hooked = false;
function hook() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A') {
      node.removeAttribute('target');
      const href = node.getAttribute('href') ?? '';
      if (!/^(https?:|mailto:)/i.test(href.trim())) node.removeAttribute('href');
      node.setAttribute('rel', 'noopener noreferrer');
    }
    if (node.tagName === 'IMG') {
      // Remote images would leak and break the CSP; keep only inline data images.
      const src = node.getAttribute('src') ?? '';
      if (!/^data:image\//i.test(src)) node.removeAttribute('src');
    }
  });
}

export function renderMarkdown(text: string): string {
  hook();
  const html = marked.parse(text ?? '') as string;
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'script', 'iframe', 'object', 'embed', 'form', 'input', 'button', 'textarea', 'select', 'link', 'meta', 'base'],
    FORBID_ATTR: ['style', 'target', 'formaction', 'srcset'],
    ALLOW_DATA_ATTR: false,
  });
}

/** The address a clicked link may open in the system browser: only http(s), else null. */
export function externalUrl(href: string | null | undefined): string | null {
  const h = (href ?? '').trim();
  if (!/^https?:\/\//i.test(h)) return null;
  try {
    const u = new URL(h);
    return u.protocol === 'http:' || u.protocol === 'https:' ? h : null;
  } catch {
    return null;
  }
}

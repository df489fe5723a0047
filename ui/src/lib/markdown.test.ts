import { describe, expect, it } from 'vitest';
import { externalUrl, renderMarkdown } from './markdown';

describe('markdown sanitiser', () => {
  it('renders Markdown', () => {
    expect(renderMarkdown('**hi** _there_')).toContain('<strong>hi</strong>');
  });
  it('removes script tags', () => {
    const html = renderMarkdown('a <script>alert(1)</script> b');
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toContain('alert(1)');
  });
  it('removes event handler attributes', () => {
    const html = renderMarkdown('<img src="x" onerror="alert(1)"> <div onclick="x()">t</div>');
    expect(html).not.toMatch(/onerror|onclick/i);
  });
  it('removes javascript: links and targets', () => {
    const html = renderMarkdown('[x](javascript:alert(1)) <a href="JaVaScRiPt:alert(2)">y</a> <a href="https://a.b" target="_blank">z</a>');
    expect(html).not.toMatch(/javascript:/i);
    expect(html).not.toMatch(/target=/);
    expect(html).toContain('href="https://a.b"');
  });
  it('removes iframes, forms and styles', () => {
    const html = renderMarkdown('<iframe src="https://e"></iframe><form><input></form><p style="color:red">p</p>');
    expect(html).not.toMatch(/<iframe|<form|<input|style=/i);
  });
  it('keeps data: and mailto: hrefs away from the browser opener', () => {
    const html = renderMarkdown('[d](data:text/html;base64,PHNjcmlwdD4=) [m](mailto:a@b.c)');
    expect(html).not.toMatch(/href="data:/i);
  });
});

describe('links that open in the browser', () => {
  it('are http and https only, as written', () => {
    expect(externalUrl('https://open.feishu.cn')).toBe('https://open.feishu.cn');
    expect(externalUrl(' HTTP://example.com/a?b=1 ')).toBe('HTTP://example.com/a?b=1');
  });
  it('are never script, data, mail, file or relative links', () => {
    for (const h of ['javascript:alert(1)', ' JaVaScRiPt:alert(1)', 'data:text/html,x', 'mailto:a@b.c', 'file:///etc/passwd', '/local', '#top', 'https//x', 'http://', '', null, undefined]) {
      expect(externalUrl(h), String(h)).toBeNull();
    }
  });
});

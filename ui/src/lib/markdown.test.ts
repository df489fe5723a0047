import { describe, expect, it } from 'vitest';
import { renderMarkdown } from './markdown';

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
});

// Model text as markdown, sanitized twice over: markdown-it with raw HTML off (a `<script>` or
// `<img onerror>` in the text comes out as text), then DOMPurify on what it produced. The page's
// Content-Security-Policy (no inline script, no remote images) is the third wall.
import DOMPurify from 'dompurify';
import MarkdownIt from 'markdown-it';

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

// Links open outside the webview (the host decides); they never navigate the chat itself.
const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx].attrSet('title', tokens[idx].attrGet('href') ?? '');
  return defaultLinkOpen(tokens, idx, options, env, self);
};

export function renderMarkdown(text: string): string {
  return DOMPurify.sanitize(md.render(text), {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'img', 'form', 'input', 'button', 'textarea', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style'],
  });
}

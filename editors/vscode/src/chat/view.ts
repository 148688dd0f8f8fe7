// The chat view: a webview view in its own activity-bar container. The page (webview/main.ts,
// bundled to dist/webview.js) renders what the host posts; the host answers what the page asks.
// The page runs under a strict Content-Security-Policy: its one script by nonce, styles and
// images from the extension only, nothing inline, nothing remote.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { parseViewMessage, type HostToView, type ViewToHost } from './messages';

export interface ChatHost {
  /** Everything the page shows, for a page that (re)loads. */
  chatState(): Extract<HostToView, { type: 'state' }>;
  onChatMessage(m: ViewToHost): Promise<void>;
}

/** The page's Content-Security-Policy: nothing runs or loads but the extension's own script and styles. */
export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src ${cspSource}`,
    `img-src ${cspSource}`,
    `font-src ${cspSource}`,
    "connect-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
    "frame-src 'none'",
  ].join('; ');
}

export function chatHtml(opts: { cspSource: string; nonce: string; scriptUri: string; styleUri: string }): string {
  const attr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${attr(contentSecurityPolicy(opts.cspSource, opts.nonce))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${attr(opts.styleUri)}">
<title>dsh chat</title>
</head>
<body class="no-session">
<header>
  <div class="row">
    <button id="session-title" type="button">No session</button>
    <button id="new-session" class="icon-button" type="button" title="Start a new session">+ New</button>
    <button id="export" class="icon-button" type="button" title="Open the conversation as a markdown document">Export</button>
    <button id="plans" class="icon-button" type="button" title="Every plan of this session: reopen one with its changes and the comments it got">Plans</button>
  </div>
  <div class="row"><span id="goal-status" class="goal"></span><button id="raise" class="link" type="button" hidden></button><span id="plan-status" class="plan"></span><span id="busy" hidden>working…</span><span id="others" hidden></span></div>
  <div id="timeline" hidden>
    <button id="timeline-toggle" class="link" type="button" aria-expanded="false" title="The goal's rounds: tokens, waits and how each ended"></button>
    <div id="timeline-body" hidden><svg id="timeline-chart" role="img" aria-label="The goal's rounds"></svg><div id="timeline-legend" class="note"></div></div>
  </div>
</header>
<div id="permissions" aria-live="assertive"></div>
<main id="log" role="log" aria-live="polite"></main>
<footer>
  <textarea id="prompt" rows="3" aria-label="Message to the agent"></textarea>
  <div class="actions"><button id="stop" class="secondary" type="button" hidden title="Stop the running turn">Stop</button><button id="send" class="primary" type="button">Send</button></div>
</footer>
<script nonce="${attr(opts.nonce)}" src="${attr(opts.scriptUri)}"></script>
</body>
</html>`;
}

export class ChatView implements vscode.WebviewViewProvider, vscode.Disposable {
  static readonly viewId = 'dsh.chat';
  private view: vscode.WebviewView | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  /** The page's HTML as last set, and the webview's own resource origin (tests check the policy). */
  html = '';
  cspSource = '';

  constructor(private readonly extensionUri: vscode.Uri, private readonly host: ChatHost) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, enableCommandUris: false, localResourceRoots: [dist] };
    this.cspSource = view.webview.cspSource;
    this.html = chatHtml({
      cspSource: view.webview.cspSource,
      nonce: randomBytes(18).toString('base64'),
      scriptUri: view.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js')).toString(),
      styleUri: view.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'chat.css')).toString(),
    });
    view.webview.html = this.html;
    this.disposables.push(
      view.webview.onDidReceiveMessage((raw) => {
        const m = parseViewMessage(raw);
        if (!m) return;
        if (m.type === 'ready') { this.post(this.host.chatState()); return; }
        void this.host.onChatMessage(m);
      }),
      view.onDidDispose(() => { if (this.view === view) this.view = undefined; }),
    );
  }

  get visible(): boolean { return !!this.view?.visible; }

  post(m: HostToView): void { if (this.view) void this.view.webview.postMessage(m); }

  /**
   * Brings the view into sight without taking the focus (a question arrived while the person may be
   * typing elsewhere). A view never opened in this window stays closed: the notification points at it.
   */
  showQuietly(): void { if (this.view && !this.view.visible) this.view.show(true); }

  /** Shows the view (and focuses its prompt box). */
  async reveal(): Promise<void> {
    await vscode.commands.executeCommand(`${ChatView.viewId}.focus`);
    this.post({ type: 'focus' });
  }

  dispose(): void { for (const d of this.disposables) d.dispose(); }
}

// The export: the open session's conversation as a read-only markdown document, rendered from the
// chat items the chat view shows (src/chat/markdown.ts) and following them live.
import * as vscode from 'vscode';
import type { ChatFeed } from './chat/feed';
import { chatMarkdown } from './chat/markdown';

export const TRANSCRIPT_SCHEME = 'dsh-transcript';

export class Transcripts implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  private readonly disposables: vscode.Disposable[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly feed: ChatFeed) {
    this.disposables.push(
      this.changed,
      vscode.workspace.registerTextDocumentContentProvider(TRANSCRIPT_SCHEME, {
        onDidChange: this.changed.event,
        provideTextDocumentContent: (uri) => {
          const store = feed.store;
          const sessionId = uri.path.split('/')[1];
          return store?.sessionId === sessionId ? chatMarkdown(store.items) : '(this session is not open: open it again to export it)';
        },
      }),
      // The open document follows the conversation, refreshed at most every 200 ms.
      feed.onItem(({ store }) => this.refresh(store.sessionId)),
      feed.onReset((store) => { if (store) this.refresh(store.sessionId); }),
    );
  }

  uri(sessionId: string): vscode.Uri {
    return vscode.Uri.from({ scheme: TRANSCRIPT_SCHEME, path: `/${sessionId}/transcript.md` });
  }

  private refresh(sessionId: string): void {
    this.timer ??= setTimeout(() => { this.timer = undefined; this.changed.fire(this.uri(sessionId)); }, 200);
  }

  /** Opens the conversation beside the current editor. */
  async show(sessionId: string): Promise<vscode.TextDocument> {
    // The chat may hold only its newest pages: the export is the whole conversation.
    if (this.feed.store?.sessionId === sessionId) await this.feed.loadAll();
    const doc = await vscode.workspace.openTextDocument(this.uri(sessionId));
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(doc, { preview: false, viewColumn: vscode.ViewColumn.Beside, preserveFocus: true });
    this.changed.fire(this.uri(sessionId));
    return doc;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
  }
}

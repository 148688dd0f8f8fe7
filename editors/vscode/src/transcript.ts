// The transcript view: a read-only markdown document per session, fed live by `dsh/session/event`
// and filled with the history from `dsh/session/events` when it opens.
import * as vscode from 'vscode';
import type { SessionEvent, SessionEventsResult } from './protocol';
import { renderTranscript } from './transcriptRender';

export const TRANSCRIPT_SCHEME = 'dsh-transcript';
export const TRANSCRIPT_PAGE = 500;

export class Transcripts implements vscode.Disposable {
  private readonly events = new Map<string, Map<number, SessionEvent>>();
  private readonly titles = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  private readonly pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(TRANSCRIPT_SCHEME, {
      onDidChange: this.changed.event,
      provideTextDocumentContent: (uri) => {
        const sessionId = uri.path.split('/')[1];
        return renderTranscript(this.titles.get(sessionId) ?? sessionId, this.events.get(sessionId)?.values() ?? []);
      },
    });
  }

  uri(sessionId: string): vscode.Uri {
    return vscode.Uri.from({ scheme: TRANSCRIPT_SCHEME, path: `/${sessionId}/transcript.md` });
  }

  setTitle(sessionId: string, title: string): void { this.titles.set(sessionId, title); }

  /** A live event; the open document is refreshed at most every 100 ms. */
  add(sessionId: string, event: SessionEvent): void {
    let m = this.events.get(sessionId);
    if (!m) this.events.set(sessionId, (m = new Map()));
    m.set(event.seq, event);
    this.pending.add(sessionId);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      for (const s of this.pending) this.changed.fire(this.uri(s));
      this.pending.clear();
    }, 100);
  }

  /** Loads the history (paged) and shows the transcript beside the current editor. */
  async show(sessionId: string, readPage: (afterSeq: number) => Promise<SessionEventsResult>): Promise<vscode.TextDocument> {
    let afterSeq = 0;
    for (;;) {
      const page = await readPage(afterSeq);
      for (const e of page.events) this.add(sessionId, e);
      if (page.events.length < TRANSCRIPT_PAGE || page.nextSeq <= afterSeq) break;
      afterSeq = page.nextSeq;
    }
    const doc = await vscode.workspace.openTextDocument(this.uri(sessionId));
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(doc, { preview: false, viewColumn: vscode.ViewColumn.Beside, preserveFocus: true });
    this.changed.fire(this.uri(sessionId));
    return doc;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.registration.dispose();
    this.changed.dispose();
  }
}

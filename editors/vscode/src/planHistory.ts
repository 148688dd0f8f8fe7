// The plan picker (P-21): every plan presented in the session (`dsh/plan/history`), newest first;
// the one picked opens read-only, with its changes since the plan before it (the diff editor,
// the plan before on the left) and, beside its lines, the comments it got and its feedback
// (read-only comment threads). Nothing here can answer a review: these are records.
import * as vscode from 'vscode';
import { closeTabsShowing } from './askWindows';
import type { PlanRecord } from './contract';
import { outcomeWords, pastPlanFileName, planPickItems } from './planWords';

export const HISTORY_SCHEME = 'dsh-plan-history';

class NoteComment implements vscode.Comment {
  mode = vscode.CommentMode.Preview;
  constructor(public body: string | vscode.MarkdownString, public author: vscode.CommentAuthorInformation, public label?: string) {}
}

/** What the picker opened last (tests read it). */
export interface OpenedPlan { record: PlanRecord; uri: vscode.Uri; before?: vscode.Uri; threads: number }

export interface PlanHistoryHost {
  /** The open session's plans, oldest first (`dsh/plan/history`). */
  history(): Promise<{ sessionId: string; plans: PlanRecord[] }>;
}

export class PlanHistory implements vscode.Disposable {
  private readonly docs = new Map<string, string>();
  private readonly threads = new Map<string, vscode.CommentThread[]>();
  private readonly controller = vscode.comments.createCommentController('dsh-plan-history', 'Past plans');
  private readonly disposables: vscode.Disposable[] = [];
  lastOpened: OpenedPlan | undefined;

  constructor(private readonly host: PlanHistoryHost) {
    this.disposables.push(
      this.controller,
      vscode.workspace.registerTextDocumentContentProvider(HISTORY_SCHEME, {
        provideTextDocumentContent: (uri) => this.docs.get(uri.toString()) ?? '(this plan is no longer open: pick it again from the plan history)',
      }),
      // A past plan's comment threads go with its last tab.
      vscode.window.tabGroups.onDidChangeTabs(() => this.forgetClosed()),
    );
  }

  /** The picker; the plan picked opens. Undefined when the session has no plan or nothing was picked. */
  async pick(): Promise<OpenedPlan | undefined> {
    const { sessionId, plans } = await this.host.history();
    if (!plans.length) {
      void vscode.window.showInformationMessage('No plan has been presented in this session yet: turn plan mode on and ask for one.');
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(planPickItems(plans), {
      title: `Plans of this session (${plans.length})`,
      placeHolder: 'Newest first: pick one to read it with its changes since the plan before and the comments it got',
      matchOnDescription: true, matchOnDetail: true,
    });
    return picked ? this.open(sessionId, plans, picked.index) : undefined;
  }

  /** Opens plan `index` of `plans` read-only: beside the plan before it (a diff) when there is one. */
  async open(sessionId: string, plans: readonly PlanRecord[], index: number): Promise<OpenedPlan> {
    const record = plans[index];
    const uri = this.document(sessionId, record, index);
    const threads = this.annotate(uri, record);
    const prior = index > 0 ? plans[index - 1] : undefined;
    let before: vscode.Uri | undefined;
    if (prior) {
      before = this.document(sessionId, prior, index - 1, 'before');
      await vscode.commands.executeCommand('vscode.diff', before, uri,
        `${record.title} (${outcomeWords(record.outcome)}): changes since "${prior.title}"`, { preview: false });
    } else {
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
      await vscode.window.showTextDocument(doc, { preview: false });
    }
    this.lastOpened = { record, uri, before, threads };
    return this.lastOpened;
  }

  private document(sessionId: string, record: PlanRecord, index: number, role = 'plan'): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: HISTORY_SCHEME, path: `/${sessionId}/${record.callId}/${role}/${pastPlanFileName(record, index)}` });
    this.docs.set(uri.toString(), record.markdown);
    return uri;
  }

  /** The plan's comments beside their lines and its feedback on its first line, read-only. */
  private annotate(uri: vscode.Uri, record: PlanRecord): number {
    for (const t of this.threads.get(uri.toString()) ?? []) t.dispose();
    const lines = Math.max(1, record.markdown.split('\n').length);
    const threads: vscode.CommentThread[] = [];
    const add = (line: number, comment: NoteComment, label: string) => {
      const at = Math.min(Math.max(line, 0), lines - 1);
      const t = this.controller.createCommentThread(uri, new vscode.Range(at, 0, at, 0), [comment]);
      t.canReply = false;
      t.label = label;
      t.contextValue = 'dsh-past-plan';
      t.collapsibleState = vscode.CommentThreadCollapsibleState.Expanded;
      threads.push(t);
    };
    const you = { name: 'You' };
    if (record.feedback?.trim()) add(0, new NoteComment(record.feedback.trim(), you, 'feedback'), `Feedback: ${outcomeWords(record.outcome)}`);
    for (const c of record.comments ?? []) add(c.line - 1, new NoteComment(c.text, you, `line ${c.line}`), `Comment on line ${c.line}`);
    this.threads.set(uri.toString(), threads);
    return threads.length;
  }

  private forgetClosed(): void {
    const shown = new Set(vscode.window.tabGroups.all.flatMap((g) => g.tabs).flatMap((t) => {
      const i = t.input;
      return i instanceof vscode.TabInputText ? [i.uri.toString()] : i instanceof vscode.TabInputTextDiff ? [i.original.toString(), i.modified.toString()] : [];
    }));
    for (const [uri, threads] of this.threads) {
      if (shown.has(uri)) continue;
      for (const t of threads) t.dispose();
      this.threads.delete(uri);
    }
  }

  /** Closes every past plan this picker opened. */
  async closeAll(): Promise<void> {
    await closeTabsShowing([...this.docs.keys()].map((u) => vscode.Uri.parse(u)));
  }

  dispose(): void {
    for (const ts of this.threads.values()) for (const t of ts) t.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

// Plan review (PM-18..PM-20): `dsh/questions/ask` opens the plan as a read-only markdown document
// in the editor area (with its rendered preview beside it). Approve and Keep Planning are buttons on
// the editor's title bar and on a notification; the person comments on lines of the plan with the
// Comments API. Closing the plan, a withdrawn question or a lost daemon answer nothing: never approval.
import * as vscode from 'vscode';
import { buildResult, type DraftComment, type ReviewOutcome } from './answers';
import type { PlanReviewQuestion, QuestionsAskParams, QuestionsAskResult } from './protocol';

export const PLAN_SCHEME = 'dsh-plan';
const CONTROLLER_ID = 'dsh-plan-review';

class ReviewComment implements vscode.Comment {
  mode = vscode.CommentMode.Preview;
  author = { name: 'You' };
  contextValue = 'dsh-review-comment';
  constructor(public body: string, readonly thread: vscode.CommentThread) {}
}

export class PlanReview {
  readonly uri: vscode.Uri;
  readonly threads: vscode.CommentThread[] = [];
  private settle!: (outcome: ReviewOutcome) => void;
  readonly outcome: Promise<ReviewOutcome>;
  settled = false;
  /** Its editor has been opened (before that, no tab of it can have been closed). */
  shown = false;

  constructor(readonly params: QuestionsAskParams, readonly question: PlanReviewQuestion) {
    // One document per question; the name ends in .md so the editor treats it as markdown.
    this.uri = vscode.Uri.from({ scheme: PLAN_SCHEME, path: `/${params.sessionId}/${question.id}/plan.md` });
    this.outcome = new Promise((resolve) => { this.settle = resolve; });
  }

  get comments(): DraftComment[] {
    return this.threads.flatMap((t) => t.comments.map((c) => ({
      line: t.range?.start.line ?? 0,
      body: typeof c.body === 'string' ? c.body : c.body.value,
    })));
  }

  finish(outcome: ReviewOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(outcome);
  }
}

export class PlanReviews implements vscode.Disposable {
  readonly controller: vscode.CommentController;
  private readonly open = new Map<string, PlanReview>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor() {
    this.controller = vscode.comments.createCommentController(CONTROLLER_ID, 'Plan review');
    this.controller.options = { prompt: 'Comment on this line of the plan', placeHolder: 'What should change here?' };
    this.controller.commentingRangeProvider = {
      provideCommentingRanges: (doc) => (this.open.has(doc.uri.toString()) ? [new vscode.Range(0, 0, Math.max(doc.lineCount - 1, 0), 0)] : []),
    };
    this.disposables.push(
      this.controller,
      vscode.workspace.registerTextDocumentContentProvider(PLAN_SCHEME, {
        provideTextDocumentContent: (uri) => this.open.get(uri.toString())?.question.plan ?? '(this plan review is closed)',
      }),
      vscode.window.tabGroups.onDidChangeTabs((e) => { if (e.closed.length) this.dismissClosed(); }),
    );
  }

  /** The review the person is looking at, else the newest one. */
  current(): PlanReview | undefined {
    const active = vscode.window.activeTextEditor?.document.uri.toString();
    if (active && this.open.has(active)) return this.open.get(active);
    return [...this.open.values()].pop();
  }

  all(): PlanReview[] { return [...this.open.values()]; }

  /** Answers one `dsh/questions/ask`: every question is reviewed in turn. */
  async ask(params: QuestionsAskParams, token: vscode.CancellationToken): Promise<QuestionsAskResult> {
    const outcomes: { questionId: string; outcome: ReviewOutcome }[] = [];
    for (const question of params.questions) {
      if (token.isCancellationRequested) break;
      if (question.kind !== 'plan-review') continue; // unknown kinds get no answer: the daemon fails closed
      const review = new PlanReview(params, question);
      const cancelled = token.onCancellationRequested(() => review.finish({ kind: 'dismissed' }));
      try {
        await this.show(review);
        outcomes.push({ questionId: question.id, outcome: await review.outcome });
      } finally {
        cancelled.dispose();
        await this.close(review);
      }
    }
    return buildResult(outcomes);
  }

  private async show(review: PlanReview): Promise<void> {
    this.open.set(review.uri.toString(), review);
    await vscode.commands.executeCommand('setContext', 'dsh.reviewOpen', true);
    const doc = await vscode.workspace.openTextDocument(review.uri);
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(doc, { preview: false, viewColumn: vscode.ViewColumn.One });
    review.shown = true;
    // The rendered plan beside it (the built-in markdown preview editor); the focus stays on the
    // source, where line comments are made.
    await Promise.resolve(vscode.commands.executeCommand('vscode.openWith', review.uri, 'vscode.markdown.preview.editor',
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true, preview: false })).catch(() => undefined);
    void vscode.window.showInformationMessage(`Plan review: ${review.question.title}`, 'Approve', 'Keep Planning…').then((pick) => {
      if (review.settled) return;
      if (pick === 'Approve') void this.approve(review);
      if (pick === 'Keep Planning…') void this.keepPlanning(review);
    });
  }

  private async close(review: PlanReview): Promise<void> {
    review.finish({ kind: 'dismissed' });
    this.open.delete(review.uri.toString());
    for (const t of review.threads) t.dispose();
    await vscode.commands.executeCommand('setContext', 'dsh.reviewOpen', this.open.size > 0);
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((tab) => this.showsReview(tab, review));
    if (tabs.length) await Promise.resolve(vscode.window.tabGroups.close(tabs)).catch(() => undefined);
  }

  private showsReview(tab: vscode.Tab, review: PlanReview): boolean {
    const input = tab.input;
    return (input instanceof vscode.TabInputText || input instanceof vscode.TabInputCustom) && input.uri.toString() === review.uri.toString();
  }

  /** A plan whose source tab the person closed is dismissed (keeps plan mode). */
  private dismissClosed(): void {
    const openUris = new Set(vscode.window.tabGroups.all.flatMap((g) => g.tabs)
      .map((t) => (t.input instanceof vscode.TabInputText ? t.input.uri.toString() : '')));
    for (const [uri, review] of this.open) if (review.shown && !openUris.has(uri)) review.finish({ kind: 'dismissed' });
  }

  /** Called when the daemon goes away: every open review ends without an answer. */
  dismissAll(): void { for (const r of this.open.values()) r.finish({ kind: 'dismissed' }); }

  async approve(review = this.current()): Promise<boolean> {
    if (!review || review.settled) return false;
    const n = review.comments.filter((c) => c.body.trim()).length;
    if (n > 0) {
      const pick = await vscode.window.showWarningMessage(
        `You left ${n} comment${n > 1 ? 's' : ''} on the plan. Approving sends none of them.`, { modal: true }, 'Approve Anyway', 'Keep Planning…');
      if (pick === 'Keep Planning…') return this.keepPlanning(review);
      if (pick !== 'Approve Anyway') return false;
    }
    review.finish({ kind: 'approve' });
    return true;
  }

  /** Keep planning: asks for feedback (unless given), sends it with the line comments. */
  async keepPlanning(review = this.current(), feedback?: string): Promise<boolean> {
    if (!review || review.settled) return false;
    const hasComments = review.comments.some((c) => c.body.trim());
    let text = feedback;
    if (text === undefined) {
      text = await vscode.window.showInputBox({
        title: `Keep planning: ${review.question.title}`,
        prompt: hasComments ? 'Feedback for the agent (your line comments are sent with it)' : 'What should the agent change in the plan?',
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() || hasComments ? undefined : 'Say what to change, or comment on lines of the plan first'),
      });
      if (text === undefined) return false; // escaped: the review stays open
    }
    if (review.settled) return false;
    review.finish({ kind: 'revise', feedback: text, comments: review.comments });
    return true;
  }

  /** The reply command of a comment thread (the Comments widget's button). */
  addComment(reply: vscode.CommentReply): void {
    const review = this.open.get(reply.thread.uri.toString());
    const thread = reply.thread;
    if (!review || !reply.text.trim()) {
      if (thread.comments.length === 0) thread.dispose(); // an empty new thread: nothing to keep
      return;
    }
    thread.comments = [...thread.comments, new ReviewComment(reply.text, thread)];
    thread.canReply = true;
    thread.contextValue = 'dsh-review-thread';
    thread.collapsibleState = vscode.CommentThreadCollapsibleState.Expanded;
    if (!review.threads.includes(thread)) review.threads.push(thread);
  }

  deleteComment(comment: ReviewComment): void {
    const thread = comment.thread;
    thread.comments = thread.comments.filter((c) => c !== comment);
    if (thread.comments.length === 0) {
      for (const r of this.open.values()) { const i = r.threads.indexOf(thread); if (i >= 0) r.threads.splice(i, 1); }
      thread.dispose();
    }
  }

  dispose(): void {
    this.dismissAll();
    for (const d of this.disposables) d.dispose();
  }
}

// Plan review (PM-18..PM-20): `dsh/questions/ask` opens the plan as a read-only markdown document
// in the editor area (with its rendered preview beside it, in a tab of its own name). Approve and
// Keep Planning are buttons on the editor's title bar, keybindings, and buttons on the chat view's
// card; the person comments on lines of the plan with the Comments API. A review that opens by
// itself takes no focus (keys being typed stay where they were typed). Closing its tabs decides
// nothing: the question stays open in the chat and the status, and the card opens it again; a
// withdrawn question or a lost daemon answer nothing: never approval. A review that ends, however
// it ends, closes every place it was shown (its tabs, its notification, the diff against the
// previous plan). Several clients may be attached to the session: the first answer counts, and a
// review answered in another one (`dsh/question/resolved`) closes here with no answer from this window.
import * as vscode from 'vscode';
import { closeTabsShowing, notifyUntil, quietColumn } from './askWindows';
import { RecentlyWithdrawn } from './attached';
import { buildResult, type DraftComment, type ReviewOutcome } from './answers';
import type { PlanReviewQuestion, QuestionsAskParams, QuestionsAskResult } from './protocol';
import type { PreviousPlan } from './contract';
import { previousNotes, type PreviousNote } from './planWords';
import { planFileName, unsentSummary } from './reviewWords';

export const PLAN_SCHEME = 'dsh-plan';
const CONTROLLER_ID = 'dsh-plan-review';

/** A comment of the round before: read-only, beside the line it was made on. */
class AskedComment implements vscode.Comment {
  mode = vscode.CommentMode.Preview;
  author = { name: 'You, last round' };
  constructor(public body: string, public label: string) {}
}

/** The question's `previous` (the daemon sends it with a revised plan), when well formed. */
export function wirePrevious(question: PlanReviewQuestion): PreviousPlan | undefined {
  const p = question.previous;
  return p && typeof p === 'object' && typeof p.markdown === 'string' && typeof p.title === 'string' ? p : undefined;
}

class ReviewComment implements vscode.Comment {
  mode = vscode.CommentMode.Preview;
  author = { name: 'You' };
  contextValue = 'dsh-review-comment';
  constructor(public body: string, readonly thread: vscode.CommentThread) {}
}

export class PlanReview {
  /** The plan's text, where lines are commented on. */
  readonly uri: vscode.Uri;
  /** The same plan rendered (the markdown preview), a document of its own so that its tab has its own title. */
  readonly previewUri: vscode.Uri;
  readonly threads: vscode.CommentThread[] = [];
  private settle!: (outcome: ReviewOutcome) => void;
  readonly outcome: Promise<ReviewOutcome>;
  settled = false;
  /** Another client answered it first (this window sends no answer). */
  elsewhere = false;
  /** Feedback typed in the chat view's card and not sent yet (kept while the review is open, whatever is closed). */
  draftFeedback = '';
  /** The plan this one revises (the session's previous review), shown side by side on request. */
  previous: { uri: vscode.Uri; plan: string } | undefined;
  /**
   * What the person asked of that plan when they sent it back (the question's `previous`): its
   * feedback and line comments, shown beside the revised plan (the card, the compare view).
   */
  asked: { title: string; feedback?: string; comments: PreviousNote[] } | undefined;
  /** The read-only threads of those comments, on the previous plan's lines. */
  readonly askedThreads: vscode.CommentThread[] = [];

  constructor(readonly params: QuestionsAskParams, readonly question: PlanReviewQuestion) {
    // One document per question; the name ends in .md so the editor treats it as markdown.
    const name = planFileName(question.title);
    this.uri = vscode.Uri.from({ scheme: PLAN_SCHEME, path: `/${params.sessionId}/${question.id}/${name}.md` });
    this.previewUri = vscode.Uri.from({ scheme: PLAN_SCHEME, path: `/${params.sessionId}/${question.id}/preview/${name} (rendered).md` });
    this.outcome = new Promise((resolve) => { this.settle = resolve; });
  }

  get comments(): DraftComment[] {
    return this.threads.flatMap((t) => t.comments.map((c) => ({
      line: t.range?.start.line ?? 0,
      body: typeof c.body === 'string' ? c.body : c.body.value,
    })));
  }

  /** Comments and feedback the person wrote and has not sent: closing must not drop them silently. */
  get unsent(): { comments: number; feedback: boolean } {
    return { comments: this.comments.filter((c) => c.body.trim()).length, feedback: this.draftFeedback.trim() !== '' };
  }

  /** The answer this window gave (undefined while open, or when it ended without one). */
  decided: ReviewOutcome['kind'] | undefined;

  finish(outcome: ReviewOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.decided = outcome.kind;
    this.settle(outcome);
  }
}

/** Finds the plan a new review revises (the daemon's chat items know it). */
export type PreviousPlanLookup = (sessionId: string, questionId: string) => Promise<string | undefined>;

export class PlanReviews implements vscode.Disposable {
  readonly controller: vscode.CommentController;
  private readonly open = new Map<string, PlanReview>();
  /** The rendered documents of the open reviews. */
  private readonly previews = new Map<string, PlanReview>();
  /** Read-only documents that are not open reviews: the previous plans of the compare view. */
  private readonly previousDocs = new Map<string, string>();
  /** The last plan reviewed per session in this window. */
  private readonly lastPlan = new Map<string, string>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly changed = new vscode.EventEmitter<void>();
  /** Fires when a review opens, ends, or its unsent state changes (the chat view's cards follow it). */
  readonly onDidChange = this.changed.event;
  private readonly asked = new vscode.EventEmitter<PlanReview>();
  /** A review opened (the chat view shows itself, without taking the focus). */
  readonly onDidAsk = this.asked.event;
  previousPlan: PreviousPlanLookup | undefined;
  private readonly withdrawn = new RecentlyWithdrawn();

  constructor() {
    this.controller = vscode.comments.createCommentController(CONTROLLER_ID, 'Plan review');
    this.controller.options = { prompt: 'Comment on this line of the plan', placeHolder: 'What should change here?' };
    this.controller.commentingRangeProvider = {
      provideCommentingRanges: (doc) => (this.open.has(doc.uri.toString()) ? [new vscode.Range(0, 0, Math.max(doc.lineCount - 1, 0), 0)] : []),
    };
    this.disposables.push(
      this.controller,
      this.changed,
      this.asked,
      vscode.workspace.registerTextDocumentContentProvider(PLAN_SCHEME, {
        provideTextDocumentContent: (uri) => (this.open.get(uri.toString()) ?? this.previews.get(uri.toString()))?.question.plan
          ?? this.previousDocs.get(uri.toString()) ?? '(this plan review is closed)',
      }),
    );
  }

  /** The review the person is looking at, else the newest one. */
  current(): PlanReview | undefined {
    const active = vscode.window.activeTextEditor?.document.uri.toString();
    if (active && this.open.has(active)) return this.open.get(active);
    return [...this.open.values()].pop();
  }

  all(): PlanReview[] { return [...this.open.values()]; }

  /** The open review of a question, for the chat view's card. */
  byQuestion(questionId: string): PlanReview | undefined {
    return this.all().find((r) => r.question.id === questionId);
  }

  /**
   * Answers one `dsh/questions/ask`: every question is reviewed in turn. Undefined when this window
   * gives no answer at all: the daemon withdrew the question, or another client answered it first.
   */
  async ask(params: QuestionsAskParams, token: vscode.CancellationToken): Promise<QuestionsAskResult | undefined> {
    const outcomes: { questionId: string; outcome: ReviewOutcome }[] = [];
    let elsewhere = 0;
    for (const question of params.questions) {
      if (token.isCancellationRequested) break;
      if (question.kind !== 'plan-review') continue; // unknown kinds get no answer: the daemon fails closed
      const review = new PlanReview(params, question);
      const cancelled = token.onCancellationRequested(() => {
        if (!review.settled) this.withdrawn.add(question.id, question.title);
        review.finish({ kind: 'dismissed' });
      });
      try {
        await this.show(review);
        outcomes.push({ questionId: question.id, outcome: await review.outcome });
      } finally {
        cancelled.dispose();
        await this.close(review);
      }
      if (review.elsewhere) elsewhere++;
    }
    if (token.isCancellationRequested || (elsewhere > 0 && outcomes.every((o) => o.outcome.kind === 'dismissed'))) return undefined;
    return buildResult(outcomes);
  }

  /**
   * Another client answered this question first: its review ends here unanswered and its windows
   * close. The plan's title when its review was open here (undefined: nothing was open).
   */
  resolvedElsewhere(questionId: string): string | undefined {
    const review = this.byQuestion(questionId);
    if (!review || review.settled) return this.withdrawn.take(questionId); // withdrawn just before the news came
    review.elsewhere = true;
    review.finish({ kind: 'dismissed' });
    return review.question.title;
  }

  private async show(review: PlanReview): Promise<void> {
    const sessionId = review.params.sessionId;
    const asked = wirePrevious(review.question);
    const previous = asked?.markdown
      ?? await this.previousPlan?.(sessionId, review.question.id).catch(() => undefined) ?? this.lastPlan.get(sessionId);
    if (previous !== undefined && previous !== review.question.plan) {
      const uri = vscode.Uri.from({ scheme: PLAN_SCHEME, path: `/${sessionId}/${review.question.id}/previous plan.md` });
      review.previous = { uri, plan: previous };
      this.previousDocs.set(uri.toString(), previous);
    }
    if (asked) {
      review.asked = previousNotes(asked);
      if (review.previous) this.annotatePrevious(review, review.previous.uri, asked.markdown);
    }
    this.lastPlan.set(sessionId, review.question.plan);
    this.open.set(review.uri.toString(), review);
    this.previews.set(review.previewUri.toString(), review);
    await this.setContext();
    this.changed.fire();
    this.asked.fire(review);
    await this.reveal(review, true);
    notifyUntil(`Plan review: ${review.question.title}`, 'Approve or keep planning from the plan\'s title bar or the dsh chat view. [Show the plan](command:dsh.review.show)', review.outcome);
  }

  /**
   * The previous round's comments beside the previous plan's lines, and its feedback on its first
   * line, read-only: in the compare view they sit across from the revised plan.
   */
  private annotatePrevious(review: PlanReview, uri: vscode.Uri, markdown: string): void {
    const asked = review.asked;
    if (!asked) return;
    const last = Math.max(0, markdown.split('\n').length - 1);
    const add = (line: number, body: string, label: string) => {
      const at = Math.min(Math.max(line, 0), last);
      const t = this.controller.createCommentThread(uri, new vscode.Range(at, 0, at, 0), [new AskedComment(body, label)]);
      t.canReply = false;
      t.label = label;
      t.contextValue = 'dsh-asked-last-round';
      t.collapsibleState = vscode.CommentThreadCollapsibleState.Expanded;
      review.askedThreads.push(t);
    };
    if (asked.feedback) add(0, asked.feedback, 'Your feedback last round');
    for (const c of asked.comments) add(c.line - 1, c.text, `Your comment on line ${c.line} last round`);
  }

  /** Brings the review's plan to the front, with the focus (where its lines are commented on). */
  async focus(review = this.current()): Promise<void> { if (review && !review.settled) await this.reveal(review, false); }

  /**
   * The plan, and its rendered preview beside it (the built-in markdown preview editor). `byItself`:
   * the person did not ask for it, so nothing takes the focus or covers their editor.
   */
  private async reveal(review: PlanReview, byItself: boolean): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(review.uri);
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    const shown = await vscode.window.showTextDocument(doc, { preview: false, preserveFocus: byItself, viewColumn: byItself ? quietColumn() : vscode.ViewColumn.One });
    const column = shown.viewColumn ?? vscode.ViewColumn.One;
    await Promise.resolve(vscode.commands.executeCommand('vscode.openWith', review.previewUri, 'vscode.markdown.preview.editor',
      { viewColumn: column + 1, preserveFocus: true, preview: false })).catch(() => undefined);
    // Opening the preview makes its group the active one: asked for, the plan's text is where the
    // person comments, so it is made active again.
    if (!byItself) await vscode.window.showTextDocument(doc, { preview: false, viewColumn: column });
  }

  private async setContext(): Promise<void> {
    const reviews = this.all();
    await vscode.commands.executeCommand('setContext', 'dsh.reviewOpen', reviews.length > 0);
    await vscode.commands.executeCommand('setContext', 'dsh.reviewHasPrevious', reviews.some((r) => r.previous));
  }

  private async close(review: PlanReview): Promise<void> {
    review.finish({ kind: 'dismissed' });
    this.open.delete(review.uri.toString());
    this.previews.delete(review.previewUri.toString());
    for (const t of [...review.threads, ...review.askedThreads]) t.dispose();
    await this.setContext();
    this.changed.fire();
    await closeTabsShowing([review.uri, review.previewUri]);
    if (review.previous) this.previousDocs.delete(review.previous.uri.toString());
  }

  /** Called when the daemon goes away: every open review ends without an answer. */
  dismissAll(): void { for (const r of this.open.values()) r.finish({ kind: 'dismissed' }); }

  async approve(review = this.current()): Promise<boolean> {
    if (!review || review.settled) return false;
    const unsent = review.unsent;
    if (unsent.comments > 0 || unsent.feedback) {
      // The first button is the default (Enter): Keep Planning asks for feedback first and sends the
      // comments; it never approves. Cancel goes back to the review.
      const pick = await vscode.window.showWarningMessage(`${unsentSummary(unsent)} Approving sends none of it.`,
        { modal: true }, 'Keep Planning…', 'Approve Anyway');
      if (pick === 'Keep Planning…') return this.keepPlanning(review, review.draftFeedback.trim() ? review.draftFeedback : undefined);
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
    if (text === undefined || (!text.trim() && !hasComments)) {
      text = await vscode.window.showInputBox({
        title: `Keep planning: ${review.question.title}`,
        prompt: hasComments ? 'Feedback for the agent (your line comments are sent with it)' : 'What should the agent change in the plan?',
        value: review.draftFeedback,
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() || hasComments ? undefined : 'Say what to change, or comment on lines of the plan first'),
      });
      if (text === undefined) return false; // escaped: the review stays open
    }
    if (review.settled) return false;
    review.finish({ kind: 'revise', feedback: text, comments: review.comments });
    return true;
  }

  /** Feedback typed in the chat card, kept until it is sent (so a close can ask about it). */
  setDraftFeedback(questionId: string, text: string): void {
    const review = this.byQuestion(questionId);
    if (review && review.draftFeedback !== text) { review.draftFeedback = text; this.changed.fire(); }
  }

  /** Opens the diff editor: the plan this review revises on the left, this one on the right. */
  async compare(review = this.current()): Promise<boolean> {
    if (!review?.previous) {
      void vscode.window.showInformationMessage('This is the first plan of the session: there is no earlier one to compare with.');
      return false;
    }
    await vscode.commands.executeCommand('vscode.diff', review.previous.uri, review.uri, `${review.question.title}: previous ↔ revised`,
      { preview: false, viewColumn: vscode.ViewColumn.One });
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
    this.changed.fire();
  }

  deleteComment(comment: ReviewComment): void {
    const thread = comment.thread;
    thread.comments = thread.comments.filter((c) => c !== comment);
    if (thread.comments.length === 0) {
      for (const r of this.open.values()) { const i = r.threads.indexOf(thread); if (i >= 0) r.threads.splice(i, 1); }
      thread.dispose();
    }
    this.changed.fire();
  }

  dispose(): void {
    this.dismissAll();
    for (const d of this.disposables) d.dispose();
  }
}

// The chat view's host side: what the page shows (the feed's items, the header, which plan
// reviews and permission requests this window can answer) and what its buttons do. Thin: every
// action is the same command the palette runs.
import * as vscode from 'vscode';
import type { Controller } from '../controller';
import { ACTIVITY_WORDS, goalStatus, planStateWords } from '../status';
import { attachedStatus, attachedWords } from '../attached';
import type { AnswerableReview, ChatHeader, HostToView, ViewToHost } from './messages';
import type { GoalView } from '../protocol';
import { ChatView, type ChatHost } from './view';

/** The header's "Raise…" button: the daemon's label, when it offers the action (a spent budget). */
function raiseLabel(goal: GoalView | null): { raise?: string } {
  const a = goal?.actions.find((x) => x.id === 'raise');
  return a ? { raise: a.label } : {};
}

export class ChatPanel implements ChatHost, vscode.Disposable {
  readonly view: ChatView;
  private readonly disposables: vscode.Disposable[] = [];
  private lastBusy: boolean | undefined;

  constructor(private readonly c: Controller, extensionUri: vscode.Uri) {
    this.view = new ChatView(extensionUri, this);
    this.disposables.push(
      this.view,
      vscode.window.registerWebviewViewProvider(ChatView.viewId, this.view, { webviewOptions: { retainContextWhenHidden: true } }),
      c.feed.onItem(({ item }) => this.view.post({ type: 'item', item })),
      c.feed.onReset(() => this.view.post(this.chatState())),
      c.feed.onEarlier(({ items, store }) => this.view.post({ type: 'earlier', items, hasEarlier: store.olderSeq !== undefined })),
      c.reviews.onDidChange(() => this.view.post({ type: 'reviews', reviews: this.reviews() })),
      c.approvals.onDidChange(() => this.view.post({ type: 'permissions', permissions: c.approvals.pending() })),
      c.onDidChangeRounds(() => this.view.post({ type: 'rounds', rounds: c.rounds ?? null })),
      c.onDidChangeStatus(() => {
        this.view.post({ type: 'header', header: this.header() });
        const busy = c.busy;
        if (busy !== this.lastBusy) { this.lastBusy = busy; this.view.post({ type: 'busy', busy }); }
      }),
    );
  }

  private header(): ChatHeader {
    const c = this.c;
    const s = c.session;
    const kind = c.activity;
    const activity = { kind, text: ACTIVITY_WORDS[kind] };
    if (!s) return { connection: c.connection, activity };
    const status = goalStatus(s.goal);
    return {
      connection: c.connection,
      activity,
      session: { title: s.title ?? 'Untitled session', sessionId: s.sessionId },
      goal: { text: status.text, tooltip: status.detail.join('\n'), severity: status.tone, ...raiseLabel(s.goal) },
      plan: { text: `plan mode: ${planStateWords(s.plan)}`, active: s.plan.pending ?? s.plan.active },
      ...(attachedWords(c.attachedClients) ? { others: { text: attachedWords(c.attachedClients), tooltip: attachedStatus(c.attachedClients)!.tooltip } } : {}),
    };
  }

  private reviews(): AnswerableReview[] {
    const sessionId = this.c.session?.sessionId;
    return this.c.reviews.all().filter((r) => !r.settled && r.params.sessionId === sessionId)
      .map((r) => ({
        questionId: r.question.id, draftFeedback: r.draftFeedback, comments: r.unsent.comments,
        ...(r.asked ? { asked: r.asked } : {}), canCompare: !!r.previous,
      }));
  }

  chatState(): Extract<HostToView, { type: 'state' }> {
    return {
      type: 'state', header: this.header(), items: [...(this.c.feed.store?.items ?? [])],
      hasEarlier: this.c.feed.store?.olderSeq !== undefined, busy: this.c.busy,
      reviews: this.reviews(), permissions: this.c.approvals.pending(), rounds: this.c.rounds ?? null,
    };
  }

  async onChatMessage(m: ViewToHost): Promise<void> {
    const c = this.c;
    const review = 'questionId' in m ? c.reviews.byQuestion(m.questionId) : undefined;
    switch (m.type) {
      case 'send':
        // The same commands as the palette (their errors are shown the same way).
        if (c.busy && c.session) await vscode.commands.executeCommand('dsh.agent.steer', { text: m.text });
        else void vscode.commands.executeCommand('dsh.agent.prompt', { text: m.text });
        break;
      case 'stop': await vscode.commands.executeCommand('dsh.agent.cancel'); break;
      case 'approve': if (review) await c.reviews.approve(review); break;
      // The same command as the title bar's (its errors are shown the same way).
      case 'approveAndStartGoal': if (review) await vscode.commands.executeCommand('dsh.review.approveAndStartGoal', review); break;
      case 'compare': if (review) await c.reviews.compare(review); break;
      case 'pickPlan': await vscode.commands.executeCommand('dsh.plan.history'); break;
      case 'raise': await vscode.commands.executeCommand('dsh.goal.raise'); break;
      case 'keepPlanning': if (review) { c.reviews.setDraftFeedback(m.questionId, m.feedback); await c.reviews.keepPlanning(review, m.feedback); } break;
      case 'draft': c.reviews.setDraftFeedback(m.questionId, m.feedback); break;
      case 'openPlan': if (review) await c.reviews.focus(review); break;
      case 'pickSession': await vscode.commands.executeCommand('dsh.session.open'); break;
      case 'newSession': await vscode.commands.executeCommand('dsh.session.new'); break;
      case 'export': await vscode.commands.executeCommand('dsh.transcript.show'); break;
      case 'showEarlier': {
        const store = c.feed.store;
        await c.feed.loadEarlier().catch((e) => c.daemon.log(`dsh/chat/get (earlier messages): ${e instanceof Error ? e.message : String(e)}`));
        // The button works again whatever came of it (a read that failed can be tried again).
        if (store && c.feed.store === store) this.view.post({ type: 'earlier', items: [], hasEarlier: store.olderSeq !== undefined });
        break;
      }
      case 'permission': c.approvals.answer(m.requestId, m.outcome, m.feedback); break;
      case 'showPermission': await c.approvals.show(m.requestId); break;
      case 'rewind': await vscode.commands.executeCommand('dsh.checkpoint.rewind', { seq: m.seq }); break;
      case 'ready': break;
    }
  }

  dispose(): void { for (const d of this.disposables) d.dispose(); }
}

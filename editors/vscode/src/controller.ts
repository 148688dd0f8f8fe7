// The extension's state (the connection, the open session and what the daemon last told us about
// it), the status bar, and the commands. The goal and plan shown come from `dsh/goal/changed` and
// `dsh/plan/changed` alone (plus the state `dsh/session/open` returns); nothing polls.
import * as vscode from 'vscode';
import { asDaemonError, Daemon, DaemonError, type ExitInfo, type ParamsOf, type ResultOf } from './daemon';
import { ALL_GOAL_ACTIONS } from './goalActions';
import { Approvals, type PermissionOutcome } from './approvals';
import { ChatFeed } from './chat/feed';
import { ChatPanel } from './chat/panel';
import { goalNotice, turnNotice, waitingNotice, type Notice } from './notices';
import type { GoalRoundsResult, PlanRecord } from './contract';
import { PlanHistory } from './planHistory';
import { goalObjectiveFor } from './planWords';
import type {
  AgentActivityParams, ConfigGetResult, DshRequest, GoalChangedParams, GoalView, PermissionAskParams, PermissionPolicy, PermissionSetParams,
  PlanChangedParams, PlanSetResult, PlanState, PromptResult, QuestionsAskParams, SessionHandle, SteerResult,
} from './protocol';
import { PlanReview, PlanReviews } from './review';
import { Rewinds } from './rewind';
import { activityOf, applyGoalChanged, goalActions, goalStatus, planStatusText, planTooltip, statusModel, type Activity, type Connection } from './status';
import { policyChoices, policyTooltip } from './policy';
import { timeAgo } from './timeAgo';
import { describeExit } from './startup';
import { GoalCommands } from './goalCommands';
import { Transcripts } from './transcript';
import { titleFromPrompt } from './titles';
import { attachedStatus, clientsChange, resolvedWords, type AttachedClient, type QuestionResolvedParams, type SessionClientsParams } from './attached';
import { LSPErrorCodes, ResponseError } from 'vscode-languageclient/node';

const REMEMBERED_KEY = 'dsh.session';
const WORKING_MARK = '$(sync~spin)';
const WAITING_MARK = '$(bell) waiting for you';
const WAITING_ICON = '$(bell)';
// A session list row's live agent (loaded in this daemon by any window), as the picker says it.
const LISTED_QUESTION: Record<string, string> = { 'plan-review': 'plan review', approval: 'approval' };
function listedActivity(s: { activity?: string; question?: string }): string {
  if (s.activity === 'waiting') return `waiting for you${s.question ? `: ${LISTED_QUESTION[s.question] ?? s.question}` : ''}`;
  return s.activity === 'working' ? 'working' : '';
}

/** How long "Approve and start a goal" waits for the approval to be recorded before it asks for the goal. */
const APPROVAL_RECORDED_MS = 10_000;
/** How long a window waits to reattach after another client restarted the daemon (that one goes first). */
const REATTACH_DELAY_MS = 1500;
/** A daemon that crashes again within this long after being restarted for a crash is not restarted on its own. */
const AUTO_RESTART_INTERVAL_MS = 60_000;

export interface Session { sessionId: string; agentId: string; title?: string; goal: GoalView | null; plan: PlanState }

/** An agent's live sandbox and approval policy (`dsh/permission/get|set`). */
export type Policy = PermissionPolicy;

export class Controller implements vscode.Disposable {
  connection: Connection = 'starting';
  session: Session | undefined;
  readonly reviews = new PlanReviews();
  readonly feed: ChatFeed;
  readonly transcripts: Transcripts;
  chat: ChatPanel | undefined;
  readonly approvals: Approvals;
  readonly policyItem = vscode.window.createStatusBarItem('dsh.policy', vscode.StatusBarAlignment.Left, 98);
  /** The live sandbox and approval policy (`dsh/permission/get`), when the daemon has one. */
  policy: Policy | undefined;
  readonly goals = new GoalCommands(this);
  readonly goalItem = vscode.window.createStatusBarItem('dsh.goal', vscode.StatusBarAlignment.Left, 100);
  readonly planItem = vscode.window.createStatusBarItem('dsh.plan', vscode.StatusBarAlignment.Left, 99);
  /** Who else is attached to the open session (shown only when someone is). */
  readonly clientsItem = vscode.window.createStatusBarItem('dsh.clients', vscode.StatusBarAlignment.Left, 97);
  /**
   * Every connection attached to each agent, as the daemon last listed them (`dsh/session/clients`);
   * kept per agent because the list may come before the answer to `dsh/session/open`.
   */
  private readonly attached = new Map<string, AttachedClient[]>();
  /** Who joined or left the open session, as this window said it in passing (tests read it). */
  readonly clientChanges: string[] = [];
  /** The questions another client answered first, as this window said it (tests read it). */
  readonly resolvedElsewhere: string[] = [];
  private readonly statusChanged = new vscode.EventEmitter<void>();
  /** Fires after the status bar was redrawn (tests wait on it instead of polling the daemon). */
  readonly onDidChangeStatus = this.statusChanged.event;
  private busyTurns = 0;
  private statusWarning = false;
  /** The session to open again after the daemon restarts (kept across window reloads too). */
  private remembered: { sessionId: string; title?: string } | undefined;
  private memento: vscode.Memento | undefined;
  private lastAutoRestart = 0;
  /** What the daemon last said the agent does (`dsh/agent/activity`, or at open); older daemons say nothing. */
  private daemonActivity: { agentId: string; activity: Activity } | undefined;
  /** A goal notice waiting for its round to end (its token figure is final then). */
  private heldGoalNotice: GoalChangedParams | undefined;
  private readonly goalNoticeKeys = new Set<string>();
  /** Every notice this window showed, in order (what the person was told; tests read it). */
  readonly noticesShown: string[] = [];
  /** The goal changes that arrived, as `op revision tokensUsed` (tests read it). */
  readonly goalChangesSeen: string[] = [];
  /** The plan picker (`dsh/plan/history`). */
  readonly history: PlanHistory;
  /** "Rewind to here" (`dsh/checkpoint/*`). */
  readonly rewinds: Rewinds;
  /** The goals whose round waits for the person now, as the last `dsh/goal/changed` said (one notice per spell). */
  private readonly waitingGoals = new Set<string>();
  /** The current goal's rounds (`dsh/goal/rounds`), as last read; undefined: not read, or the daemon has none. */
  rounds: GoalRoundsResult | undefined;
  private roundsTimer: ReturnType<typeof setTimeout> | undefined;
  private roundsUnsupported = false;
  private readonly roundsChanged = new vscode.EventEmitter<void>();
  /** Fires when the rounds were read again (the chat header's timeline follows it). */
  readonly onDidChangeRounds = this.roundsChanged.event;

  constructor(readonly daemon: Daemon, private readonly folder: vscode.WorkspaceFolder | undefined) {
    this.feed = new ChatFeed(daemon);
    this.history = new PlanHistory({ history: () => this.planHistory() });
    this.approvals = new Approvals(() => this.folder?.uri.fsPath);
    this.rewinds = new Rewinds({
      req: (method, params) => this.req(method, params),
      root: () => this.folder?.uri.fsPath,
      openFork: async (h) => { await this.switchToFork(h, this.session?.title, 'rewound'); },
    });
    this.policyItem.name = 'dsh sandbox and approvals';
    this.policyItem.command = 'dsh.permission.policy';
    this.transcripts = new Transcripts(this.feed);
    this.feed.onItem(({ item, isNew }) => {
      const notice = isNew ? turnNotice(item) : undefined;
      if (notice) void this.notify(notice);
      // The daemon titles a session from its first prompt's words.
      const s = this.session;
      if (isNew && item.kind === 'user-message' && s && !s.title) void this.refreshTitle(s).catch(() => undefined);
      if (item.kind === 'turn-end') { this.releaseGoalNotice(); this.refreshRounds(); }
      this.render(); // a turn that opens or ends moves the busy mark
    });
    this.feed.onReset(() => this.render());
    this.goalItem.name = 'dsh goal';
    this.goalItem.command = 'dsh.goal.actions';
    this.planItem.name = 'dsh plan mode';
    this.planItem.command = 'dsh.plan.toggle';
    daemon.onConnection((state) => {
      this.connection = state;
      if (state !== 'running') { this.attached.clear(); this.setSession(undefined, false); this.reviews.dismissAll(); this.approvals.dismissAll(); }
      this.render();
    });
    daemon.install((client) => {
      client.onNotification('dsh/goal/changed', (p: GoalChangedParams) => this.onGoalChanged(p));
      client.onNotification('dsh/plan/changed', (p: PlanChangedParams) => this.onPlanChanged(p));
      client.onNotification('dsh/agent/activity', (p: AgentActivityParams) => { this.daemonActivity = { agentId: p.agentId, activity: p.activity }; this.render(); });
      client.onNotification('dsh/session/clients', (p: SessionClientsParams) => this.onSessionClients(p));
      client.onNotification('dsh/question/resolved', (p: QuestionResolvedParams) => this.onQuestionResolved(p));
      // A question this window gives no answer to (withdrawn by the daemon, answered in another
      // client first) is answered "cancelled": never an answer that could count.
      const noAnswer = () => new ResponseError(LSPErrorCodes.RequestCancelled, 'no answer from this window (withdrawn or answered elsewhere)');
      client.onRequest('dsh/questions/ask', async (p: QuestionsAskParams, token: vscode.CancellationToken) => (await this.reviews.ask(p, token)) ?? noAnswer());
      client.onRequest('dsh/permission/ask', async (p: PermissionAskParams, token: vscode.CancellationToken) => (await this.approvals.ask(p, token)) ?? noAnswer());
    });
    daemon.onUnexpectedExit((exit) => void this.recover(exit));
    this.reviews.previousPlan = (sessionId, questionId) => this.previousPlan(sessionId, questionId);
    // A question that opens or ends moves "waiting for you"; one that opens brings the chat into
    // sight (never the focus: the person may be typing).
    this.approvals.onDidChange(() => this.render());
    this.reviews.onDidChange(() => this.render());
    this.approvals.onDidAsk(() => this.chat?.view.showQuietly());
    this.reviews.onDidAsk(() => this.chat?.view.showQuietly());
    this.render();
  }

  register(context: vscode.ExtensionContext): void {
    this.memento = context.workspaceState;
    this.chat = new ChatPanel(this, context.extensionUri);
    this.remembered = this.memento.get<{ sessionId: string; title?: string }>(REMEMBERED_KEY);
    const cmd = (id: string, fn: (...args: any[]) => unknown) => context.subscriptions.push(vscode.commands.registerCommand(id, async (...args: any[]) => {
      const generation = this.daemon.generation;
      try {
        return await fn(...args);
      } catch (e) {
        // A daemon that went away (or failed to start) has said so once already: a request it
        // took down with it is not a second message.
        if (generation !== this.daemon.generation || !this.daemon.running) this.daemon.log(`${id}: ${asDaemonError(e).message}`);
        else this.showError(e);
        return undefined;
      }
    }));
    cmd('dsh.server.restart', () => this.startDaemon());
    cmd('dsh.daemon.restart', () => this.restartWorkspaceDaemon());
    cmd('dsh.session.new', (a?: { title?: string }) => this.newSession(a?.title));
    cmd('dsh.session.open', (a?: { sessionId?: string; reload?: boolean }) => this.openSession(a?.sessionId, a?.reload));
    cmd('dsh.session.fork', () => this.forkSession());
    cmd('dsh.session.close', () => this.closeSession());
    cmd('dsh.agent.prompt', (a?: { text?: string }) => this.prompt(a?.text));
    cmd('dsh.agent.steer', (a?: { text?: string }) => this.steer(a?.text));
    cmd('dsh.agent.cancel', () => this.cancel());
    cmd('dsh.plan.on', () => this.setPlan(true));
    cmd('dsh.plan.off', () => this.setPlan(false));
    cmd('dsh.plan.toggle', () => this.togglePlan());
    cmd('dsh.goal.create', (a?: { objective?: string; maxRounds?: number; maxTokens?: number }) => this.goals.create(a));
    cmd('dsh.goal.edit', (a?: { objective?: string; maxRounds?: number; maxTokens?: number }) => this.goals.edit(a));
    cmd('dsh.goal.pause', () => this.goals.write('pause', (ref) => this.req('dsh/goal/pause', { ref })));
    cmd('dsh.goal.resume', () => this.goals.write('resume', (ref) => this.req('dsh/goal/resume', { ref })));
    cmd('dsh.goal.complete', () => this.goals.write('complete', (ref) => this.req('dsh/goal/complete', { ref })));
    cmd('dsh.goal.block', (a?: { code?: string; message?: string }) => this.goals.block(a));
    cmd('dsh.goal.clear', () => this.goals.clear());
    cmd('dsh.goal.actions', () => this.goals.actions());
    cmd('dsh.goal.raise', (a?: { maxRounds?: number; maxTokens?: number }) => this.goals.raise(a));
    cmd('dsh.goal.timeline', () => this.showTimeline());
    cmd('dsh.plan.history', () => this.history.pick());
    cmd('dsh.checkpoint.rewind', (a?: { seq?: number }) => (a?.seq ? this.rewinds.rewind(a.seq) : this.rewinds.pick()));
    cmd('dsh.review.approveAndStartGoal', (a?: unknown) => this.approveAndStartGoal(a instanceof PlanReview ? a : undefined));
    cmd('dsh.transcript.show', () => this.showTranscript());
    cmd('dsh.chat.show', () => this.chat?.view.reveal());
    const decide = (outcome: PermissionOutcome) => (a?: { feedback?: string }) => this.approvals.decide(undefined, outcome, a?.feedback);
    cmd('dsh.permission.allow', decide('allow-once'));
    cmd('dsh.permission.allowSession', decide('allow-session'));
    cmd('dsh.permission.reject', decide('reject'));
    cmd('dsh.permission.policy', () => this.pickPolicy());
    cmd('dsh.permission.show', (a?: { requestId?: string }) => this.approvals.show(a?.requestId));
    cmd('dsh.review.show', () => this.reviews.focus());
    cmd('dsh.review.approve', () => this.reviews.approve());
    cmd('dsh.review.compare', () => this.reviews.compare());
    cmd('dsh.review.keepPlanning', (a?: { feedback?: string } | vscode.Uri) => this.reviews.keepPlanning(undefined, a && !(a instanceof vscode.Uri) ? a.feedback : undefined));
    cmd('dsh.review.addComment', (reply: vscode.CommentReply) => this.reviews.addComment(reply));
    cmd('dsh.review.deleteComment', (comment) => this.reviews.deleteComment(comment));
    context.subscriptions.push(this);
  }

  /**
   * Starts (or restarts) the daemon and opens again the session this window had, if any; when the
   * window starts (`atWindowStart`) and remembers none, the workspace's newest session.
   */
  async startDaemon(atWindowStart = false): Promise<boolean> {
    this.setSession(undefined, false);
    if (!this.folder) {
      this.connection = 'failed';
      this.render();
      void vscode.window.showErrorMessage('dshd needs a workspace folder: open a folder, then run "DSH: Restart the Daemon".');
      return false;
    }
    this.roundsUnsupported = false; // the daemon started now may know `dsh/goal/rounds`
    if (!(await this.daemon.start(this.folder))) return false;
    await this.reopenRemembered();
    if (atWindowStart && !this.session) await this.openNewest();
    return true;
  }

  /** The session of this workspace changed last (made here, in another editor, or before a reload). */
  private async openNewest(): Promise<Session | undefined> {
    try {
      const { sessions } = await this.daemon.request('dsh/session/list', {});
      const newest = [...sessions].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt))[0];
      return newest ? await this.openSession(newest.sessionId, false, newest.title ?? undefined) : undefined;
    } catch (e) {
      this.daemon.log(`could not reopen the newest session: ${asDaemonError(e).message}`);
      return undefined;
    }
  }

  /** The session this window had before the daemon went away; a session gone from disk is forgotten. */
  private async reopenRemembered(): Promise<Session | undefined> {
    const r = this.remembered;
    if (!r || this.session) return this.session;
    try {
      return await this.openSession(r.sessionId, false, r.title);
    } catch (e) {
      const err = asDaemonError(e);
      this.remember(undefined);
      void vscode.window.showWarningMessage(`dsh: could not reopen the session${r.title ? ` "${r.title}"` : ''}: ${err.message}. Pick one with "DSH: Open Session…" or start a new one.`);
      return undefined;
    }
  }

  private remember(s: { sessionId: string; title?: string } | undefined): void {
    this.remembered = s ? { sessionId: s.sessionId, ...(s.title ? { title: s.title } : {}) } : undefined;
    void this.memento?.update(REMEMBERED_KEY, this.remembered);
  }

  /** Set while this window's own `dshd daemon restart` runs: the end of its connection is expected. */
  private restartingOwn = false;

  /**
   * "DSH: Restart Workspace Daemon": `dshd daemon restart` (every client of the workspace's
   * daemon is told and reattaches to its session); with a daemon of this window's own, a restart.
   */
  private async restartWorkspaceDaemon(): Promise<void> {
    if (!this.folder || this.daemon.mode !== 'connect' || !this.daemon.running) {
      await this.startDaemon();
      return;
    }
    this.restartingOwn = true;
    const { ok, said } = await this.daemon.restartWorkspaceDaemon(this.folder);
    if (!ok) {
      this.restartingOwn = false;
      void vscode.window.showErrorMessage(`dshd daemon restart failed: ${said}`, 'Show Log').then((pick) => { if (pick === 'Show Log') this.daemon.showLog(); });
      return;
    }
    this.daemon.log(said);
  }

  /**
   * The daemon ended on its own. One message says so, with how it ended; the daemon is started
   * again at once (unless it crashed less than a minute after the last such restart: then the
   * person decides) and the session is opened again.
   */
  private async recover(exit: ExitInfo | undefined): Promise<void> {
    if (this.restartingOwn || (this.daemon.restartAnnounced !== undefined && Date.now() - this.daemon.restartAnnounced < 30_000)) {
      // `dshd daemon restart`: no crash. The window that asked reattaches at once (the next
      // daemon starts with its settings); the others a moment later.
      const own = this.restartingOwn;
      this.restartingOwn = false;
      this.daemon.restartAnnounced = undefined;
      if (!own) await new Promise((r) => setTimeout(r, REATTACH_DELAY_MS));
      if (await this.startDaemon()) {
        const s = this.session;
        const reopened = s ? `; reopened ${s.title ? `"${s.title}"` : 'your session'}` : '';
        void vscode.window.showInformationMessage(`The workspace's dshd daemon restarted${reopened}${s?.goal?.phase === 'active' ? ' (the goal waits for you to resume)' : ''}.`);
      }
      return;
    }
    const how = exit ? describeExit(exit.code, exit.signal) : 'exit status unknown';
    // With the shared daemon the process this window started is the forwarder: it ends when the daemon does.
    const ended = this.daemon.mode === 'connect' ? `The shared dshd daemon went away (its dshd connect: ${how})` : `dshd crashed (${how})`;
    const auto = Date.now() - this.lastAutoRestart > AUTO_RESTART_INTERVAL_MS;
    if (auto) {
      this.lastAutoRestart = Date.now();
      if (await this.startDaemon()) {
        const s = this.session;
        const reopened = s ? ` and reopened ${s.title ? `"${s.title}"` : 'your session'}` : '';
        const pick = await vscode.window.showWarningMessage(
          `${ended}. It was restarted${reopened}; open plan reviews ended unanswered${s?.goal?.phase === 'active' ? ' and the goal waits for you to resume' : ''}.`, 'Show Log');
        if (pick === 'Show Log') this.daemon.showLog();
        return;
      }
      return; // the failed start said why, once
    }
    const pick = await vscode.window.showErrorMessage(`${ended}. Open plan reviews ended unanswered.`, 'Restart dshd', 'Show Log');
    if (pick === 'Restart dshd') await this.startDaemon();
    if (pick === 'Show Log') this.daemon.showLog();
  }

  /**
   * The plan a new review revises, as the daemon's chat items say: the plan a person last
   * approved or sent back before it (its card's `previousId`).
   */
  private async previousPlan(sessionId: string, questionId: string): Promise<string | undefined> {
    const store = this.feed.store;
    if (!store || store.sessionId !== sessionId) return undefined;
    const card = store.items.find((i) => i.kind === 'plan-review' && i.questionId === questionId);
    const previous = card?.kind === 'plan-review' && card.previousId ? store.get(card.previousId) : undefined;
    return previous?.kind === 'plan-review' ? previous.plan : undefined;
  }

  /** A notification with its buttons wired (the chat view, the goal actions). */
  private async notify(n: Notice): Promise<void> {
    this.noticesShown.push(n.text);
    const show = n.severity === 'error' ? vscode.window.showErrorMessage : n.severity === 'warning' ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    const pick = await show(n.text, ...n.actions);
    if (pick === 'Show Chat') await this.chat?.view.reveal();
    if (pick === 'Goal Actions…') await vscode.commands.executeCommand('dsh.goal.actions');
    if (pick === 'Edit the Goal') await vscode.commands.executeCommand('dsh.goal.edit');
    if (pick === 'Raise and Resume…') await vscode.commands.executeCommand('dsh.goal.raise');
  }

  // ---- notifications ----------------------------------------------------------------------

  private onGoalChanged(p: GoalChangedParams): void {
    if (!this.session || p.agentId !== this.session.agentId) return;
    this.session.goal = applyGoalChanged(this.session.goal, p);
    this.goalChangesSeen.push(`${p.op} ${p.goal?.revision} ${p.goal?.tokensUsed}`);
    this.render();
    this.noticeWaiting(this.session.goal);
    this.refreshRounds();
    if (!goalNotice(p, this.goals.isOwn(p.op))) return;
    // One notice per change of the goal, however often it is told.
    const key = `${p.goal?.id}:${p.op}:${p.goal?.revision}`;
    if (this.goalNoticeKeys.has(key)) return;
    this.goalNoticeKeys.add(key);
    // The round that completed (or blocked) the goal still counts its last reply's tokens: the
    // notice waits for the round to end and then says the figure the status bar shows.
    if (this.feed.store?.turnRunning) this.heldGoalNotice = p;
    else void this.notify(goalNotice(p, false)!);
  }

  /**
   * One notice per waiting spell: when the goal's `waitingFor` appears (it was absent), never
   * again until it has gone and comes back.
   */
  private noticeWaiting(goal: GoalView | null, announce = true): void {
    const waiting = goal?.waitingFor;
    if (!goal) { this.waitingGoals.clear(); return; }
    if (!waiting) { this.waitingGoals.delete(goal.id); return; }
    if (this.waitingGoals.has(goal.id)) return;
    this.waitingGoals.add(goal.id);
    const notice = announce ? waitingNotice(goal) : undefined;
    if (notice) void this.notify(notice);
  }

  /** Reads the goal's rounds again soon (many changes come in a burst: one read for them). */
  refreshRounds(): void {
    if (this.roundsUnsupported || this.roundsTimer) return;
    this.roundsTimer = setTimeout(() => { this.roundsTimer = undefined; void this.readRounds(); }, 250);
  }

  /** `dsh/goal/rounds` for the open session; a daemon without it leaves the timeline hidden. */
  async readRounds(): Promise<GoalRoundsResult | undefined> {
    const s = this.session;
    if (!s || !this.daemon.running) { this.rounds = undefined; this.roundsChanged.fire(); return undefined; }
    try {
      const r = await this.daemon.request('dsh/goal/rounds', { agentId: s.agentId });
      if (this.session !== s) return undefined;
      this.rounds = r;
    } catch (e) {
      const err = asDaemonError(e);
      if (/method not found|unhandled method/i.test(err.message)) this.roundsUnsupported = true; // an older daemon: no timeline
      else this.daemon.log(`dsh/goal/rounds: ${err.message}`);
      this.rounds = undefined;
    }
    this.roundsChanged.fire();
    return this.rounds;
  }

  /** The plans of the open session (`dsh/plan/history`), oldest first. */
  private async planHistory(): Promise<{ sessionId: string; plans: PlanRecord[] }> {
    const s = this.session;
    if (!s) throw new DaemonError('No dsh session is open: open one to see its plans ("DSH: Open Session…").', undefined, {});
    const r = await this.daemon.request('dsh/plan/history', { agentId: s.agentId });
    return { sessionId: s.sessionId, plans: r.plans };
  }

  /** The chat view, with the goal's timeline open in its header. */
  async showTimeline(): Promise<void> {
    await this.readRounds();
    await this.chat?.view.reveal();
    this.chat?.view.post({ type: 'timeline', open: true });
  }

  /**
   * "Approve and start a goal" (P-24): asks the round and token budgets, answers the review
   * "approve", waits until the approval is recorded, then creates a goal whose objective names the
   * plan. Two calls composed here: plan mode and goals stay separate in the daemon.
   */
  async approveAndStartGoal(review = this.reviews.current()): Promise<GoalView | undefined> {
    if (!review || review.settled) return undefined;
    const s = this.session;
    if (!s || s.sessionId !== review.params.sessionId) {
      throw new DaemonError('This plan belongs to a session not open in this window: open it first, then approve it with a goal.', undefined, {});
    }
    const title = review.question.title;
    const budgets = await this.goals.askBudgets(`Approve "${title}" and start a goal`);
    if (!budgets || review.settled) return undefined;
    const recorded = this.approvalRecorded(review.question.id);
    if (!(await this.reviews.approve(review)) || review.decided !== 'approve') { recorded.dispose(); return undefined; }
    await recorded.done;
    return this.goals.create({ objective: goalObjectiveFor(title), ...budgets });
  }

  /** Resolves once the chat shows this plan approved (its answer is in the log), or after a while. */
  private approvalRecorded(questionId: string): { done: Promise<void>; dispose(): void } {
    let finish!: () => void;
    const done = new Promise<void>((r) => { finish = r; });
    const timer = setTimeout(() => finish(), APPROVAL_RECORDED_MS);
    const sub = this.feed.onItem(({ item }) => { if (item.kind === 'plan-review' && item.questionId === questionId && item.outcome === 'approved') finish(); });
    void done.then(() => { clearTimeout(timer); sub.dispose(); });
    return { done, dispose: () => finish() };
  }

  /** A round ended: the goal notice it held back, with the goal as it is now. */
  private releaseGoalNotice(): void {
    const held = this.heldGoalNotice;
    if (!held) return;
    this.heldGoalNotice = undefined;
    const goal = this.session?.agentId === held.agentId && this.session.goal?.id === held.goal?.id ? this.session.goal : held.goal;
    const notice = goalNotice({ ...held, goal: goal ?? held.goal }, false);
    if (notice) void this.notify(notice);
  }

  private onSessionClients(p: SessionClientsParams): void {
    if (typeof p.agentId !== 'string' || !Array.isArray(p.clients)) return;
    const change = clientsChange(this.attached.get(p.agentId), p.clients);
    this.attached.set(p.agentId, p.clients);
    if (p.agentId !== this.session?.agentId) return;
    this.render();
    // In passing: the status bar item and the header say who is here for as long as they are.
    if (change) { this.clientChanges.push(change); vscode.window.setStatusBarMessage(change, 6000); }
  }

  /** The clients attached to the open session with this window (empty: none known, or alone). */
  get attachedClients(): AttachedClient[] {
    return (this.session && this.attached.get(this.session.agentId)) || [];
  }

  /**
   * A question got its first answer. One that is still open here was answered in another client:
   * its windows close and one line says who answered what. One this window answered itself (or
   * never showed) says nothing.
   */
  private onQuestionResolved(p: QuestionResolvedParams): void {
    const title = p.kind === 'plan-review' ? this.reviews.resolvedElsewhere(p.questionId)
      : p.kind === 'permission' ? this.approvals.resolvedElsewhere(p.questionId) : undefined;
    if (title === undefined) return;
    const line = resolvedWords(p, title);
    this.resolvedElsewhere.push(line);
    this.noticesShown.push(line);
    void vscode.window.showInformationMessage(line);
  }

  private onPlanChanged(p: PlanChangedParams): void {
    if (!this.session || p.agentId !== this.session.agentId) return;
    this.session.plan = p.pending === undefined ? { active: p.active } : { active: p.active, pending: p.pending };
    this.render();
  }

  // ---- status bar and context keys ------------------------------------------------------------

  render(): void {
    const s = this.session;
    const model = statusModel(this.connection, !!s, s?.goal ?? null);
    const activity = this.activity;
    // The daemon's words say "waiting for you" while the goal's round waits (`waitingFor`): the
    // bell goes in front of them instead of the words twice.
    const saysWaiting = /waiting for you/.test(model.text) && !!s?.goal?.waitingFor;
    this.goalItem.text = saysWaiting ? model.text.replace(/^\$\([a-z-]+\)/, WAITING_ICON)
      : activity === 'waiting' ? `${model.text} ${WAITING_MARK}` : activity === 'working' ? `${model.text} ${WORKING_MARK}` : model.text;
    this.goalItem.tooltip = new vscode.MarkdownString(model.tooltip, true);
    this.statusWarning = model.warning;
    this.goalItem.backgroundColor = model.warning ? new vscode.ThemeColor('statusBarItem.warningBackground')
      : model.hint ? new vscode.ThemeColor('statusBarItem.prominentBackground') : undefined;
    this.goalItem.command = this.connection === 'running' ? 'dsh.goal.actions' : 'dsh.server.restart';
    this.goalItem.show();
    if (s || this.connection === 'running') {
      // Without a session too: turning plan mode on then starts one, in plan mode.
      const plan = s?.plan ?? { active: false };
      this.planItem.text = planStatusText(plan);
      this.planItem.tooltip = s ? planTooltip(plan) : 'Plan mode is off. Click to turn it on: a new session starts in plan mode.';
      this.planItem.show();
    } else {
      this.planItem.hide();
    }
    const others = s ? attachedStatus(this.attachedClients) : undefined;
    if (others) {
      this.clientsItem.text = others.text;
      this.clientsItem.tooltip = others.tooltip;
      this.clientsItem.show();
    } else {
      this.clientsItem.hide();
    }
    if (s && this.policy) {
      const p = this.policy;
      this.policyItem.text = `$(shield) ${p.sandbox}`;
      this.policyItem.tooltip = policyTooltip(p);
      this.policyItem.show();
    } else {
      this.policyItem.hide();
    }
    const set = (key: string, value: unknown) => void vscode.commands.executeCommand('setContext', key, value);
    set('dsh.started', this.connection !== 'starting');
    set('dsh.running', this.connection === 'running');
    set('dsh.hasSession', !!s);
    set('dsh.planActive', !!s?.plan.active);
    set('dsh.goalPhase', s ? (s.goal?.phase ?? 'none') : undefined);
    const valid = s ? goalActions(s.goal).map((a) => a.id) : [];
    for (const a of ALL_GOAL_ACTIONS) set(`dsh.canGoal.${a}`, valid.includes(a));
    this.statusChanged.fire();
  }

  /** A turn runs: the person's prompt, or a goal round (from the chat items), or one this window just sent. */
  get busy(): boolean { return this.busyTurns > 0 || !!this.feed.store?.turnRunning; }

  /** Questions to the person open in this window (plan reviews, approvals), answered or not elsewhere. */
  get questionsOpen(): number {
    return this.reviews.all().filter((r) => !r.settled).length + this.approvals.pending().length;
  }

  /**
   * What the header and the status bar say runs: the daemon's word (`dsh/agent/activity`: an open
   * turn alone is not "working"); a question open in this window is "waiting" in any case; without
   * the daemon's word, an open turn is "working".
   */
  get activity(): Activity {
    const said = this.daemonActivity?.agentId === this.session?.agentId ? this.daemonActivity?.activity : undefined;
    if (this.questionsOpen > 0 || said === 'waiting') return 'waiting';
    return said ?? activityOf(0, this.busy);
  }

  /** The status bar as text, for tests and the log. */
  statusText(): { goal: string; plan: string | undefined; warning: boolean; busy: boolean; waiting: boolean; others: string | undefined } {
    const text = this.goalItem.text;
    return {
      others: this.session && attachedStatus(this.attachedClients) ? this.clientsItem.text : undefined,
      goal: text.replace(` ${WORKING_MARK}`, '').replace(` ${WAITING_MARK}`, ''), plan: this.session ? this.planItem.text : undefined,
      warning: this.statusWarning, busy: text.endsWith(WORKING_MARK), waiting: text.endsWith(WAITING_MARK) || text.startsWith(WAITING_ICON),
    };
  }

  // ---- sessions ---------------------------------------------------------------------------------

  /**
   * The session this window shows (undefined: none). The chat view follows it; `remember`
   * keeps it to open again after a restart (a daemon that went away is not the person closing it).
   */
  private setSession(s: Session | undefined, remember = true): void {
    this.session = s;
    if (remember) this.remember(s);
    // A window that opens on a goal already waiting was not there when the spell began: no notice.
    this.waitingGoals.clear();
    this.noticeWaiting(s?.goal ?? null, false);
    this.rounds = undefined;
    this.refreshRounds();
    void this.feed.open(s?.agentId, s?.sessionId).catch((e) => this.daemon.log(`dsh/chat/get: ${asDaemonError(e).message}`));
    this.policy = undefined;
    if (s && this.daemon.serverCapabilities.permissions === true) {
      void this.req('dsh/permission/get', {}).then((p) => { if (this.session === s) { this.policy = p; this.render(); } })
        .catch((e) => this.daemon.log(`dsh/permission/get: ${asDaemonError(e).message}`));
    }
    this.render();
  }

  /** A request for the open session's agent (every such method takes `agentId`). */
  async req<M extends DshRequest>(method: M, params: Omit<ParamsOf<M>, 'agentId'>): Promise<ResultOf<M>> {
    const s = this.session;
    if (!s) throw new DaemonError('No dsh session is open: run "DSH: New Session" or "DSH: Open Session…" first.', undefined, {});
    return this.daemon.request(method, { ...params, agentId: s.agentId } as ParamsOf<M>);
  }

  private async requireRunning(): Promise<void> {
    if (this.daemon.running) return;
    if (!(await this.startDaemon())) throw new DaemonError('dshd is not running', undefined, {});
  }

  async newSession(title?: string): Promise<Session> {
    await this.requireRunning();
    const h = await this.daemon.request('dsh/session/create', title ? { title } : {});
    const s: Session = { ...h, title, goal: null, plan: { active: false } };
    this.setSession(s);
    return s;
  }

  async openSession(sessionId?: string, reload?: boolean, title?: string): Promise<Session | undefined> {
    await this.requireRunning();
    if (!sessionId) {
      const { sessions } = await this.daemon.request('dsh/session/list', {});
      if (!sessions.length) {
        const pick = await vscode.window.showInformationMessage('This workspace has no dsh sessions yet.', 'New Session');
        return pick ? this.newSession() : undefined;
      }
      const picked = await vscode.window.showQuickPick(
        [...sessions].sort((a, b) => b.updatedAt.localeCompare(a.updatedAt)).map((s) => ({
          label: s.title ?? 'Untitled session',
          description: [listedActivity(s), s.goal ? `◎ ${goalStatus(s.goal).text}` : ''].filter(Boolean).join(' · ') || undefined,
          detail: `${this.session?.sessionId === s.sessionId ? 'open now · ' : ''}updated ${timeAgo(s.updatedAt)}`,
          sessionId: s.sessionId,
          title: s.title ?? undefined,
        })), { title: 'Open a dsh session', placeHolder: 'Sessions of this workspace, newest first', matchOnDetail: true });
      if (!picked) return undefined;
      sessionId = picked.sessionId; title = picked.title;
    }
    const r = await this.daemon.request('dsh/session/open', reload ? { sessionId, reload } : { sessionId });
    title ??= (await this.daemon.request('dsh/session/list', {})).sessions.find((x) => x.sessionId === r.sessionId)?.title ?? undefined;
    const s: Session = { sessionId: r.sessionId, agentId: r.agentId, title, goal: r.goal, plan: r.plan };
    if (r.activity) this.daemonActivity = { agentId: r.agentId, activity: r.activity };
    this.setSession(s);
    return s;
  }

  /** Forks the open session at its last event and switches to the fork (its plan and goal come from its log). */
  async forkSession(): Promise<Session> {
    const parent = this.session;
    return this.switchToFork(await this.req('dsh/session/fork', {}), parent?.title, 'fork');
  }

  /** Switches to a fork the daemon made (a fork, or a conversation rewound): its plan and goal come from its log. */
  private async switchToFork(h: SessionHandle, parentTitle: string | undefined, why: 'fork' | 'rewound'): Promise<Session> {
    const agent = { agentId: h.agentId };
    // The fork's starting state, read once like dsh/session/open returns it; notifications follow.
    const [plan, goal] = await Promise.all([this.daemon.request('dsh/plan/get', agent), this.daemon.request('dsh/goal/get', agent)]);
    const title = parentTitle ? `${parentTitle} (${why})` : undefined;
    const s: Session = { ...h, title, goal, plan };
    this.setSession(s);
    return s;
  }

  async readConfig(): Promise<ConfigGetResult> {
    await this.requireRunning();
    return this.daemon.request('dsh/config/get', {});
  }

  async closeSession(): Promise<void> {
    await this.req('dsh/session/close', {});
    this.setSession(undefined);
  }

  /** A session to talk in; a new one is titled after the first thing said in it (`/plan` and other commands stripped). */
  async ensureSession(firstWords?: string): Promise<void> {
    if (this.session) return;
    await this.newSession(titleFromPrompt(firstWords));
  }

  /** A session still without a title takes the one the daemon gave it (after its first real prompt). */
  private async refreshTitle(s: Session): Promise<void> {
    if (s.title) return;
    const title = (await this.daemon.request('dsh/session/list', {})).sessions.find((x) => x.sessionId === s.sessionId)?.title ?? undefined;
    if (title && this.session === s && !s.title) { s.title = title; this.remember(s); this.render(); }
  }

  // ---- agent ----------------------------------------------------------------------------------

  async prompt(text?: string): Promise<PromptResult | undefined> {
    await this.ensureSession(text);
    text ??= await vscode.window.showInputBox({ title: 'Prompt the agent', prompt: 'Text starting with / runs a command (/plan, /plan off…)', ignoreFocusOut: true });
    if (!text?.trim()) return undefined;
    this.busyTurns++; this.render();
    try {
      return await this.req('dsh/agent/prompt', { text });
    } catch (e) {
      const err = asDaemonError(e);
      if (err.kind !== 'turn-open') throw err;
      const pick = await vscode.window.showWarningMessage('A turn is running. Steer this message into it instead?', 'Steer');
      if (pick === 'Steer') await this.steer(text);
      return undefined;
    } finally {
      this.busyTurns--; this.render();
    }
  }

  async steer(text?: string): Promise<SteerResult | undefined> {
    text ??= await vscode.window.showInputBox({ title: 'Steer the running turn', prompt: 'Sent to the agent before its next step', ignoreFocusOut: true });
    if (!text?.trim()) return undefined;
    const r = await this.req('dsh/agent/steer', { text });
    if (!r.queued) void vscode.window.showInformationMessage('No turn is running: use "DSH: Prompt the Agent" instead.');
    return r;
  }

  async cancel(): Promise<void> { await this.req('dsh/agent/cancel', {}); }

  // ---- plan mode ------------------------------------------------------------------------------

  /** Plan mode before any session exists starts one (in plan mode): nothing to remember on the side. */
  async setPlan(active: boolean): Promise<PlanSetResult> {
    await this.ensureSession();
    const r = await this.req('dsh/plan/set', { active });
    if (r.outcome === 'queued') void vscode.window.setStatusBarMessage(`Plan mode turns ${active ? 'on' : 'off'} at the agent's next step`, 4000);
    return r;
  }

  /** Reads the daemon's state first: the editor keeps no copy of plan mode to decide from (PM-6). */
  async togglePlan(): Promise<PlanSetResult> {
    await this.ensureSession();
    const state = await this.req('dsh/plan/get', {});
    return this.setPlan(!(state.pending ?? state.active));
  }

  /** The status bar's shield: choose how commands are sandboxed and what needs your yes (this agent, until a restart). */
  async pickPolicy(choice?: Omit<PermissionSetParams, 'agentId'>): Promise<Policy | undefined> {
    const current = this.policy ?? await this.req('dsh/permission/get', {});
    if (!choice) {
      const items = policyChoices(current);
      const picked = await vscode.window.showQuickPick(items, {
        title: 'Sandbox and approvals (this session, until dshd restarts)',
        placeHolder: `Now: ${current.sandbox}, asking before ${current.approve.length ? current.approve.join(' and ') : 'nothing'}`,
      });
      if (!picked) return undefined;
      choice = picked.choice;
    }
    const p = await this.req('dsh/permission/set', choice);
    this.policy = p;
    this.render();
    return p;
  }

  async showTranscript(): Promise<vscode.TextDocument> {
    const s = this.session;
    if (!s) throw new DaemonError('No dsh session is open.', undefined, {});
    return this.transcripts.show(s.sessionId);
  }

  private showError(e: unknown): void {
    const err = asDaemonError(e);
    const hint: Record<string, string> = {
      'invalid-transition': `(the goal is ${String(err.data.phase ?? 'in another phase')}: pick an action the goal menu offers)`,
      'stale-agent': '(the session was reloaded: open it again with "DSH: Open Session…")',
      'plugin-not-loaded': typeof err.data.plugin === 'string' && err.data.plugin
        ? `(add "${err.data.plugin}" to plugins in .dsh/config.toml, then run "DSH: Restart the Daemon")`
        : '(list the plugin in plugins of .dsh/config.toml, then run "DSH: Restart the Daemon")',
      'session-locked': `(another dshd, pid ${String(err.data.pid)}, has it open: close it there, or stop that process)`,
    };
    void vscode.window.showErrorMessage(`dsh: ${err.message}${err.kind && hint[err.kind] ? ` ${hint[err.kind]}` : ''}`);
  }

  /** Everything the controller made, in one place: the chat view, the feed, approvals, reviews, the status bar. */
  dispose(): void {
    if (this.roundsTimer) clearTimeout(this.roundsTimer);
    for (const d of [this.chat, this.feed, this.approvals, this.rewinds, this.policyItem, this.clientsItem, this.reviews, this.history, this.transcripts, this.goalItem, this.planItem, this.statusChanged, this.roundsChanged]) d?.dispose();
  }
}

// The goal commands: create, edit, pause, resume, complete, block, clear and the status bar's
// quick pick. Every write names the ref last seen; a stale one is never retried without asking.
import * as vscode from 'vscode';
import type { Session } from './controller';
import { asDaemonError, DaemonError, type ParamsOf, type ResultOf } from './daemon';
import { checkBlockCode, checkMaxRounds, checkMaxTokens, goalActionItems, parseTokens, raiseSuggestion, spentBudgets, staleDecision, type GoalActionId } from './goalActions';
import { goalActions } from './status';
import type { ConfigGetResult, DshRequest, GoalClearResult, GoalRef, GoalView } from './protocol';

/** What the goal commands need of the controller. */
export interface GoalHost {
  readonly session: Session | undefined;
  req<M extends DshRequest>(method: M, params: Omit<ParamsOf<M>, 'agentId'>): Promise<ResultOf<M>>;
  ensureSession(): Promise<void>;
  newSession(): Promise<Session>;
  openSession(): Promise<Session | undefined>;
  /** The configuration in force (`dsh/config/get`). */
  readConfig(): Promise<ConfigGetResult>;
}

export class GoalCommands {
  /** Goal operations this window has sent and not yet seen answered: their notifications are not news. */
  private readonly ownOps = new Set<string>();

  constructor(private readonly host: GoalHost) {}

  private ref(goal: GoalView): GoalRef { return { id: goal.id, revision: goal.revision }; }

  /**
   * A goal write naming the ref we last saw. On `stale-revision` we read the goal again and ask the
   * person (or tell them it no longer applies); we never retry on our own.
   */
  async write<R>(action: GoalActionId, send: (ref: GoalRef) => Promise<R>): Promise<R | undefined> {
    const seen = this.host.session?.goal ?? null;
    if (!seen) throw new DaemonError('This session has no goal: create one first ("DSH: Goal: Create…").', 'no-goal', {});
    return this.ownGoalOp(action, () => this.writeSeen(action, seen, send));
  }

  /** Runs a goal request of this window: its own notification is not announced as news. */
  private async ownGoalOp<R>(op: string, fn: () => Promise<R>): Promise<R> {
    this.ownOps.add(op);
    try { return await fn(); } finally { this.ownOps.delete(op); }
  }

  /** A goal change of this op is this window's own request, still waiting for its answer. */
  isOwn(op: string): boolean { return this.ownOps.has(op); }

  private async writeSeen<R>(action: GoalActionId, seen: GoalView, send: (ref: GoalRef) => Promise<R>): Promise<R | undefined> {
    try {
      return await send(this.ref(seen));
    } catch (e) {
      const err = asDaemonError(e);
      if (err.kind !== 'stale-revision') throw err;
      const fresh = await this.host.req('dsh/goal/get', {});
      const decision = staleDecision(action, fresh, seen);
      if (decision.kind !== 'ask') { void vscode.window.showWarningMessage(decision.message); return undefined; }
      const label = `${action[0].toUpperCase()}${action.slice(1)}`;
      const pick = await vscode.window.showWarningMessage(decision.message, label);
      if (pick !== label) return undefined;
      return send(this.ref(decision.goal));
    }
  }

  /** The round budget a new goal gets when none is given: the workspace's `[goals] maxRounds`. */
  private async defaultRounds(): Promise<number | undefined> {
    const effective = await this.host.readConfig().then((r) => r.effective as { goals?: { maxRounds?: unknown } }).catch(() => undefined);
    const n = effective?.goals?.maxRounds;
    return typeof n === 'number' ? n : undefined;
  }

  async create(a?: { objective?: string; maxRounds?: number; maxTokens?: number }): Promise<GoalView | undefined> {
    await this.host.ensureSession();
    let objective = a?.objective;
    let maxRounds = a?.maxRounds;
    let maxTokens = a?.maxTokens;
    if (objective === undefined) {
      objective = await vscode.window.showInputBox({ title: 'New goal (1/3): objective', prompt: 'What should the agent achieve?', ignoreFocusOut: true, validateInput: (v) => (v.trim() ? undefined : 'The objective cannot be blank') });
      if (objective === undefined) return undefined;
      const fallback = await this.defaultRounds();
      const rounds = await vscode.window.showInputBox({
        title: 'New goal (2/3): round budget',
        prompt: `Rounds the agent may run on its own at most (empty: ${fallback ?? 'the workspace default'}, from .dsh/config.toml)`,
        placeHolder: fallback !== undefined ? String(fallback) : undefined,
        ignoreFocusOut: true, validateInput: (v) => checkMaxRounds(v),
      });
      if (rounds === undefined) return undefined;
      maxRounds = rounds.trim() ? Number(rounds) : undefined;
      const tokens = await vscode.window.showInputBox({
        title: 'New goal (3/3): token budget',
        prompt: 'Tokens the rounds may use at most, e.g. 200000 or 200k (empty: no token budget)',
        ignoreFocusOut: true, validateInput: (v) => checkMaxTokens(v),
      });
      if (tokens === undefined) return undefined;
      maxTokens = parseTokens(tokens);
    }
    const params = { objective, ...(maxRounds !== undefined ? { maxRounds } : {}), ...(maxTokens !== undefined ? { maxTokens } : {}) };
    return this.ownGoalOp('create', () => this.host.req('dsh/goal/create', params));
  }

  /**
   * The round and token budgets of a goal about to start, asked in turn (`title` names what it is
   * for); undefined when the person escaped either box. Empty boxes: the workspace's defaults.
   */
  async askBudgets(title: string): Promise<{ maxRounds?: number; maxTokens?: number } | undefined> {
    const fallback = await this.defaultRounds();
    const rounds = await vscode.window.showInputBox({
      title: `${title} (1/2): round budget`,
      prompt: `Rounds the agent may run on its own at most (empty: ${fallback ?? 'the workspace default'}, from .dsh/config.toml)`,
      placeHolder: fallback !== undefined ? String(fallback) : undefined,
      ignoreFocusOut: true, validateInput: (v) => checkMaxRounds(v),
    });
    if (rounds === undefined) return undefined;
    const tokens = await vscode.window.showInputBox({
      title: `${title} (2/2): token budget`,
      prompt: 'Tokens the rounds may use at most, e.g. 200000 or 200k (empty: no token budget)',
      ignoreFocusOut: true, validateInput: (v) => checkMaxTokens(v),
    });
    if (tokens === undefined) return undefined;
    const maxTokens = parseTokens(tokens);
    return { ...(rounds.trim() ? { maxRounds: Number(rounds) } : {}), ...(maxTokens !== undefined ? { maxTokens } : {}) };
  }

  /**
   * Raise and resume (a goal blocked because it spent its round or token budget): asks for the new
   * budget of what was spent, then edits the goal with it and resumes it, each write naming the ref
   * it read (the resume names the edit's new one). Undefined when the person escaped or the goal
   * changed meanwhile and they chose not to go on.
   */
  async raise(a?: { maxRounds?: number; maxTokens?: number }): Promise<GoalView | undefined> {
    const goal = this.host.session?.goal;
    if (!goal) throw new DaemonError('This session has no goal: create one first ("DSH: Goal: Create…").', 'no-goal', {});
    const spent = spentBudgets(goal);
    let changes: { maxRounds?: number; maxTokens?: number } = { ...a };
    if (a?.maxRounds === undefined && a?.maxTokens === undefined) {
      if (!spent.length) {
        void vscode.window.showInformationMessage(`The goal is ${goal.status.short}: no budget of it is spent, so there is nothing to raise.`);
        return undefined;
      }
      const suggested = raiseSuggestion(goal);
      changes = {};
      if (spent.includes('rounds')) {
        const rounds = await vscode.window.showInputBox({
          title: 'Raise the budget and resume: round budget', value: String(suggested.maxRounds),
          prompt: `All ${goal.maxRounds} rounds were used. The new round budget (more than ${goal.roundsStarted}); the goal resumes with it.`,
          ignoreFocusOut: true, validateInput: (v) => checkMaxRounds(v) ?? (v.trim() && Number(v) > goal.roundsStarted ? undefined : `More than ${goal.roundsStarted}: that many rounds are used`),
        });
        if (rounds === undefined) return undefined;
        changes.maxRounds = Number(rounds.trim());
      }
      if (spent.includes('tokens')) {
        const used = goal.tokensUsed ?? 0;
        const tokens = await vscode.window.showInputBox({
          title: 'Raise the budget and resume: token budget', value: String(suggested.maxTokens),
          prompt: `${used} tokens used of ${goal.maxTokens}. The new token budget, e.g. 400k; the goal resumes with it.`,
          ignoreFocusOut: true, validateInput: (v) => (v.trim() ? checkMaxTokens(v, used) : 'Say the new token budget'),
        });
        if (tokens === undefined) return undefined;
        changes.maxTokens = parseTokens(tokens);
      }
    }
    const edited = await this.write('raise', (ref) => this.host.req('dsh/goal/edit', { ref, ...changes }));
    if (!edited) return undefined;
    return this.ownGoalOp('resume', () => this.host.req('dsh/goal/resume', { ref: this.ref(edited) }));
  }

  async edit(a?: { objective?: string; maxRounds?: number; maxTokens?: number }): Promise<GoalView | undefined> {
    const goal = this.host.session?.goal;
    if (!goal) throw new DaemonError('This session has no goal: create one first ("DSH: Goal: Create…").', 'no-goal', {});
    let changes: { objective?: string; maxRounds?: number; maxTokens?: number } = { ...a };
    if (a?.objective === undefined && a?.maxRounds === undefined && a?.maxTokens === undefined) {
      const objective = await vscode.window.showInputBox({ title: 'Edit goal (1/3): objective', value: goal.objective, ignoreFocusOut: true, validateInput: (v) => (v.trim() ? undefined : 'The objective cannot be blank') });
      if (objective === undefined) return undefined;
      const rounds = await vscode.window.showInputBox({ title: 'Edit goal (2/3): round budget', value: String(goal.maxRounds), ignoreFocusOut: true, validateInput: (v) => checkMaxRounds(v, goal.roundsStarted) });
      if (rounds === undefined) return undefined;
      const used = goal.tokensUsed ?? 0;
      const tokens = await vscode.window.showInputBox({
        title: 'Edit goal (3/3): token budget', value: goal.maxTokens !== undefined ? String(goal.maxTokens) : '',
        prompt: `Tokens the rounds may use at most (${used} used so far; empty: ${goal.maxTokens !== undefined ? 'keep it' : 'no token budget'})`,
        ignoreFocusOut: true, validateInput: (v) => checkMaxTokens(v, used),
      });
      if (tokens === undefined) return undefined;
      changes = {};
      if (objective.trim() !== goal.objective) changes.objective = objective.trim();
      if (rounds.trim() && Number(rounds) !== goal.maxRounds) changes.maxRounds = Number(rounds);
      const maxTokens = parseTokens(tokens);
      if (maxTokens !== undefined && maxTokens !== goal.maxTokens) changes.maxTokens = maxTokens;
      if (!Object.keys(changes).length) return goal;
    }
    return this.write('edit', (ref) => this.host.req('dsh/goal/edit', { ref, ...changes }));
  }

  async block(a?: { code?: string; message?: string }): Promise<GoalView | undefined> {
    let code = a?.code;
    let message = a?.message;
    if (code === undefined || message === undefined) {
      code = await vscode.window.showInputBox({ title: 'Block the goal (1/2): reason code', prompt: 'lowercase-kebab-case', placeHolder: 'needs-decision', ignoreFocusOut: true, validateInput: (v) => checkBlockCode(v.trim()) });
      if (code === undefined) return undefined;
      message = await vscode.window.showInputBox({ title: 'Block the goal (2/2): message', prompt: 'What is in the way?', ignoreFocusOut: true, validateInput: (v) => (v.trim() ? undefined : 'Say what is in the way') });
      if (message === undefined) return undefined;
    }
    const reason = { code: code.trim(), message: message.trim() };
    return this.write('block', (ref) => this.host.req('dsh/goal/block', { ref, reason }));
  }

  async clear(): Promise<GoalClearResult | undefined> {
    return this.write('clear', (ref) => this.host.req('dsh/goal/clear', { ref }));
  }

  /** The status bar's click: the actions the daemon offers for the goal as it is now. */
  async actions(): Promise<void> {
    if (!this.host.session) {
      const pick = await vscode.window.showQuickPick(['$(add) New Session', '$(folder-opened) Open Session…'], { title: 'dsh' });
      if (pick?.includes('New')) await this.host.newSession();
      if (pick?.includes('Open')) await this.host.openSession();
      return;
    }
    const goal = this.host.session.goal;
    const items = goalActionItems(goalActions(goal));
    const picked = await vscode.window.showQuickPick(items, { title: goal ? `Goal: ${goal.objective}` : 'No goal', placeHolder: goal ? `${goal.status.short} · ${goal.status.usage}` : 'Create one' });
    if (picked) await vscode.commands.executeCommand(`dsh.goal.${picked.id}`);
  }
}

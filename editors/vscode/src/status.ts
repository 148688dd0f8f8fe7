// What the status bar shows, as pure functions of what the daemon told us (no vscode import, so
// node's test runner checks them directly).
import { validGoalActions, type GoalActionId } from './goalActions';
import type { GoalChangedParams, GoalView, PlanState } from './protocol';

export interface StatusModel {
  text: string;
  /** Markdown for the tooltip. */
  tooltip: string;
  /** Show in the warning colour (a blocked goal, a daemon that is down). */
  warning: boolean;
  /** Draw attention without alarm (an active goal waiting for the person). */
  hint?: boolean;
}

export type Connection = 'starting' | 'running' | 'stopped' | 'failed';

/**
 * What runs, as the header and the status bar say it: `waiting` while a question to the person is
 * open (a plan review, an approval; also in a goal round), else `working` while a turn runs (a
 * model request or a command), else `idle`. Paused is the goal's own status beside it.
 */
export type Activity = 'waiting' | 'working' | 'idle';

export function activityOf(questionsOpen: number, turnRunning: boolean): Activity {
  return questionsOpen > 0 ? 'waiting' : turnRunning ? 'working' : 'idle';
}

export const ACTIVITY_WORDS: Record<Activity, string> = { waiting: 'waiting for you', working: 'working…', idle: '' };

const GOAL_ICON = '$(target)';

/**
 * A token count as people read it, the same in both editors and the daemon's words: `950`,
 * `12.4k`, `182k`, `1.3M`. Integer arithmetic rounding halves up (no float formatting).
 */
export function formatTokens(n: number): string {
  const tenths = (t: number) => (t % 10 === 0 ? String(Math.floor(t / 10)) : `${Math.floor(t / 10)}.${t % 10}`);
  if (n < 1000) return String(n);
  if (n < 100_000) return `${tenths(Math.floor((n + 50) / 100))}k`;
  const thousands = Math.floor((n + 500) / 1000);
  if (thousands < 1000) return `${thousands}k`;
  return `${tenths(Math.floor((n + 50_000) / 100_000))}M`;
}

/** An active goal that will not run until the person resumes it (after a load or a cancel). */
export function isWaitingForResume(goal: GoalView): boolean {
  return goal.phase === 'active' && goal.activation === 'disarmed';
}

/**
 * The goal's token figures worth showing: once some were counted, or beside a budget (every
 * daemon sends tokensUsed, and `0 tok` for a model that reports no usage says nothing).
 */
export function countedTokens(goal: GoalView): { used: number; max?: number } | undefined {
  const { tokensUsed, maxTokens } = goal;
  return tokensUsed !== undefined && (tokensUsed > 0 || maxTokens !== undefined) ? { used: tokensUsed, max: maxTokens } : undefined;
}

export type Severity = 'none' | 'hint' | 'warning';

/** What a person reads about a goal: the same text, tooltip lines and actions in both editors. */
export interface GoalStatus { text: string; tooltip: string[]; severity: Severity; actions: GoalActionId[] }

/**
 * The goal's status (tests/fixtures/status/goal-status.json is the contract): text without the
 * icon, `3/40 · 12.4k tok · active`; the state is `waiting for you to resume`, `round budget
 * spent`, `blocked: <code>` or the phase. No revision anywhere.
 */
export function goalStatus(goal: GoalView | null): GoalStatus {
  const actions = validGoalActions(goal);
  const actionsLine = `Actions: ${actions.join(', ')}`;
  if (!goal) return { text: 'no goal', tooltip: ['No goal in this session.', actionsLine], severity: 'none', actions };
  const waiting = isWaitingForResume(goal);
  let state: string = goal.phase;
  let sentence: string;
  switch (goal.phase) {
    case 'active':
      if (!waiting) sentence = 'Active: rounds continue on their own.';
      else if (goal.roundsLeft > 0) { state = 'waiting for you to resume'; sentence = 'Active, waiting for you to resume: nothing runs until you do.'; }
      else { state = 'round budget spent'; sentence = 'Active, but its round budget is spent: raise it (edit) to go on.'; }
      break;
    case 'paused': sentence = 'Paused: nothing runs until you resume.'; break;
    case 'blocked':
      state = goal.blockedReason ? `blocked: ${goal.blockedReason.code}` : 'blocked';
      sentence = goal.blockedReason ? `Blocked: ${goal.blockedReason.message} (${goal.blockedReason.code})` : 'Blocked.';
      break;
    case 'complete': sentence = 'Complete.'; break;
  }
  const counted = countedTokens(goal);
  const tokens = !counted ? undefined
    : counted.max === undefined ? `${formatTokens(counted.used)} tok` : `${formatTokens(counted.used)}/${formatTokens(counted.max)} tok`;
  const tooltip = [`Goal: ${goal.objective}`, sentence, `Rounds: ${goal.roundsStarted} of ${goal.maxRounds} used, ${goal.roundsLeft} left`];
  if (counted) tooltip.push(counted.max === undefined ? `Tokens: ${formatTokens(counted.used)} used` : `Tokens: ${formatTokens(counted.used)} of ${formatTokens(counted.max)} used`);
  tooltip.push(actionsLine);
  const severity: Severity = goal.phase === 'blocked' ? 'warning' : waiting ? 'hint' : 'none';
  return { text: [`${goal.roundsStarted}/${goal.maxRounds}`, tokens, state].filter(Boolean).join(' · '), tooltip, severity, actions };
}

/** The status bar's goal text: the icon, then the shared words. */
export function goalStatusText(goal: GoalView | null): string {
  return `${GOAL_ICON} ${goalStatus(goal).text}`;
}

/** Text that must read as text in the markdown tooltip (an objective, a reason): emphasis, code, links and HTML escaped. */
function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_[\]<>|]/g, (c) => `\\${c}`);
}

/** The tooltip as markdown: the shared lines (escaped), the objective in bold, a hint of the click. */
export function goalTooltip(goal: GoalView | null): string {
  const lines = goalStatus(goal).tooltip.map(escapeMarkdown);
  if (goal) lines[0] = `**Goal:** ${escapeMarkdown(goal.objective)}`;
  lines.push(goal ? 'Click for the goal actions.' : 'Click to create one.');
  return lines.join('\n\n');
}

export function statusModel(connection: Connection, hasSession: boolean, goal: GoalView | null): StatusModel {
  if (connection === 'starting') return { text: `${GOAL_ICON} dsh: starting`, tooltip: 'Starting dshd…', warning: false };
  if (connection === 'failed' || connection === 'stopped') {
    return { text: '$(error) dsh: not running', tooltip: 'dshd is not running. Click to restart it.', warning: true };
  }
  if (!hasSession) return { text: `${GOAL_ICON} no session`, tooltip: 'No dsh session open. Click to start or open one.', warning: false };
  const status = goalStatus(goal);
  return { text: `${GOAL_ICON} ${status.text}`, tooltip: goalTooltip(goal), warning: status.severity === 'warning', hint: status.severity === 'hint' };
}

/** Plan mode's state in words: the recorded state, and the choice waiting for the next step if any (`on → off`). */
export function planStateWords(plan: PlanState): string {
  const now = plan.active ? 'on' : 'off';
  if (plan.pending === undefined || plan.pending === plan.active) return now;
  return `${now} → ${plan.pending ? 'on' : 'off'}`;
}

/** The plan-mode item of the status bar. */
export function planStatusText(plan: PlanState): string {
  return `$(checklist) plan: ${planStateWords(plan)}`;
}

export function planTooltip(plan: PlanState): string {
  const base = plan.active ? 'Plan mode is on: the agent plans before it changes files.' : 'Plan mode is off.';
  const pending = plan.pending === undefined || plan.pending === plan.active
    ? '' : ` Turning ${plan.pending ? 'on' : 'off'} at the next step.`;
  return `${base}${pending} Click to turn it ${plan.active ? 'off' : 'on'}.`;
}

/**
 * The goal after a `dsh/goal/changed` notice. Every notice but `clear` carries the whole view; a
 * notice with an older revision than the one we show is out of order and ignored.
 */
export function applyGoalChanged(current: GoalView | null, notice: GoalChangedParams): GoalView | null {
  if (notice.op === 'clear') return null;
  if (!notice.goal) return current;
  if (current && current.id === notice.goal.id && notice.goal.revision < current.revision) return current;
  return notice.goal;
}

// What the status bar shows, as pure functions of what the daemon told us (no vscode import, so
// node's test runner checks them directly).
import type { GoalAction, GoalChangedParams, GoalStatus, GoalView, PlanState } from './protocol';

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

export type Severity = GoalStatus['tone'];

/** With no goal there is nothing the daemon could describe: these are the only words of our own. */
const NO_GOAL: GoalStatus = { text: 'no goal', short: 'no goal', tone: 'none', usage: 'no goal', detail: ['No goal in this session.'] };
const CREATE: GoalAction = { id: 'create', label: 'Create a goal…' };

/**
 * What a person reads about a goal: the daemon's words (`status` of the GoalView), shown as they
 * are. Nothing here recomputes a text, a tone or an allowed action from the goal's fields.
 */
export function goalStatus(goal: GoalView | null): GoalStatus {
  return goal ? goal.status : NO_GOAL;
}

/** The goal actions the daemon accepts now, as it sent them; with no goal, only create. */
export function goalActions(goal: GoalView | null): GoalAction[] {
  return goal ? goal.actions : [CREATE];
}

/** The status bar's goal text: the icon, then the daemon's words. */
export function goalStatusText(goal: GoalView | null): string {
  return `${GOAL_ICON} ${goalStatus(goal).text}`;
}

/** Text that must read as text in the markdown tooltip (an objective, a reason): emphasis, code, links and HTML escaped. */
function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_[\]<>|]/g, (c) => `\\${c}`);
}

/** The tooltip as markdown: the daemon's lines (escaped), the actions it offers, a hint of the click. */
export function goalTooltip(goal: GoalView | null): string {
  const lines = goalStatus(goal).detail.map(escapeMarkdown);
  lines.push(`Actions: ${goalActions(goal).map((a) => escapeMarkdown(a.label)).join(', ')}`);
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
  return { text: `${GOAL_ICON} ${status.text}`, tooltip: goalTooltip(goal), warning: status.tone === 'warning', hint: status.tone === 'hint' };
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

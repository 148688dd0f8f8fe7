// What the status bar shows, as pure functions of what the daemon told us (no vscode import, so
// node's test runner checks them directly).
import type { GoalChangedParams, GoalView, PlanState } from './protocol';

export interface StatusModel {
  text: string;
  /** Markdown for the tooltip. */
  tooltip: string;
  /** Show in the warning colour (a blocked goal, a daemon that is down). */
  warning: boolean;
}

export type Connection = 'starting' | 'running' | 'stopped' | 'failed';

const GOAL_ICON = '$(target)';

/** `$(target) 37/256 · active`; ` · disarmed` when active but nothing will run until resumed. */
export function goalStatusText(goal: GoalView | null): string {
  if (!goal) return `${GOAL_ICON} no goal`;
  const idle = goal.phase === 'active' && goal.activation === 'disarmed' ? ' · disarmed' : '';
  return `${GOAL_ICON} ${goal.roundsStarted}/${goal.maxRounds} · ${goal.phase}${idle}`;
}

function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, (c) => `\\${c}`);
}

export function goalTooltip(goal: GoalView | null): string {
  if (!goal) return 'No goal in this session. Click to create one.';
  const lines = [
    `**Goal:** ${escapeMarkdown(goal.objective)}`,
    '',
    `Phase: **${goal.phase}** · ${goal.activation === 'armed' ? 'armed (rounds continue on their own)' : 'disarmed (nothing runs until you resume)'}`,
    '',
    `Rounds: ${goal.roundsStarted} of ${goal.maxRounds} started, ${goal.roundsLeft} left`,
  ];
  if (goal.blockedReason) {
    lines.push('', `Blocked: \`${goal.blockedReason.code}\`: ${escapeMarkdown(goal.blockedReason.message)}`);
  }
  lines.push('', `Revision ${goal.revision} · click for the goal actions`);
  return lines.join('\n');
}

export function statusModel(connection: Connection, hasSession: boolean, goal: GoalView | null): StatusModel {
  if (connection === 'starting') return { text: `${GOAL_ICON} dsh: starting`, tooltip: 'Starting dshd…', warning: false };
  if (connection === 'failed' || connection === 'stopped') {
    return { text: '$(error) dsh: not running', tooltip: 'dshd is not running. Click to restart it.', warning: true };
  }
  if (!hasSession) return { text: `${GOAL_ICON} no session`, tooltip: 'No dsh session open. Click to start or open one.', warning: false };
  return { text: goalStatusText(goal), tooltip: goalTooltip(goal), warning: goal?.phase === 'blocked' };
}

/** The plan-mode item: the recorded state, and the choice waiting for the next step if any. */
export function planStatusText(plan: PlanState): string {
  const now = plan.active ? 'on' : 'off';
  if (plan.pending === undefined || plan.pending === plan.active) return `$(checklist) plan: ${now}`;
  return `$(checklist) plan: ${now} → ${plan.pending ? 'on' : 'off'}`;
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

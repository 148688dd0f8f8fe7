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

/** The goal's token figures; `tokensUsed`/`maxTokens` arrive with the token budget wire (older daemons omit them). */
type Tokens = { tokensUsed?: number; maxTokens?: number };

/** A token count as people read it (the same in both editors): `950`, `12.4k`, `12k`, `1.25M`. */
export function formatTokens(n: number): string {
  const short = (x: number, unit: string, decimals: number) => `${x.toFixed(decimals).replace(/\.?0+$/, '')}${unit}`;
  if (n < 1000) return String(Math.floor(n));
  if (n < 1_000_000) return short(Math.floor(n / 100) / 10, 'k', 1);
  return short(Math.floor(n / 10_000) / 100, 'M', 2);
}

/** `12.4k tok`, or `12.4k/100k tok` with a budget; undefined when the daemon reports no tokens. */
export function tokenStatusText(goal: GoalView): string | undefined {
  const { tokensUsed, maxTokens } = goal as GoalView & Tokens;
  if (maxTokens !== undefined) return `${formatTokens(tokensUsed ?? 0)}/${formatTokens(maxTokens)} tok`;
  return tokensUsed === undefined ? undefined : `${formatTokens(tokensUsed)} tok`;
}

/** An active goal that will not run until the person resumes it (after a load or a cancel). */
export function isWaitingForResume(goal: GoalView): boolean {
  return goal.phase === 'active' && goal.activation === 'disarmed';
}

/** The phase in a person's words: `waiting for you to resume`, `blocked: <code>`, else the phase. */
function phaseWords(goal: GoalView): string {
  if (isWaitingForResume(goal)) return 'waiting for you to resume';
  if (goal.phase === 'blocked' && goal.blockedReason) return `blocked: ${goal.blockedReason.code}`;
  return goal.phase;
}

/**
 * The goal's status text, the same in both editors: `3/40 · 12.4k tok · active`,
 * `40/40 · blocked: <code>`, `3/40 · waiting for you to resume`, `no goal` (with the icon here).
 */
export function goalStatusText(goal: GoalView | null): string {
  if (!goal) return `${GOAL_ICON} no goal`;
  const parts = [`${goal.roundsStarted}/${goal.maxRounds}`, tokenStatusText(goal), phaseWords(goal)];
  return `${GOAL_ICON} ${parts.filter(Boolean).join(' · ')}`;
}

function escapeMarkdown(text: string): string {
  return text.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, (c) => `\\${c}`);
}

const PHASE_WORDS: Record<GoalView['phase'], (goal: GoalView) => string> = {
  active: (g) => (g.activation === 'armed' ? 'active: rounds continue on their own' : 'active, waiting for you to resume (nothing runs until you do)'),
  paused: () => 'paused: nothing runs until you resume',
  blocked: () => 'blocked: nothing runs until you resume or edit it',
  complete: () => 'complete',
};

export function goalTooltip(goal: GoalView | null): string {
  if (!goal) return 'No goal in this session. Click to create one.';
  const { tokensUsed, maxTokens } = goal as GoalView & Tokens;
  const lines = [
    `**Goal:** ${escapeMarkdown(goal.objective)}`,
    '',
    `Phase: **${PHASE_WORDS[goal.phase](goal)}**`,
    '',
    `Rounds: ${goal.roundsStarted} of ${goal.maxRounds} used, ${goal.roundsLeft} left`,
  ];
  if (tokensUsed !== undefined) {
    const n = (v: number) => v.toLocaleString('en-US');
    lines.push('', maxTokens === undefined ? `Tokens: ${n(tokensUsed)} used` : `Tokens: ${n(tokensUsed)} of ${n(maxTokens)} used`);
  }
  if (goal.blockedReason) {
    lines.push('', `Blocked: \`${goal.blockedReason.code}\`: ${escapeMarkdown(goal.blockedReason.message)}`);
  }
  lines.push('', goal.phase === 'complete' ? 'Click to start a new goal or clear this one.' : 'Click for the goal actions.');
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

// Which goal actions make sense in which phase (G-6), and what to do when a write finds the goal
// changed under it. Pure: shared by the status-bar click, the palette's `when` keys and the tests.
import type { GoalView } from './protocol';

export type GoalActionId = 'create' | 'edit' | 'pause' | 'resume' | 'complete' | 'block' | 'clear';

export const GOAL_ACTION_LABELS: Record<GoalActionId, string> = {
  create: '$(add) Create a goal…',
  edit: '$(edit) Edit the goal…',
  pause: '$(debug-pause) Pause',
  resume: '$(debug-start) Resume',
  complete: '$(pass) Mark complete',
  block: '$(circle-slash) Block…',
  clear: '$(trash) Clear',
};

export const ALL_GOAL_ACTIONS: GoalActionId[] = ['create', 'edit', 'pause', 'resume', 'complete', 'block', 'clear'];

/** The actions the daemon accepts for this goal (anything else is `invalid-transition`). */
export function validGoalActions(goal: GoalView | null): GoalActionId[] {
  if (!goal) return ['create'];
  const roundsLeft = goal.roundsLeft > 0;
  switch (goal.phase) {
    case 'active':
      // Resume on an active goal re-arms it after a load (no durable change); only useful when disarmed.
      return ['edit', 'pause', ...(goal.activation === 'disarmed' && roundsLeft ? ['resume' as const] : []), 'complete', 'block', 'clear'];
    case 'paused':
      return ['edit', ...(roundsLeft ? ['resume' as const] : []), 'complete', 'block', 'clear'];
    case 'blocked':
      return ['edit', ...(roundsLeft ? ['resume' as const] : []), 'complete', 'clear'];
    case 'complete':
      return ['create', 'clear'];
  }
}

export type StaleDecision =
  | { kind: 'gone'; message: string }
  | { kind: 'not-valid'; message: string }
  | { kind: 'ask'; message: string; goal: GoalView };

/**
 * A write came back `stale-revision`: someone (another editor, the model's tools, the budget)
 * changed the goal since we read it. We never retry on our own: we read it again and either tell
 * the person the action no longer applies, or ask whether to apply it to the goal as it is now.
 */
export function staleDecision(action: GoalActionId, fresh: GoalView | null, seen: GoalView | null): StaleDecision {
  if (!fresh) return { kind: 'gone', message: 'The goal was cleared meanwhile; nothing was changed.' };
  if (seen && fresh.id !== seen.id) {
    return { kind: 'gone', message: `The goal was replaced meanwhile by "${fresh.objective}"; nothing was changed.` };
  }
  if (!validGoalActions(fresh).includes(action)) {
    return { kind: 'not-valid', message: `The goal changed meanwhile and is now ${fresh.phase}; "${action}" no longer applies. Nothing was changed.` };
  }
  return {
    kind: 'ask',
    goal: fresh,
    message: `The goal changed meanwhile (now ${fresh.phase}, ${fresh.roundsStarted} of ${fresh.maxRounds} rounds used): "${fresh.objective}". ${action[0].toUpperCase()}${action.slice(1)} it as it is now?`,
  };
}

/** Validation of the block reason's code as G-4 wants it; returns the problem, or undefined. */
export function checkBlockCode(code: string): string | undefined {
  return /^[a-z0-9]+(-[a-z0-9]+)*$/.test(code) ? undefined : 'Use lowercase-kebab-case, e.g. needs-credentials';
}

/** Validation of a rounds budget typed by the person; returns the problem, or undefined. */
export function checkMaxRounds(text: string, roundsStarted = 0): string | undefined {
  if (text.trim() === '') return undefined;
  if (!/^\d+$/.test(text.trim())) return 'A whole number of rounds, e.g. 40';
  const n = Number(text.trim());
  if (n < 1) return 'At least 1 round';
  if (n < roundsStarted) return `At least ${roundsStarted}: that many rounds have already started`;
  return undefined;
}

/** A token budget typed by the person: `200000`, `200k`, `1.5M`; undefined when empty or not one. */
export function parseTokens(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([kKmM]?)$/.exec(text.trim().replace(/[,_ ]/g, ''));
  if (!m) return undefined;
  const n = Math.round(Number(m[1]) * (m[2].toLowerCase() === 'k' ? 1000 : m[2].toLowerCase() === 'm' ? 1_000_000 : 1));
  return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
}

/** Validation of a token budget typed by the person (empty: none); returns the problem, or undefined. */
export function checkMaxTokens(text: string, tokensUsed = 0): string | undefined {
  if (text.trim() === '') return undefined;
  const n = parseTokens(text);
  if (n === undefined) return 'A number of tokens, e.g. 200000 or 200k';
  if (n <= tokensUsed) return `More than ${tokensUsed}: that many tokens are already used`;
  return undefined;
}

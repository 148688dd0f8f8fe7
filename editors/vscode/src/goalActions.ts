// The goal actions as the daemon offers them (each GoalView carries its `actions`: which apply in
// which phase is decided there, never here), and what to do when a write finds the goal changed
// under it. Pure: shared by the status-bar click, the palette's `when` keys and the tests.
import type { GoalAction, GoalView } from './protocol';

/** The daemon's action ids (`raise`: a spent budget raised, then the goal resumed; two writes the client composes). */
export type GoalActionId = GoalAction['id'];

/** The icon each action gets in front of the daemon's label (the icons are this editor's own). */
export const GOAL_ACTION_ICONS: Record<GoalActionId, string> = {
  create: '$(add)',
  edit: '$(edit)',
  pause: '$(debug-pause)',
  resume: '$(debug-start)',
  complete: '$(pass)',
  block: '$(circle-slash)',
  clear: '$(trash)',
  raise: '$(arrow-up)',
};

/** Every goal action there is, for the palette's `when` keys (which of them apply is the daemon's say). */
export const ALL_GOAL_ACTIONS: GoalActionId[] = ['create', 'edit', 'raise', 'pause', 'resume', 'complete', 'block', 'clear'];

/** The budgets a blocked goal spent (its blocked reason's code says which), in the order they are asked. */
export function spentBudgets(goal: GoalView): ('rounds' | 'tokens')[] {
  const code = goal.phase === 'blocked' ? goal.blockedReason?.code : undefined;
  return code === 'round-budget-exhausted' ? ['rounds'] : code === 'token-budget-exhausted' ? ['tokens'] : [];
}

/** What the raise boxes start with: the spent budget once more on top of what is used. */
export function raiseSuggestion(goal: GoalView): { maxRounds: number; maxTokens: number } {
  const rounds = Math.max(goal.maxRounds, goal.roundsStarted) + Math.max(1, goal.maxRounds);
  const budget = goal.maxTokens ?? 0;
  const tokens = Math.max(budget, goal.tokensUsed ?? 0) + Math.max(1000, budget);
  return { maxRounds: rounds, maxTokens: tokens };
}

/** The quick pick's items: the actions the daemon offers, in its order, with their labels. */
export function goalActionItems(actions: GoalAction[]): { label: string; id: GoalActionId }[] {
  return actions.map((a) => ({ label: `${GOAL_ACTION_ICONS[a.id]} ${a.label}`, id: a.id }));
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
  if (!fresh.actions.some((a) => a.id === action)) {
    return { kind: 'not-valid', message: `The goal changed meanwhile and is now ${fresh.status.short}; "${action}" no longer applies. Nothing was changed.` };
  }
  return {
    kind: 'ask',
    goal: fresh,
    message: `The goal changed meanwhile (now ${fresh.status.short}, ${fresh.status.usage}): "${fresh.objective}". ${action[0].toUpperCase()}${action.slice(1)} it as it is now?`,
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

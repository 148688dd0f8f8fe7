// What is worth a notification, as pure functions: the agent blocked the goal (code and message),
// the goal is complete, a budget is spent, a turn ended with an error. The words come from the
// daemon's chat items and the goal view; changes this window made itself are not announced.
import type { ChatItem, GoalChangedParams, GoalView } from './protocol';
import type { WaitingFor } from './contract';
import { turnFailed } from './chat/store';

export interface Notice { severity: 'info' | 'warning' | 'error'; text: string; actions: string[] }

const BUDGET_CODES: Record<string, string> = {
  'round-budget-exhausted': 'round budget',
  'token-budget-exhausted': 'token budget',
};

/** A goal change someone other than this window made (the agent, the budget, another editor). */
export function goalNotice(p: GoalChangedParams, ownChange: boolean): Notice | undefined {
  const goal = p.goal;
  if (ownChange || !goal) return undefined;
  const used = goal.status.usage; // the daemon's words: rounds, and tokens once counted
  if (p.op === 'block' && goal.blockedReason) {
    const { code, message } = goal.blockedReason;
    const budget = BUDGET_CODES[code];
    if (budget) {
      return { severity: 'warning', text: `The goal spent its ${budget} (${used}): ${message}. Raise it and resume to go on.`, actions: ['Raise and Resume…', 'Show Chat'] };
    }
    return { severity: 'warning', text: `The agent blocked the goal "${goal.objective}": ${message} (${code})`, actions: ['Goal Actions…', 'Show Chat'] };
  }
  if (p.op === 'complete') return { severity: 'info', text: `Goal complete: "${goal.objective}" (${used}).`, actions: ['Show Chat'] };
  return undefined;
}

const WAITING_WHAT: Record<WaitingFor, string> = { 'plan-review': 'a plan to review', approval: 'a request to approve' };

/**
 * The goal's round waits for the person (`waitingFor` appeared): said once per waiting spell, by
 * the caller, which knows when the spell began.
 */
export function waitingNotice(goal: GoalView): Notice | undefined {
  const waiting = goal.waitingFor;
  if (!waiting) return undefined;
  return { severity: 'info', text: `The goal "${goal.objective}" is waiting for you: ${WAITING_WHAT[waiting] ?? 'your answer'}.`, actions: ['Show Chat'] };
}

/** A turn that ended with an error: the daemon's words, with the model error's kind and message. */
export function turnNotice(item: ChatItem): Notice | undefined {
  if (item.kind !== 'turn-end') return undefined;
  if (!turnFailed(item)) return undefined;
  return { severity: 'error', text: `dsh: ${item.text}`, actions: ['Show Chat'] };
}

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkBlockCode, checkMaxRounds, goalActionItems, raiseSuggestion, spentBudgets, staleDecision } from '../../src/goalActions';
import { daemonAction, daemonStatus, goalView } from './goalViews';

const goal = goalView;

test('the quick pick offers the daemon\'s actions in its order, with its labels behind our icons', () => {
  const items = goalActionItems([daemonAction('resume', 'Resume'), daemonAction('edit', 'Edit the goal…')]);
  assert.deepEqual(items, [{ id: 'resume', label: '$(debug-start) Resume' }, { id: 'edit', label: '$(edit) Edit the goal…' }]);
  assert.deepEqual(goalActionItems([]), []);
});

test('a stale write asks the person about the goal as it is now, in the daemon\'s words', () => {
  const seen = goal();
  const fresh = goal({ revision: 4, roundsStarted: 5, status: daemonStatus({ short: 'active', usage: '5 of 10 rounds used' }) });
  const d = staleDecision('pause', fresh, seen);
  assert.equal(d.kind, 'ask');
  if (d.kind === 'ask') { assert.equal(d.goal.revision, 4); assert.match(d.message, /now active, 5 of 10 rounds used/); assert.doesNotMatch(d.message, /revision/); assert.match(d.message, /Pause it/); }
});

test('a stale write whose action the daemon no longer offers, or whose goal is gone, changes nothing', () => {
  const seen = goal();
  // Active by its fields, but the daemon offers no pause any more: the editor believes the daemon.
  assert.equal(staleDecision('pause', goal({ revision: 3, actions: [daemonAction('edit')] }), seen).kind, 'not-valid');
  assert.equal(staleDecision('pause', goal({ phase: 'paused', revision: 3, actions: [daemonAction('pause')] }), seen).kind, 'ask');
  assert.equal(staleDecision('pause', null, seen).kind, 'gone');
  assert.equal(staleDecision('pause', goal({ id: 'g-2', revision: 1 }), seen).kind, 'gone');
});

test('input checks', () => {
  assert.equal(checkBlockCode('needs-credentials'), undefined);
  assert.ok(checkBlockCode('Needs Credentials'));
  assert.ok(checkBlockCode('trailing-'));
  assert.equal(checkMaxRounds(''), undefined);
  assert.equal(checkMaxRounds('40'), undefined);
  assert.ok(checkMaxRounds('0'));
  assert.ok(checkMaxRounds('4.5'));
  assert.ok(checkMaxRounds('abc'));
  assert.ok(checkMaxRounds('2', 3));
});

test('raise: which budget a blocked goal spent, and what the boxes suggest (once more on top)', () => {
  const rounds = goal({ phase: 'blocked', maxRounds: 3, roundsStarted: 3, roundsLeft: 0, blockedReason: { code: 'round-budget-exhausted', message: 'all 3 rounds were used' } });
  assert.deepEqual(spentBudgets(rounds), ['rounds']);
  assert.equal(raiseSuggestion(rounds).maxRounds, 6);
  const tokens = goal({ phase: 'blocked', maxTokens: 200_000, tokensUsed: 212_000, blockedReason: { code: 'token-budget-exhausted', message: 'spent' } });
  assert.deepEqual(spentBudgets(tokens), ['tokens']);
  assert.equal(raiseSuggestion(tokens).maxTokens, 412_000);
  assert.deepEqual(spentBudgets(goal({ phase: 'blocked', blockedReason: { code: 'needs-credentials', message: 'x' } })), []);
  assert.deepEqual(spentBudgets(goal({ phase: 'active' })), []);
});

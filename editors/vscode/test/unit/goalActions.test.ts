import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkBlockCode, checkMaxRounds, staleDecision, validGoalActions } from '../../src/goalActions';
import type { GoalView } from '../../src/protocol';

const goal = (over: Partial<GoalView> = {}): GoalView => ({
  id: 'g-1', revision: 2, objective: 'o', phase: 'active', maxRounds: 10, roundsStarted: 3, roundsLeft: 7, tokensUsed: 0,
  createdAt: 'c', updatedAt: 'u', activation: 'armed', ...over,
});

test('actions valid per phase follow the transitions of G-6', () => {
  assert.deepEqual(validGoalActions(null), ['create']);
  assert.deepEqual(validGoalActions(goal()), ['edit', 'pause', 'complete', 'block', 'clear']);
  assert.deepEqual(validGoalActions(goal({ activation: 'disarmed' })), ['edit', 'pause', 'resume', 'complete', 'block', 'clear']);
  assert.deepEqual(validGoalActions(goal({ phase: 'paused', activation: 'disarmed' })), ['edit', 'resume', 'complete', 'block', 'clear']);
  assert.deepEqual(validGoalActions(goal({ phase: 'blocked', activation: 'disarmed' })), ['edit', 'resume', 'complete', 'clear']);
  assert.deepEqual(validGoalActions(goal({ phase: 'complete', activation: 'disarmed' })), ['create', 'clear']);
});

test('resume is offered only with rounds left', () => {
  assert.ok(!validGoalActions(goal({ phase: 'blocked', roundsStarted: 10, roundsLeft: 0 })).includes('resume'));
  assert.ok(!validGoalActions(goal({ phase: 'paused', roundsLeft: 0 })).includes('resume'));
});

test('a stale write asks the person about the goal as it is now', () => {
  const seen = goal();
  const d = staleDecision('pause', goal({ revision: 4, roundsStarted: 5 }), seen);
  assert.equal(d.kind, 'ask');
  if (d.kind === 'ask') { assert.equal(d.goal.revision, 4); assert.match(d.message, /now active, 5 of 10 rounds used/); assert.doesNotMatch(d.message, /revision/); assert.match(d.message, /Pause it/); }
});

test('a stale write whose action no longer applies, or whose goal is gone, changes nothing', () => {
  const seen = goal();
  assert.equal(staleDecision('pause', goal({ phase: 'paused', activation: 'disarmed', revision: 3 }), seen).kind, 'not-valid');
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

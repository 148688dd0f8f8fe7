import assert from 'node:assert/strict';
import { test } from 'node:test';
import { goalNotice, turnNotice, waitingNotice } from '../../src/notices';
import type { ChatItem, GoalView } from '../../src/protocol';
import { daemonStatus, goalView } from './goalViews';

// The usage words are the daemon's (GoalView.status.usage): the notices quote them as they are.
const goal = (over: Partial<GoalView> = {}): GoalView =>
  goalView({ objective: 'Ship retries', maxRounds: 40, roundsStarted: 12, roundsLeft: 28, activation: 'disarmed', status: daemonStatus({ usage: '12 of 40 rounds used' }), ...over });
const base = { agentId: 'a-1', sessionId: 's-1', revision: 4 };

test('the agent blocking the goal is announced with its code and message', () => {
  const n = goalNotice({ ...base, op: 'block', goal: goal({ phase: 'blocked', blockedReason: { code: 'dependency-conflict', message: 'urllib3 2.x conflicts' } }) }, false);
  assert.equal(n?.severity, 'warning');
  assert.equal(n?.text, 'The agent blocked the goal "Ship retries": urllib3 2.x conflicts (dependency-conflict)');
});

test('a spent budget says which budget and how to go on', () => {
  const rounds = goalNotice({ ...base, op: 'block', goal: goal({ phase: 'blocked', roundsStarted: 40, roundsLeft: 0, status: daemonStatus({ usage: '40 of 40 rounds used' }), blockedReason: { code: 'round-budget-exhausted', message: 'all 40 rounds were used' } }) }, false);
  assert.match(rounds!.text, /^The goal spent its round budget \(40 of 40 rounds used\): all 40 rounds were used\. Raise it/);
  assert.deepEqual(rounds!.actions, ['Raise and Resume…', 'Show Chat']);
  const tokens = goalNotice({ ...base, op: 'block', goal: goal({ phase: 'blocked', tokensUsed: 1_260_000, maxTokens: 1_000_000, status: daemonStatus({ usage: '12 of 40 rounds used, 1.3M of 1M tokens' }), blockedReason: { code: 'token-budget-exhausted', message: '1,260,000 tokens used of 1,000,000' } }) }, false);
  assert.match(tokens!.text, /token budget \(12 of 40 rounds used, 1\.3M of 1M tokens\)/);
});

test('completion is good news; the person\'s own changes and other ops say nothing', () => {
  assert.equal(goalNotice({ ...base, op: 'complete', goal: goal({ phase: 'complete' }) }, false)?.text, 'Goal complete: "Ship retries" (12 of 40 rounds used).');
  assert.equal(goalNotice({ ...base, op: 'block', goal: goal({ phase: 'blocked', blockedReason: { code: 'x', message: 'y' } }) }, true), undefined);
  for (const op of ['create', 'edit', 'pause', 'resume', 'round', 'arm', 'disarm'] as const) assert.equal(goalNotice({ ...base, op, goal: goal() }, false), undefined, op);
  assert.equal(goalNotice({ ...base, op: 'clear' }, false), undefined);
});

test('a turn that ends with a model error is told with the daemon\'s words; a normal end is not', () => {
  const failed: ChatItem = { kind: 'turn-end', id: 'turn-end-4', seq: 9, at: 'x', turn: 4, stopReason: 'model-error', error: { kind: 'rate-limit', message: 'slow down' }, text: 'Turn 4 stopped: model error (rate limited): slow down' };
  assert.deepEqual(turnNotice(failed), { severity: 'error', text: 'dsh: Turn 4 stopped: model error (rate limited): slow down', actions: ['Show Chat'] });
  assert.equal(turnNotice({ ...failed, stopReason: 'end-turn', error: undefined, text: 'Turn 4 finished' } as ChatItem), undefined);
  assert.equal(turnNotice({ kind: 'plan-mode', id: 'p', seq: 1, at: 'x', active: true, text: 'Plan mode on' }), undefined);
});

test('a goal waiting for the person says what it waits for; one not waiting says nothing', () => {
  const waiting = (w: string) => waitingNotice({ ...goal(), waitingFor: w } as GoalView);
  assert.equal(waiting('plan-review')?.text, 'The goal "Ship retries" is waiting for you: a plan to review.');
  assert.equal(waiting('approval')?.text, 'The goal "Ship retries" is waiting for you: a request to approve.');
  assert.deepEqual(waiting('approval')?.actions, ['Show Chat']);
  assert.equal(waitingNotice(goal()), undefined);
});

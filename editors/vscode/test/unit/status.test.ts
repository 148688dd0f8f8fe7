import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GoalView } from '../../src/protocol';
import { applyGoalChanged, formatTokens, goalStatusText, goalTooltip, planStatusText, statusModel } from '../../src/status';

const goal = (over: Partial<GoalView> = {}): GoalView => ({
  id: 'g-1', revision: 3, objective: 'Ship the parser', phase: 'active', maxRounds: 256, roundsStarted: 37,
  roundsLeft: 219, createdAt: '2026-11-29T18:00:00.000Z', updatedAt: '2026-11-29T18:40:00.000Z', activation: 'armed', ...over,
});

test('goal text is rounds/max · phase with the target icon', () => {
  assert.equal(goalStatusText(goal()), '$(target) 37/256 · active');
  assert.equal(goalStatusText(goal({ roundsStarted: 0, maxRounds: 40 })), '$(target) 0/40 · active');
  assert.equal(goalStatusText(goal({ phase: 'paused', activation: 'disarmed' })), '$(target) 37/256 · paused');
});

test('an active goal that is not armed says it waits for the person', () => {
  assert.equal(goalStatusText(goal({ activation: 'disarmed' })), '$(target) 37/256 · waiting for you to resume');
  assert.match(goalTooltip(goal({ activation: 'disarmed' })), /waiting for you to resume/);
  assert.doesNotMatch(goalTooltip(goal({ activation: 'disarmed' })), /disarmed/);
});

test('tokens used sit next to the rounds, with the budget when there is one', () => {
  assert.equal(goalStatusText({ ...goal({ roundsStarted: 3, maxRounds: 40 }), tokensUsed: 12_400 } as never), '$(target) 3/40 · 12.4k tok · active');
  assert.equal(goalStatusText({ ...goal({ roundsStarted: 3, maxRounds: 40 }), tokensUsed: 12_400, maxTokens: 100_000 } as never), '$(target) 3/40 · 12.4k/100k tok · active');
  assert.match(goalTooltip({ ...goal(), tokensUsed: 12_400, maxTokens: 100_000 } as never), /Tokens: 12,400 of 100,000 used/);
  assert.deepEqual([0, 950, 999, 1000, 12_000, 12_400, 12_449, 120_000, 999_999, 1_000_000, 1_250_000, 1_259_999].map(formatTokens),
    ['0', '950', '999', '1k', '12k', '12.4k', '12.4k', '120k', '999.9k', '1M', '1.25M', '1.25M']);
});

test('status words: rounds used, no raw revision, a complete goal offers no resume', () => {
  const t = goalTooltip(goal({ roundsStarted: 3, maxRounds: 40, roundsLeft: 37 }));
  assert.match(t, /Rounds: 3 of 40 used, 37 left/);
  assert.doesNotMatch(t, /[Rr]evision/);
  const done = goalTooltip(goal({ phase: 'complete', activation: 'disarmed' }));
  assert.doesNotMatch(done, /resume/i);
  assert.doesNotMatch(goalStatusText(goal({ phase: 'complete', activation: 'disarmed' })), /waiting/);
});

test('no goal and no session read as such', () => {
  assert.equal(goalStatusText(null), '$(target) no goal');
  assert.equal(statusModel('running', false, null).text, '$(target) no session');
  assert.equal(statusModel('running', true, null).text, '$(target) no goal');
});

test('blocked is the warning colour, with the reason and objective in the tooltip', () => {
  const blocked = goal({ phase: 'blocked', activation: 'disarmed', blockedReason: { code: 'round-budget-exhausted', message: 'All 256 rounds used' } });
  const m = statusModel('running', true, blocked);
  assert.equal(m.warning, true);
  assert.equal(m.text, '$(target) 37/256 · blocked: round-budget-exhausted');
  assert.match(m.tooltip, /Ship the parser/);
  assert.match(m.tooltip, /`round-budget-exhausted`: All 256 rounds used/);
  assert.equal(statusModel('running', true, goal()).warning, false);
});

test('tooltip escapes markdown in the objective', () => {
  assert.match(goalTooltip(goal({ objective: 'fix *all* [links]' })), /fix \\\*all\\\* \\\[links\\\]/);
});

test('a daemon that is down is a warning with a restart hint', () => {
  const m = statusModel('stopped', false, null);
  assert.equal(m.warning, true);
  assert.match(m.text, /not running/);
  assert.match(statusModel('failed', true, goal()).tooltip, /restart/);
});

test('plan item shows the recorded state and a pending choice', () => {
  assert.equal(planStatusText({ active: true }), '$(checklist) plan: on');
  assert.equal(planStatusText({ active: false }), '$(checklist) plan: off');
  assert.equal(planStatusText({ active: true, pending: false }), '$(checklist) plan: on → off');
  assert.equal(planStatusText({ active: true, pending: true }), '$(checklist) plan: on');
});

test('goal/changed notices drive the goal alone', () => {
  const base = { agentId: 'a', sessionId: 's' };
  let g = applyGoalChanged(null, { ...base, op: 'create', revision: 1, goal: goal({ revision: 1, roundsStarted: 0 }) });
  assert.equal(g?.roundsStarted, 0);
  g = applyGoalChanged(g, { ...base, op: 'round', revision: 1, goal: goal({ revision: 1, roundsStarted: 1 }) });
  assert.equal(g?.roundsStarted, 1);
  // An older revision of the same goal arriving late does not win.
  assert.equal(applyGoalChanged(goal({ revision: 5 }), { ...base, op: 'edit', revision: 4, goal: goal({ revision: 4 }) })?.revision, 5);
  assert.equal(applyGoalChanged(g, { ...base, op: 'clear', revision: 2 }), null);
  // A new goal (new id) replaces even with a lower revision.
  assert.equal(applyGoalChanged(goal({ revision: 9 }), { ...base, op: 'create', revision: 1, goal: goal({ id: 'g-2', revision: 1 }) })?.id, 'g-2');
});

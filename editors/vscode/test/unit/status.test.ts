import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GoalView } from '../../src/protocol';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { applyGoalChanged, formatTokens, goalStatus, goalStatusText, goalTooltip, planStatusText, statusModel, type GoalStatus } from '../../src/status';

const goal = (over: Partial<GoalView> = {}): GoalView => ({
  id: 'g-1', revision: 3, objective: 'Ship the parser', phase: 'active', maxRounds: 256, roundsStarted: 37,
  roundsLeft: 219, tokensUsed: 0, createdAt: '2026-11-29T18:00:00.000Z', updatedAt: '2026-11-29T18:40:00.000Z', activation: 'armed', ...over,
});

const REPO = path.resolve(__dirname, '../../../..');
const STATUS_FIXTURE = JSON.parse(fs.readFileSync(path.join(REPO, 'tests/fixtures/status/goal-status.json'), 'utf8')) as {
  cases: { name: string; goal: GoalView | null; expect: GoalStatus }[];
};

test('goal status is the shared fixture\'s: text, tooltip lines, severity and actions (the same words in Neovim)', () => {
  assert.ok(STATUS_FIXTURE.cases.length >= 8);
  for (const c of STATUS_FIXTURE.cases) assert.deepEqual(goalStatus(c.goal), c.expect, c.name);
});

test('the status bar puts the icon in front of the shared text; hint and warning colours follow the severity', () => {
  assert.equal(goalStatusText(goal()), '$(target) 37/256 · active');
  const waiting = statusModel('running', true, goal({ activation: 'disarmed' }));
  assert.equal(waiting.text, '$(target) 37/256 · waiting for you to resume');
  assert.equal(waiting.hint, true);
  assert.equal(waiting.warning, false);
});

test('token counts round halves up with integer arithmetic', () => {
  assert.deepEqual([0, 950, 999, 1000, 1049, 1050, 12_400, 99_949, 99_950, 182_000, 999_499, 999_500, 1_260_000].map(formatTokens),
    ['0', '950', '999', '1k', '1k', '1.1k', '12.4k', '99.9k', '100k', '182k', '999k', '1M', '1.3M']);
});

test('the tooltip is markdown of the shared lines, with no revision and no resume for a complete goal', () => {
  const t = goalTooltip(goal({ roundsStarted: 3, maxRounds: 40, roundsLeft: 37 }));
  assert.match(t, /Rounds: 3 of 40 used, 37 left/);
  assert.doesNotMatch(t, /[Rr]evision/);
  assert.doesNotMatch(goalTooltip(goal({ phase: 'complete', activation: 'disarmed' })), /resume/i);
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
  assert.ok(m.tooltip.includes('Blocked: All 256 rounds used (round-budget-exhausted)'), m.tooltip);
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

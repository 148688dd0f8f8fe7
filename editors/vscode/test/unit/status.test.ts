import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyGoalChanged, goalActions, goalStatus, goalStatusText, goalTooltip, planStatusText, statusModel } from '../../src/status';
import { daemonAction, daemonStatus, goalView as goal } from './goalViews';

test('the status bar shows the daemon\'s status text behind the icon, whatever the goal\'s fields say', () => {
  // Fields that would read "37/256 · active" by any formula; the daemon's words win.
  assert.equal(goalStatusText(goal()), '$(target) the daemon’s status line');
  assert.equal(statusModel('running', true, goal({ status: daemonStatus({ text: '1/2 · x' }) })).text, '$(target) 1/2 · x');
  assert.deepEqual(goalStatus(goal({ status: daemonStatus({ short: 'odd' }) })).short, 'odd');
});

test('the colour follows the daemon\'s tone, not the phase', () => {
  const hint = statusModel('running', true, goal({ status: daemonStatus({ tone: 'hint' }) }));
  assert.equal(hint.hint, true);
  assert.equal(hint.warning, false);
  // Blocked by the fields, but the daemon says "none": no warning colour.
  const calm = statusModel('running', true, goal({ phase: 'blocked', blockedReason: { code: 'x', message: 'y' } }));
  assert.equal(calm.warning, false);
  assert.equal(calm.hint, false);
  assert.equal(statusModel('running', true, goal({ status: daemonStatus({ tone: 'warning' }) })).warning, true);
});

test('the tooltip is markdown of the daemon\'s lines and action labels, escaped', () => {
  const t = goalTooltip(goal({ status: daemonStatus({ detail: ['Goal: fix *all* [links]', 'Rounds: 3 of 40 used'] }), actions: [daemonAction('resume', 'Go *on*')] }));
  assert.match(t, /Goal: fix \\\*all\\\* \\\[links\\\]/);
  assert.match(t, /Rounds: 3 of 40 used/);
  assert.match(t, /Actions: Go \\\*on\\\*/);
  assert.doesNotMatch(t, /Pause|pause/); // no action the daemon did not send
});

test('the actions are the daemon\'s, in its order; with no goal only create', () => {
  assert.deepEqual(goalActions(goal({ actions: [daemonAction('clear'), daemonAction('resume')] })).map((a) => a.id), ['clear', 'resume']);
  // A complete goal by its fields, yet the daemon offers pause: pause is what the editor offers.
  assert.deepEqual(goalActions(goal({ phase: 'complete', actions: [daemonAction('pause')] })).map((a) => a.id), ['pause']);
  assert.deepEqual(goalActions(null).map((a) => a.id), ['create']);
});

test('no goal and no session read as such', () => {
  assert.equal(goalStatusText(null), '$(target) no goal');
  assert.equal(statusModel('running', false, null).text, '$(target) no session');
  assert.equal(statusModel('running', true, null).text, '$(target) no goal');
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

test('goal/changed notices drive the goal alone, words included', () => {
  const base = { agentId: 'a', sessionId: 's' };
  let g = applyGoalChanged(null, { ...base, op: 'create', revision: 1, goal: goal({ revision: 1, roundsStarted: 0 }) });
  assert.equal(g?.roundsStarted, 0);
  g = applyGoalChanged(g, { ...base, op: 'round', revision: 1, goal: goal({ revision: 1, roundsStarted: 1, status: daemonStatus({ text: 'round one' }) }) });
  assert.equal(goalStatusText(g), '$(target) round one');
  // An older revision of the same goal arriving late does not win.
  assert.equal(applyGoalChanged(goal({ revision: 5 }), { ...base, op: 'edit', revision: 4, goal: goal({ revision: 4 }) })?.revision, 5);
  assert.equal(applyGoalChanged(g, { ...base, op: 'clear', revision: 2 }), null);
  // A new goal (new id) replaces even with a lower revision.
  assert.equal(applyGoalChanged(goal({ revision: 9 }), { ...base, op: 'create', revision: 1, goal: goal({ id: 'g-2', revision: 1 }) })?.id, 'g-2');
});

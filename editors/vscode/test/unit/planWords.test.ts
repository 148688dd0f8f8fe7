import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PlanRecord } from '../../src/contract';
import { durationWords, goalObjectiveFor, pastPlanFileName, planPickItems, planVerdict, previousNotes } from '../../src/planWords';

const NOW = Date.parse('2026-12-01T21:00:00Z');
const plan = (over: Partial<PlanRecord>): PlanRecord => ({
  callId: 'c-1', seq: 4, title: 'Plan: retries', markdown: '# Plan: retries\n\n1. Add a RetryPolicy.\n2. Retry on every exception.\n',
  outcome: 'revise', at: '2026-12-01T20:50:00Z', ...over,
});

test('the picker lists plans newest first, each with its outcome, what it got, and when', () => {
  const plans = [
    plan({ feedback: 'Cap the backoff.', comments: [{ line: 4, text: 'Never retry a 404.' }] }),
    plan({ callId: 'c-2', seq: 9, title: 'Plan: retries (revised)', outcome: 'approved', at: '2026-12-01T20:58:00Z' }),
    plan({ callId: 'c-3', seq: 20, title: 'Plan: docs', outcome: 'pending', at: '2026-12-01T21:00:00Z' }),
  ];
  const items = planPickItems(plans, NOW);
  assert.deepEqual(items.map((i) => i.index), [2, 1, 0]);
  assert.deepEqual(items.map((i) => i.label), ['$(bell) Plan: docs', '$(pass) Plan: retries (revised)', '$(reply) Plan: retries']);
  assert.equal(items[2].description, 'sent back · 1 comment · feedback · 10 minutes ago');
  assert.equal(items[2].detail, 'Feedback: Cap the backoff.');
  assert.equal(items[1].description, 'approved · 2 minutes ago');
  assert.equal(items[1].detail, 'Plan 2 of 3: opens with its changes since the one before');
  assert.equal(items[0].description, 'under review now · just now');
  assert.equal(planVerdict({ outcome: 'failed' }), 'not reviewed');
});

test('a past plan\'s document is named after it, its place and its outcome (no path characters)', () => {
  assert.equal(pastPlanFileName(plan({ title: 'Plan: a/b' }), 0), 'Plan a b (1, sent back).md');
});

test('the goal a plan starts names the plan', () => {
  assert.equal(goalObjectiveFor(' Plan: retries (revised) '), 'Carry out the approved plan "Plan: retries (revised)"');
});

test('what was asked last round: feedback, and each comment with the line it was on, in line order', () => {
  const notes = previousNotes({
    callId: 'c-1', title: 'Plan: retries', markdown: '# Plan: retries\n\n1. Add a RetryPolicy.\n2. Retry on every exception.\n',
    feedback: '  Cap the backoff. ', comments: [{ line: 4, text: 'Never retry a 404.' }, { line: 3, text: 'Name it RetryPolicy?' }, { line: 40, text: 'past the end' }],
  });
  assert.equal(notes.feedback, 'Cap the backoff.');
  assert.deepEqual(notes.comments, [
    { line: 3, text: 'Name it RetryPolicy?', quote: '1. Add a RetryPolicy.' },
    { line: 4, text: 'Never retry a 404.', quote: '2. Retry on every exception.' },
    { line: 40, text: 'past the end', quote: '' },
  ]);
  assert.equal(previousNotes({ callId: 'c', title: 't', markdown: 'm', feedback: '  ' }).feedback, undefined);
});

test('durations as people say them', () => {
  assert.deepEqual([850, 12_400, 185_000, 3_600_000, 7_380_000].map(durationWords), ['850 ms', '12 s', '3 min 5 s', '1 h 0 min', '2 h 3 min']);
});

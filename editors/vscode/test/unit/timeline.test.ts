import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GoalRoundRecord } from '../../src/contract';
import { outcomeClass, timelineLayout, timelineSummary, tokenWords, usageTitle, WAIT_LANE } from '../../src/chat/timeline';

const round = (n: number, over: Partial<GoalRoundRecord> = {}): GoalRoundRecord => ({
  round: n, revision: 1, turn: n + 1, startedAt: '2026-12-01T21:00:00Z', endedAt: '2026-12-01T21:00:14Z',
  tokens: { input: 1000, cachedInput: 0, output: 100 }, toolCalls: 1, waitedMs: 0, outcome: 'end-turn', ...over,
});

test('one bar per round; the tallest round fills the chart; cached input, input and output stack from the bottom', () => {
  const rounds = [round(1, { tokens: { input: 2000, cachedInput: 1500, output: 200 } }), round(2), round(3, { outcome: 'running', endedAt: undefined, tokens: { input: 0, cachedInput: 0, output: 0 } })];
  const l = timelineLayout(rounds, 300, 46);
  assert.equal(l.bars.length, 3);
  const [first, second, third] = l.bars;
  assert.deepEqual(first.segments.map((s) => s.kind), ['cached', 'input', 'output']);
  const top = Math.min(...first.segments.map((s) => s.y));
  assert.ok(Math.abs(top - (WAIT_LANE + 1)) < 1e-9, `the tallest bar reaches the wait lane: ${top}`);
  assert.ok(Math.abs(first.segments[0].y + first.segments[0].height - 46) < 1e-9, 'the bars stand on the bottom');
  const height = (b: typeof first) => b.segments.reduce((n, s) => n + s.height, 0);
  assert.ok(Math.abs(height(second) / height(first) - 1100 / 2200) < 0.01);
  assert.ok(second.x > first.x + first.width - 1e-9, 'bars do not overlap');
  assert.equal(third.outcome, 'running');
  assert.equal(height(third), 1, 'a round with nothing used yet still shows');
  assert.ok(third.x + third.width <= 300);
});

test('256 rounds fit the width; a round that waited has its mark; the tooltip says it all', () => {
  const rounds = Array.from({ length: 256 }, (_, i) => round(i + 1, { waitedMs: i === 7 ? 12_000 : 0 }));
  const l = timelineLayout(rounds, 320, 46);
  const last = l.bars[255];
  assert.ok(last.x + last.width <= 320 + 1e-9, `${last.x + last.width}`);
  assert.deepEqual(l.bars.filter((b) => b.waited).map((b) => b.round), [8]);
  assert.equal(l.bars[7].title, 'Round 8: 1k in · 100 out · 1 tool call · waited for you 12 s · ended: end-turn after 14 s');
});

test('outcomes, token words and the summary line (estimates marked ~)', () => {
  assert.deepEqual(['end-turn', 'running', 'cancelled', 'model-error', 'max-steps'].map(outcomeClass), ['ok', 'running', 'cancelled', 'error', 'other']);
  assert.deepEqual([950, 12_345, 1_250_000, 250_000].map((n) => tokenWords(n)), ['950', '12.3k', '1.3M', '250k']);
  assert.equal(tokenWords(12_000, true), '~12k');
  assert.equal(timelineSummary([]), 'no rounds yet');
  assert.equal(timelineSummary([round(1, { tokens: { input: 8000, cachedInput: 6000, output: 400 }, waitedMs: 63_000 }), round(2)]),
    '2 rounds · 9.5k tokens (6k cached) · waited for you 1 min 3 s');
  assert.equal(timelineSummary([round(1, { estimated: true })]), '1 round · ~1.1k tokens');
  assert.equal(timelineLayout([round(1, { estimated: true })], 100, 40).estimated, true);
});

test('a reply\'s usage tooltip names cached input and estimates', () => {
  assert.equal(usageTitle({ inputTokens: 1400, outputTokens: 60 }), '1400 tokens in, 60 out');
  assert.equal(usageTitle({ inputTokens: 1400, outputTokens: 60, cachedInputTokens: 1200 }), '1400 tokens in (1200 from the server\'s prompt cache), 60 out');
  assert.match(usageTitle({ inputTokens: 300, outputTokens: 20, estimated: true }), /^about 300 tokens in, about 20 out \(estimated/);
});

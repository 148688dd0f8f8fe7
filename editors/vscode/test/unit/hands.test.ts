import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkMaxTokens, parseTokens } from '../../src/goalActions';
import { planFileName } from '../../src/reviewWords';
import { ACTIVITY_WORDS, activityOf } from '../../src/status';

test('what runs, in words: a question open is "waiting for you" even while a turn runs; else "working…"; else nothing', () => {
  assert.equal(activityOf(1, true), 'waiting');
  assert.equal(activityOf(2, false), 'waiting');
  assert.equal(activityOf(0, true), 'working');
  assert.equal(activityOf(0, false), 'idle');
  assert.deepEqual(ACTIVITY_WORDS, { waiting: 'waiting for you', working: 'working…', idle: '' });
});

test('a token budget as a person types it', () => {
  assert.equal(parseTokens('200000'), 200000);
  assert.equal(parseTokens('200k'), 200000);
  assert.equal(parseTokens('1.5M'), 1500000);
  assert.equal(parseTokens('50 000'), 50000);
  assert.equal(parseTokens(''), undefined);
  assert.equal(parseTokens('lots'), undefined);
  assert.equal(parseTokens('0'), undefined);
  assert.equal(checkMaxTokens(''), undefined);
  assert.equal(checkMaxTokens('50k'), undefined);
  assert.match(checkMaxTokens('lots')!, /e\.g\. 200000 or 200k/);
  assert.match(checkMaxTokens('1k', 5000)!, /More than 5000/);
});

test('the two tabs of a plan are named after it, as file names', () => {
  assert.equal(planFileName('Plan: retries (revised)'), 'Plan retries (revised)');
  assert.equal(planFileName('a/b\\c'), 'a b c');
  assert.equal(planFileName('   '), 'Plan');
  assert.equal(planFileName('x'.repeat(80)).length, 60);
});

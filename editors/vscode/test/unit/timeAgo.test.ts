import assert from 'node:assert/strict';
import { test } from 'node:test';
import { timeAgo } from '../../src/timeAgo';

test('a session\'s last change as people say it', () => {
  const now = Date.parse('2026-11-30T15:00:00.000Z');
  const at = (secondsBefore: number) => new Date(now - secondsBefore * 1000).toISOString();
  assert.equal(timeAgo(at(10), now), 'just now');
  assert.equal(timeAgo(at(60), now), '1 minute ago');
  assert.equal(timeAgo(at(47 * 60), now), '47 minutes ago');
  assert.equal(timeAgo(at(3 * 3600), now), '3 hours ago');
  assert.equal(timeAgo(at(2 * 86400), now), '2 days ago');
  assert.equal(timeAgo('2026-01-02T03:04:05.000Z', now), '2026-01-02');
  assert.equal(timeAgo('not a time', now), 'not a time');
});

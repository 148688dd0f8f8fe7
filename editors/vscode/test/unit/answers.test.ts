import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildAnswer, buildResult, wireComments } from '../../src/answers';

test('approve is exactly one clean approval', () => {
  assert.deepEqual(buildAnswer('q1', { kind: 'approve' }), { id: 'q1', choice: 'approve' });
});

test('keep planning carries the feedback and the line comments, 1-based, in line order', () => {
  const a = buildAnswer('q1', { kind: 'revise', feedback: '  Split step 2.  ', comments: [{ line: 4, body: 'why here?' }, { line: 0, body: 'rename' }] });
  assert.deepEqual(a, { id: 'q1', choice: 'revise', feedback: 'Split step 2.', comments: [{ line: 1, text: 'rename' }, { line: 5, text: 'why here?' }] });
});

test('blank feedback and blank comments are left out', () => {
  assert.deepEqual(buildAnswer('q1', { kind: 'revise', feedback: ' ', comments: [{ line: 2, body: '  ' }] }), { id: 'q1', choice: 'revise' });
  assert.deepEqual(wireComments([]), []);
});

test('a dismissed review (closed, withdrawn, daemon lost) answers nothing: never an approval', () => {
  assert.equal(buildAnswer('q1', { kind: 'dismissed' }), undefined);
  assert.deepEqual(buildResult([{ questionId: 'q1', outcome: { kind: 'dismissed' } }]), { answers: [] });
  assert.deepEqual(buildResult([
    { questionId: 'q1', outcome: { kind: 'approve' } }, { questionId: 'q2', outcome: { kind: 'dismissed' } },
  ]), { answers: [{ id: 'q1', choice: 'approve' }] });
});

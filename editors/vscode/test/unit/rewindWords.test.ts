import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkpointPlace, confirmWords, doneWords, fileLine, overwriteWords, rewindSides } from '../../src/rewindWords';
import type { CheckpointFileRestore } from '../../src/protocol';

// As dsh/checkpoint/diff sends them: git's patches from the workspace now to the checkpoint.
const MODIFIED: CheckpointFileRestore = {
  path: 'app.py', status: 'modified', binary: false, changedByPerson: false,
  diff: 'diff --git a/app.py b/app.py\nindex 2641db4..223ca50 100644\n--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 3\n+b = 2\n',
};
const DELETED: CheckpointFileRestore = {
  path: 'new.txt', status: 'deleted', binary: false, changedByPerson: true,
  diff: 'diff --git a/new.txt b/new.txt\ndeleted file mode 100644\nindex 587be6b..0000000\n--- a/new.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n',
};
const ADDED: CheckpointFileRestore = {
  path: 'notes.md', status: 'added', binary: false, changedByPerson: false,
  diff: 'diff --git a/notes.md b/notes.md\nnew file mode 100644\nindex 0000000..bfa6551\n--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+notes\n',
};

test('a modified file: now on the left, the diff applied on the right', () => {
  assert.deepEqual(rewindSides(MODIFIED, 'a = 1\nb = 3\n'), { now: 'a = 1\nb = 3\n', after: 'a = 1\nb = 2\n' });
});

test('a file the rewind deletes is empty on the right; one it brings back is empty on the left', () => {
  assert.deepEqual(rewindSides(DELETED, 'x\n'), { now: 'x\n', after: '' });
  assert.deepEqual(rewindSides(ADDED, undefined), { now: '', after: 'notes\n' });
});

test('a diff that does not apply to the file as it is shows the diff itself; binary and too-large files say so', () => {
  const sides = rewindSides(MODIFIED, 'a = 1\nb = 99\n');
  assert.equal(sides.now, 'a = 1\nb = 99\n');
  assert.ok(sides.after.startsWith('(the change does not apply to the file as it is now; the diff:)'), sides.after);
  assert.ok(sides.after.includes('+b = 2'));
  assert.deepEqual(rewindSides({ ...MODIFIED, diff: 'not a diff' }, 'a = 1\nb = 3\n').now, 'a = 1\nb = 3\n');
  assert.ok(rewindSides({ ...MODIFIED, diff: undefined }, 'x').after.includes('too large'));
  assert.deepEqual(rewindSides({ path: 'logo.png', status: 'modified', binary: true, changedByPerson: false }, undefined),
    { now: '(a binary file: not shown)', after: '(a binary file: it goes back as it was)' });
});

test('the confirmation lists every file, marks the person\'s, and says a conversation rewind starts a new session', () => {
  const place = checkpointPlace(14, { seq: 14, turn: 2, step: 1, at: '2026-12-02T01:00:00.000Z', files: ['app.py'] });
  assert.equal(place, 'turn 2, step 1');
  assert.equal(checkpointPlace(14, undefined), 'checkpoint 14');
  const words = confirmWords(place, [MODIFIED, DELETED, ADDED]);
  assert.equal(words.message, 'Rewind to before turn 2, step 1?');
  const lines = words.detail.split('\n');
  assert.equal(lines[0], '3 files change (the diff editor shows each now and after the rewind):');
  assert.deepEqual(lines.slice(1, 4), [
    '• app.py: goes back as it was',
    '• new.txt: is deleted (it did not exist then) · CHANGED BY YOU since',
    '• notes.md: comes back (it was deleted since)',
  ]);
  assert.ok(words.detail.includes('One of them was changed by you since the agent\'s last step: you will be asked again'));
  assert.ok(words.detail.endsWith('Rewinding the conversation too starts a new session from that point (this one stays as it is).'));
  assert.ok(!confirmWords(place, [MODIFIED]).detail.includes('changed by you'));
  assert.ok(confirmWords(place, []).detail.startsWith('No file differs from then'));
  const many = Array.from({ length: 20 }, (_, i) => ({ ...MODIFIED, path: `f${i}.py` }));
  assert.ok(confirmWords(place, many).detail.includes('• …and 8 more (all in the diff editor)'));
  const lots = Array.from({ length: 70 }, (_, i) => ({ ...MODIFIED, path: `f${i}.py` }));
  assert.ok(confirmWords(place, lots).detail.includes('• …and 58 more (the first 50 in the diff editor)'));
  assert.equal(fileLine({ ...MODIFIED, binary: true }), 'app.py: goes back as it was (binary)');
});

test('overwriting the person\'s changes is its own question; the end says what happened', () => {
  assert.equal(overwriteWords(['new.txt']).message, 'You changed this file since the agent\'s last step. Overwrite your changes?');
  assert.equal(overwriteWords(['a', 'b']).message, 'You changed 2 of these files since the agent\'s last step. Overwrite your changes?');
  assert.ok(overwriteWords(['a']).detail.startsWith('• a\n\nRewinding puts them back'));
  assert.equal(doneWords('turn 2, step 1', 1, false), 'Rewound 1 file to before turn 2, step 1.');
  assert.equal(doneWords('turn 2, step 1', 3, true), 'Rewound 3 files to before turn 2, step 1. The conversation goes on in a new session from there.');
  assert.equal(doneWords('turn 2, step 1', 0, false), 'No file needed to change: they are as they were before turn 2, step 1.');
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diffTarget, previewEdit } from '../../src/editPreview';

// As the daemon's edit_file writes them (Python's difflib, a/ and b/ prefixes).
const EDIT = '--- a/http/client.py\n+++ b/http/client.py\n@@ -1,3 +1,3 @@\n import urllib\n-TIMEOUT = 10\n+TIMEOUT = 30\n \n';
const CREATE = '--- /dev/null\n+++ b/notes/todo.md\n@@ -0,0 +1,2 @@\n+# To do\n+- retries\n';

test('an edit applies to the file as it is', () => {
  assert.deepEqual(previewEdit(EDIT, 'import urllib\nTIMEOUT = 10\n\n'), { path: 'http/client.py', created: false, after: 'import urllib\nTIMEOUT = 30\n\n' });
});

test('a new file starts empty', () => {
  assert.deepEqual(previewEdit(CREATE, ''), { path: 'notes/todo.md', created: true, after: '# To do\n- retries\n' });
  assert.deepEqual(diffTarget(CREATE), { path: 'notes/todo.md', created: true });
});

test('a diff that no longer applies (the file changed, or the diff was cut) gives nothing: show the diff itself', () => {
  assert.equal(previewEdit(EDIT, 'import urllib\nTIMEOUT = 99\n\n'), undefined);
  assert.equal(previewEdit('not a diff at all', 'x'), undefined);
  const cut = '--- a/http/client.py\n+++ b/http/client.py\n@@ -1,3 +1,3 @@\n import urllib\n-TIMEOUT = 10\n[diff cut at 20000 characters of 90000]\n';
  assert.equal(previewEdit(cut, 'import urllib\nTIMEOUT = 10\n\n'), undefined);
  assert.equal(diffTarget(cut), undefined);
});

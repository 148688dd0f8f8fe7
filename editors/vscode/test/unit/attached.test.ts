import assert from 'node:assert/strict';
import { test } from 'node:test';
import { attachedStatus, attachedWords, clientsChange, namesInWords, otherClients, RecentlyWithdrawn, resolvedWords, type AttachedClient } from '../../src/attached';

const me: AttachedClient = { clientId: 'c1', clientName: 'Visual Studio Code', you: true };
const nvim: AttachedClient = { clientId: 'c2', clientName: 'Neovim', you: false };
const zed: AttachedClient = { clientId: 'c3', clientName: 'Zed', you: false };

test('who else is attached: every client but this window, in the daemon\'s order', () => {
  assert.deepEqual(otherClients([me]), []);
  assert.deepEqual(otherClients([nvim, me, zed]), ['Neovim', 'Zed']);
  assert.equal(attachedWords([me]), '');
  assert.equal(attachedWords([]), '');
  assert.equal(attachedWords([me, nvim]), 'also here: Neovim');
  assert.equal(attachedWords([me, nvim, zed]), 'also here: Neovim and Zed');
  assert.equal(namesInWords(['a', 'b', 'c']), 'a, b and c');
  assert.equal(namesInWords(['a', 'b', 'c', 'd', 'e']), 'a, b and 3 more');
});

test('the status bar item shows only when someone else is attached, naming them', () => {
  assert.equal(attachedStatus([me]), undefined);
  const one = attachedStatus([me, nvim])!;
  assert.equal(one.text, '$(organization) Neovim');
  assert.match(one.tooltip, /^Also attached to this session: Neovim \(this window is "Visual Studio Code"\)\./);
  assert.match(one.tooltip, /first answer to a question counts/);
  assert.equal(attachedStatus([me, nvim, zed])!.text, '$(organization) Neovim and Zed');
  const many = [me, nvim, zed, { clientId: 'c4', clientName: 'client 4', you: false }];
  assert.equal(attachedStatus(many)!.text, '$(organization) 3 others');
});

test('one line says who answered what elsewhere', () => {
  const by = { clientName: 'Neovim' };
  assert.equal(resolvedWords({ kind: 'plan-review', outcome: 'approve', by }, 'Plan: retries'), 'Neovim approved the plan "Plan: retries".');
  assert.equal(resolvedWords({ kind: 'plan-review', outcome: 'revise', by }), 'Neovim sent the plan back to planning.');
  assert.equal(resolvedWords({ kind: 'permission', outcome: 'allow-once', by }, 'Run echo hi'), 'Neovim allowed "Run echo hi".');
  assert.equal(resolvedWords({ kind: 'permission', outcome: 'allow-session', by }, 'Edit a.py'),
    'Neovim allowed "Edit a.py", and the same for the rest of the session.');
  assert.equal(resolvedWords({ kind: 'permission', outcome: 'reject', by }), 'Neovim rejected the request.');
  assert.equal(resolvedWords({ kind: 'permission', outcome: 'reject', by: { clientName: '' } }), 'another client rejected the request.');
  // An outcome this release does not know is still said, not hidden.
  assert.equal(resolvedWords({ kind: 'plan-review', outcome: 'later', by }), 'Neovim answered the plan (later).');
  const long = resolvedWords({ kind: 'plan-review', outcome: 'approve', by }, 'x'.repeat(100));
  assert.ok(long.length < 90 && long.includes('…"'), long);
});

test('a question withdrawn just before the news of its answer is still named, once; a few are kept', () => {
  const w = new RecentlyWithdrawn(2);
  w.add('q1', 'Plan: retries');
  assert.equal(w.take('q1'), 'Plan: retries');
  assert.equal(w.take('q1'), undefined, 'taken once');
  w.add('a', 'A'); w.add('b', 'B'); w.add('c', 'C');
  assert.equal(w.take('a'), undefined, 'the oldest went');
  assert.equal(w.take('b'), 'B');
  assert.equal(w.take('c'), 'C');
  assert.equal(w.take('never'), undefined);
});

test('who joined and who left, said in passing; the first list and the same others say nothing', () => {
  assert.equal(clientsChange(undefined, [me, nvim]), undefined);
  assert.equal(clientsChange([me], [me, nvim]), 'Neovim joined this session.');
  assert.equal(clientsChange([me, nvim], [me]), 'Neovim left this session.');
  assert.equal(clientsChange([me, nvim], [me, zed]), 'Zed joined this session; Neovim left it.');
  assert.equal(clientsChange([me, nvim], [nvim, me]), undefined);
  // Two windows of the same name are told apart by their ids.
  const nvim2 = { ...nvim, clientId: 'c9' };
  assert.equal(clientsChange([me, nvim], [me, nvim, nvim2]), 'Neovim joined this session.');
});

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { ChatStore, olderSeqOf } from '../../src/chat/store';
import type { ChatItem } from '../../src/protocol';

const DIR = path.resolve(__dirname, '../../../../tests/fixtures/chat');
const fixtures = fs.readdirSync(DIR).filter((f) => f.endsWith('.json'))
  .map((f) => ({ name: f, ...JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8')) as { steps: { upserts: ChatItem[] }[]; items: ChatItem[] } }));

test('the shared fixtures are there', () => {
  assert.ok(fixtures.length >= 5, `only ${fixtures.map((f) => f.name)}`);
});

for (const f of fixtures) {
  test(`${f.name}: upserts applied in order give the daemon's list (same ids, same place)`, () => {
    const store = new ChatStore('a-1', 's-1');
    for (const step of f.steps) for (const item of step.upserts) store.upsert(item);
    assert.deepEqual(store.items, f.items);
    // A reload (dsh/chat/get) gives the committed items: a store built from them holds them in order.
    assert.deepEqual(new ChatStore('a-2', 's-1', f.items).items, f.items);
  });
}

test('a turn runs from its first item until its turn-end', () => {
  const store = new ChatStore('a-1', 's-1');
  assert.equal(store.turnRunning, false);
  store.upsert({ kind: 'user-message', id: 'user-3', seq: 3, at: 'x', turn: 1, text: 'hi', sender: 'person', label: 'You' });
  assert.equal(store.turnRunning, true);
  store.upsert({ kind: 'assistant-message', id: 'assistant-1.1', turn: 1, step: 1, text: 'Hel', partial: true });
  assert.equal(store.turnRunning, true);
  store.upsert({ kind: 'turn-end', id: 'turn-end-1', seq: 6, at: 'x', turn: 1, stopReason: 'end-turn', text: 'Turn 1 finished' });
  assert.equal(store.turnRunning, false);
  store.upsert({ kind: 'plan-mode', id: 'plan-mode-7', seq: 7, at: 'x', active: true, text: 'Plan mode on' });
  assert.equal(store.turnRunning, false);
});

test('an earlier page goes in front, in list order; an id already held keeps its newer form', () => {
  const user = (seq: number, text = `q${seq}`): ChatItem => ({ kind: 'user-message', id: `user-${seq}`, seq, at: 'x', turn: seq, text, sender: 'person', label: 'You' });
  const store = new ChatStore('a-1', 's-1', [user(5), user(6)]);
  store.olderSeq = olderSeqOf(store.items, 2);
  assert.equal(store.olderSeq, 5);
  store.upsert(user(7));
  const added = store.prepend([user(3), user(4), user(5, 'old form')], olderSeqOf([user(3), user(4), user(5)], 3));
  assert.deepEqual(added.map((i) => i.id), ['user-3', 'user-4']);
  assert.deepEqual(store.items.map((i) => i.id), ['user-3', 'user-4', 'user-5', 'user-6', 'user-7']);
  assert.equal((store.get('user-5') as { text: string }).text, 'q5');
  assert.equal(store.olderSeq, 3);
  // Upserts after it land by id as before.
  assert.equal(store.upsert(user(4, 'changed')), false);
  assert.equal((store.items[1] as { text: string }).text, 'changed');
  // A short page: nothing older is left. Live-only items (no seq) do not count toward the limit.
  assert.equal(olderSeqOf([user(1), { kind: 'retry', id: 'retry-1', turn: 1, step: 1, text: 'again' } as ChatItem], 2), undefined);
  assert.equal(olderSeqOf([], 2), undefined);
});

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { chatMarkdown, itemMarkdown } from '../../src/chat/markdown';
import type { ChatItem } from '../../src/protocol';

const DIR = path.resolve(__dirname, '../../../../tests/fixtures/chat');
const items = (name: string) => (JSON.parse(fs.readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as { items: ChatItem[] }).items;

test('the export shows every item in list order, with the daemon\'s words', () => {
  const list = items('plan-review');
  const md = chatMarkdown(list);
  let at = -1;
  for (const item of list) {
    const block = itemMarkdown(item);
    if (block === undefined) continue;
    const i = md.indexOf(block, at + 1);
    assert.ok(i > at, `${item.id} missing or out of order`);
    at = i;
  }
  assert.match(md, /\(sent back with feedback\)/);
  assert.match(md, /\(approved\)/);
  assert.doesNotMatch(md, /failed/);
});

test('a tool result holding backticks stays inside its fence; names are escaped', () => {
  const tool: ChatItem = { kind: 'tool-call', id: 't', callId: 'c', name: 'run_command', title: 'Run `ls *`', status: 'ok', result: 'a ```b``` c', partial: false };
  const md = itemMarkdown(tool)!;
  assert.match(md, /^→ \*\*Run \\`ls \\\*\\`\*\* \(ok\)\n\n````text\na ```b``` c\n````$/);
});

test('a tool call waiting for its approval says it waits for the person', () => {
  const tool: ChatItem = { kind: 'tool-call', id: 't', callId: 'c', name: 'edit_file', title: 'Edit a.txt', status: 'waiting', partial: false };
  assert.equal(itemMarkdown(tool), '→ **Edit a.txt** (waiting for you)');
});

test('every fixture exports without losing an item kind', () => {
  for (const f of fs.readdirSync(DIR).filter((n) => n.endsWith('.json'))) {
    for (const item of items(f.slice(0, -5))) assert.ok(itemMarkdown(item) !== undefined, `${f}: ${item.kind}`);
  }
});

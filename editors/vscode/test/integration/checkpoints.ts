// "Rewind to here" in a real VS Code against the real dshd and the scripted model
// (tests/editors/vscode/test_vscode_checkpoints.py writes the workspace): a step that writes two
// files takes a checkpoint; the message and both tool cards offer "Rewind to here"; a click opens
// the diff (now ↔ after rewind, both files in one changes view) and the modal; Escape cancels and
// nothing changes; a file the person changed is marked and needs "Overwrite my changes"; with it
// the files go back; "Rewind files and conversation" opens the fork's chat.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, runAll, screenshot, started, test, waitFor } from './harness';

let c: Controller;
const root = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const read = (p: string) => (fs.existsSync(path.join(root(), p)) ? fs.readFileSync(path.join(root(), p), 'utf8') : undefined);
const dialog = '.monaco-dialog-box';
const dialogButton = (label: string) => `${dialog} .dialog-buttons a.monaco-button:text-is("${label}")`;
const rewindTabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.label.includes('after rewind') || t.label.startsWith('Rewind to before'));

async function dialogText(): Promise<string> {
  await waitFor('the rewind dialog', async () => (await driver({ action: 'count', selector: dialog, settleMs: 200 })).count === 1);
  return ((await driver({ action: 'texts', selector: dialog, settleMs: 300 })).texts ?? []).join('\n');
}

/** Clicks "Rewind to here" on the person's message and waits for the modal; the rewind runs meanwhile. */
async function rewindFromMessage(): Promise<string> {
  c.rewinds.last = undefined;
  await chat.click('#log [data-kind="user-message"] button.rewind');
  return dialogText();
}

const ended = () => waitFor('the rewind to end', () => c.rewinds.last, 20000);

test('a step that writes takes a checkpoint: the message and its tool cards offer "Rewind to here"', async () => {
  c = (await started({ showChat: true })).controller;
  await chat.type('#prompt', 'Raise the retries and say so in the README.');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the turn to end', async () => (await chat.count('#log [data-kind="turn-end"]')) === 1, 40000);
  assert.equal(read('http/config.py'), 'retries = 5\n');
  assert.equal(read('README.md'), '# Demo\n\nRetries: 5.\n');
  await waitFor('three rewind buttons', async () => (await chat.count('#log button.rewind')) === 3);
  assert.equal(await chat.count('#log [data-kind="user-message"] button.rewind'), 1);
  assert.equal(await chat.count('#log [data-kind="tool-call"] button.rewind'), 2);
  assert.equal(await chat.count('#log [data-kind="assistant-message"] button.rewind'), 0);
  const seqs = (c.feed.store?.items ?? []).flatMap((i) => ('checkpoint' in i && i.checkpoint !== undefined ? [i.checkpoint] : []));
  assert.equal(new Set(seqs).size, 1, `one checkpoint for the message and the step: ${seqs}`);
  await screenshot('chat-rewind-buttons');
});

test('the diff comes first: both files now and after the rewind; Escape cancels and nothing changes', async () => {
  const text = await rewindFromMessage();
  assert.match(text, /Rewind to before turn 1, step 1\?/);
  assert.match(text, /http\/config\.py: goes back as it was/);
  assert.match(text, /README\.md: goes back as it was/);
  assert.doesNotMatch(text, /CHANGED BY YOU/);
  for (const label of ["Don't rewind", 'Rewind files', 'Rewind files and conversation', 'Cancel']) {
    assert.equal((await driver({ action: 'count', selector: dialogButton(label) })).count, 1, label);
  }
  // Enter presses the focused button: the one that rewinds nothing.
  assert.deepEqual((await driver({ action: 'texts', selector: `${dialog} .dialog-buttons a.monaco-button:focus` })).texts, ["Don't rewind"]);
  await waitFor('the changes view', () => rewindTabs().length === 1);
  const [tab] = rewindTabs();
  assert.match(tab.label, /^Rewind to before turn 1, step 1: now ↔ after/);
  await screenshot('rewind-diff-and-confirm');
  await driver({ action: 'press', key: 'Escape' });
  assert.equal((await ended()).outcome, 'cancelled');
  assert.equal(read('http/config.py'), 'retries = 5\n');
  await waitFor('the diff to close', () => rewindTabs().length === 0);
});

test('the diff editor shows each file now (left) and after the rewind (right); Cancel cancels', async () => {
  c.rewinds.last = undefined;
  await chat.click('#log [data-kind="tool-call"] button.rewind'); // a tool card's: the same checkpoint
  await dialogText();
  const docs = await Promise.all(c.rewinds.shown.map((u) => vscode.workspace.openTextDocument(u)));
  assert.equal(docs.length, 4);
  const side = (which: string, file: string) => docs.find((d) => d.uri.query === which && d.uri.path.endsWith(`/${file}`))?.getText();
  assert.equal(side('now', 'http/config.py'), 'retries = 5\n');
  assert.equal(side('after-rewind', 'http/config.py'), 'retries = 3\n');
  assert.equal(side('now', 'README.md'), '# Demo\n\nRetries: 5.\n');
  assert.equal(side('after-rewind', 'README.md'), '# Demo\n');
  await driver({ action: 'click', selector: dialogButton('Cancel') });
  assert.equal((await ended()).outcome, 'cancelled');
  assert.equal(read('http/config.py'), 'retries = 5\n');
});

test('the palette\'s "Rewind to a Checkpoint…" lists the session\'s checkpoints; Escape picks none', async () => {
  const picking = vscode.commands.executeCommand('dsh.checkpoint.rewind');
  const rows = await waitFor('the checkpoint picker', async () => {
    const texts = (await driver({ action: 'texts', selector: '.quick-input-widget:visible .quick-input-list .monaco-list-row', settleMs: 300 })).texts ?? [];
    return texts.length ? texts : undefined;
  });
  assert.equal(rows.length, 1);
  assert.match(rows[0], /Before turn 1, step 1/);
  assert.match(rows[0], /that step changed README\.md, http\/config\.py/);
  await screenshot('rewind-checkpoint-picker');
  await driver({ action: 'press', key: 'Escape' });
  assert.equal(await picking, undefined);
  assert.equal(read('http/config.py'), 'retries = 5\n');
});

test('a file the person changed is marked, and without "Overwrite my changes" nothing is restored', async () => {
  fs.writeFileSync(path.join(root(), 'README.md'), '# Demo\n\nRetries: 5.\nMy own note.\n');
  const text = await rewindFromMessage();
  assert.match(text, /README\.md: goes back as it was · CHANGED BY YOU since/);
  assert.match(text, /One of them was changed by you since the agent's last step/);
  await driver({ action: 'click', selector: dialogButton('Rewind files') });
  await waitFor('the second question', async () => /Overwrite your changes\?/.test(await dialogText()));
  assert.equal((await driver({ action: 'count', selector: dialogButton('Overwrite my changes') })).count, 1);
  assert.match(await dialogText(), /README\.md/);
  // A stray Enter keeps the person's work: "Keep my changes" has the focus.
  assert.deepEqual((await driver({ action: 'texts', selector: `${dialog} .dialog-buttons a.monaco-button:focus` })).texts, ['Keep my changes']);
  assert.equal((await driver({ action: 'count', selector: dialogButton('Cancel') })).count, 1);
  await screenshot('rewind-overwrite-my-changes');
  await driver({ action: 'press', key: 'Escape' });
  assert.equal((await ended()).outcome, 'cancelled');
  assert.equal(read('http/config.py'), 'retries = 5\n');
  assert.equal(read('README.md'), '# Demo\n\nRetries: 5.\nMy own note.\n');
});

test('"Overwrite my changes" puts both files back as they were before the step', async () => {
  await rewindFromMessage();
  await driver({ action: 'click', selector: dialogButton('Rewind files') });
  await waitFor('the second question', async () => /Overwrite your changes\?/.test(await dialogText()));
  await driver({ action: 'click', selector: dialogButton('Overwrite my changes') });
  const end = await ended();
  assert.equal(end.outcome, 'rewound');
  assert.ok(end.outcome === 'rewound');
  assert.deepEqual([...end.result.restored].sort(), ['README.md', 'http/config.py']);
  assert.deepEqual(end.result.forced, ['README.md']);
  assert.equal(end.result.agent, undefined);
  assert.equal(read('http/config.py'), 'retries = 3\n');
  assert.equal(read('README.md'), '# Demo\n');
  await waitFor('the diff to close', () => rewindTabs().length === 0);
  await screenshot('rewound-files');
});

test('"Rewind files and conversation" opens the fork\'s chat, from before the step', async () => {
  const parent = c.session!;
  const text = await rewindFromMessage();
  assert.match(text, /No file differs from then/);
  await driver({ action: 'click', selector: dialogButton('Rewind files and conversation') });
  const end = await ended();
  assert.ok(end.outcome === 'rewound' && end.result.agent, JSON.stringify(end));
  await waitFor('the fork to open', () => c.session?.sessionId === end.result.agent!.sessionId);
  assert.notEqual(c.session!.sessionId, parent.sessionId);
  assert.equal(c.session!.title, `${parent.title} (rewound)`);
  await waitFor('the fork\'s chat', async () => (await chat.texts('#session-title'))[0] === c.session!.title);
  await waitFor('its message, without the step', async () => (await chat.count('#log [data-kind="user-message"]')) === 1
    && (await chat.count('#log [data-kind="tool-call"]')) === 0);
  assert.deepEqual(await chat.texts('#log [data-kind="user-message"] .text'), ['Raise the retries and say so in the README.']);
  await screenshot('rewound-conversation-fork');
});

test('in the fork, a step that writes one file: its rewind shows that file in the diff editor', async () => {
  await chat.type('#prompt', 'Make it seven.');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the fork\'s turn to end', async () => (await chat.count('#log [data-kind="turn-end"]')) === 2, 40000);
  assert.equal(read('http/config.py'), 'retries = 7\n');
  c.rewinds.last = undefined;
  await chat.click('#log [data-kind="tool-call"] button.rewind');
  const text = await dialogText();
  assert.match(text, /One file changes/);
  const tab = await waitFor('the diff editor', () => rewindTabs().find((t) => t.input instanceof vscode.TabInputTextDiff));
  assert.match(tab.label, /^http\/config\.py: now ↔ after rewind to before turn 2, step 1/);
  const input = tab.input as vscode.TabInputTextDiff;
  assert.equal((await vscode.workspace.openTextDocument(input.original)).getText(), 'retries = 7\n');
  assert.equal((await vscode.workspace.openTextDocument(input.modified)).getText(), 'retries = 3\n');
  await screenshot('rewind-one-file-diff');
  await driver({ action: 'press', key: 'Escape' });
  assert.equal((await ended()).outcome, 'cancelled');
  await waitFor('the diff to close', () => rewindTabs().length === 0);
  assert.equal(read('http/config.py'), 'retries = 7\n');
});

export async function run(): Promise<void> { await runAll(); }

// The chat view in a real VS Code against the real dshd, driven as a person would: typing in its
// prompt box, pressing Enter, clicking its buttons, pressing the review keys. The scripted model
// (fixture/chat-script.json) replies in a fixed order: the tests run in that order.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, notificationTexts, quickInput, runAll, screenshot, showNotifications, started, test, waitFor } from './harness';

let c: Controller;

const { texts: chatTexts, count: chatCount, click: chatClick, type: chatType } = chat;
const chatShot = (name: string) => screenshot(name);


async function turnEnds(n: number): Promise<void> {
  await waitFor(`${n} turn ends in the chat`, async () => (await chatCount('#log [data-kind="turn-end"]')) >= n, 40000);
}

test('the chat view opens in its own container; its page runs under a strict Content-Security-Policy', async () => {
  c = (await started({ showChat: true })).controller;
  const { html, cspSource } = c.chat!.view;
  const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)?.[1] ?? '';
  assert.match(csp, /^default-src 'none'; /);
  assert.match(csp, /; script-src 'nonce-[A-Za-z0-9+/=]+'; /, 'scripts by nonce only');
  for (const d of ['style-src', 'img-src', 'font-src']) assert.ok(csp.includes(`${d} ${cspSource};`), `${d} is not the extension's own: ${csp}`);
  // Beyond VS Code's own resource origin: nothing inline, nothing evaluated, nothing remote.
  assert.doesNotMatch(csp.split(cspSource).join(''), /unsafe-|\*|https?:|data:|blob:/, csp);
  assert.equal((html.match(/<script/g) ?? []).length, 1, 'one script, by nonce');
  assert.match(html, /<script nonce="[^"]+" src="[^"]+webview\.js"><\/script>/);
  assert.doesNotMatch(html, /\sstyle=|<style|\son[a-z]+=/i, 'no inline style or handler');
  // The page in the browser carries the same policy.
  const head = await driver({ action: 'html', selector: 'head', frame: 'chat' });
  assert.match(head.html ?? '', /Content-Security-Policy/);
  await chatShot('chat-empty');
});

test('a prompt typed in the box (Shift+Enter for a new line, Enter sends) opens a session titled after it; Send turns into Steer with Stop while the turn runs', async () => {
  await chatType('#prompt', 'Where does the client send requests?');
  await driver({ action: 'press', key: 'Shift+Enter' });
  await driver({ action: 'type', text: 'Keep it short.' });
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the person\'s message in the chat', async () => (await chatTexts('#log [data-kind="user-message"] .text')).some((t) => t === 'Where does the client send requests?\nKeep it short.'));
  assert.equal(c.session?.title, 'Where does the client send requests?');
  // The model takes a while: the busy mark shows, Send says Steer, Stop is there.
  await waitFor('Steer and Stop', async () => (await chatTexts('#send'))[0] === 'Steer' && (await chatCount('#stop:visible')) === 1);
  assert.ok((await chatTexts('#busy')).some((t) => t.includes('working')));
  await chatShot('chat-running');
  await turnEnds(1);
  assert.equal((await chatTexts('#send'))[0], 'Send');
  assert.equal(await chatCount('#stop:visible'), 0);
  assert.deepEqual(await chatTexts('#session-title'), ['Where does the client send requests?']);
});

test('model text is markdown; a <script> or <img onerror> in it is shown as text and never runs', async () => {
  const reply = '#log [data-kind="assistant-message"] .markdown';
  await waitFor('the reply', async () => (await chatCount(reply)) === 1);
  assert.deepEqual(await chatTexts(`${reply} strong`), ['http/client.py']);
  assert.deepEqual(await chatTexts(`${reply} code`), ['send()']);
  assert.equal(await chatCount(`${reply} li`), 2);
  assert.equal(await chatCount('#log script'), 0, 'a script element reached the page');
  assert.equal(await chatCount('#log img'), 0, 'an img element reached the page');
  const text = (await chatTexts(reply)).join('\n');
  assert.match(text, /<script>document\.body\.dataset\.pwned = 'script'<\/script>/);
  assert.match(text, /<img src=x onerror="document\.body\.dataset\.pwned = 'img'">/);
  assert.equal(await chatCount('body[data-pwned]'), 0, 'the model\'s script ran');
  await chatShot('chat-markdown-as-text');
});

test('Stop ends a running turn', async () => {
  await chatType('#prompt', 'Now do the slow part.');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('Stop', async () => (await chatCount('#stop:visible')) === 1);
  await chatClick('#stop');
  await turnEnds(2);
  const ends = await chatTexts('#log [data-kind="turn-end"]');
  assert.match(ends[1], /^Turn 2 stopped/);
});

test('a goal the agent blocks raises a notification with its code and message; the tool call is a card with its result', async () => {
  await vscode.commands.executeCommand('notifications.clearAll');
  await vscode.commands.executeCommand('dsh.goal.create', { objective: 'Test against staging', maxRounds: 5 });
  const notices = await waitFor('the block notification', async () => {
    const t = (await notificationTexts()).filter((m) => m.includes('blocked the goal'));
    return t.length ? t : undefined;
  }, 30000);
  assert.deepEqual(notices, ['The agent blocked the goal "Test against staging": The staging API needs a token (needs-credentials)']);
  await waitFor('blocked in the header', async () => (await chatTexts('#goal-status'))[0]?.includes('blocked: needs-credentials'));
  await turnEnds(3);
  const card = '#log details[data-kind="tool-call"]';
  assert.equal(await chatCount(card), 1);
  assert.match((await chatTexts(`${card} summary .title`))[0], /goal_block|[Bb]lock/);
  assert.equal(await chatCount(`${card}.status-ok`), 1);
  assert.equal(await chatCount(`${card} pre.result:visible`), 0, 'the card starts folded');
  await chatClick(`${card} summary`);
  await waitFor('the result', async () => (await chatCount(`${card} pre.result:visible`)) === 1);
  await showNotifications();
  await chatShot('chat-goal-blocked');
  await vscode.commands.executeCommand('notifications.hideList');
  await vscode.commands.executeCommand('dsh.goal.clear');
});

test('a plan review is a card: Keep planning with feedback typed in the card, then Approve from the card', async () => {
  await vscode.commands.executeCommand('dsh.plan.on');
  await chatType('#prompt', 'Plan retries for the client.');
  await driver({ action: 'press', key: 'Enter' });
  const pending = '#log [data-kind="plan-review"].outcome-pending';
  await waitFor('a pending plan card with its buttons', async () => (await chatCount(`${pending} button.approve`)) === 1, 30000);
  assert.deepEqual((await chatTexts(`${pending} button`)).map((t) => t.trim()), ['Approve', 'Approve and start a goal…', 'Keep planning', 'Comment on lines…']);
  assert.match((await chatTexts(`${pending} .card-title`))[0], /^Plan review: Plan: retries$/);
  await chatType(`${pending} textarea.feedback-box`, 'Cap the backoff, and never retry a 404.');
  await waitFor('the draft to reach the review', () => c.reviews.current()?.draftFeedback === 'Cap the backoff, and never retry a 404.');
  await chatShot('chat-plan-card');
  await chatClick(`${pending} button.keep-planning`);
  await waitFor('the revised plan card', async () => (await chatTexts(`${pending} .card-title`))[0] === 'Plan review: Plan: retries (revised)', 30000);
  const sent = await chatTexts('#log [data-kind="plan-review"].outcome-sent-back');
  assert.equal(sent.length, 1);
  assert.match(sent[0], /sent back with feedback/);
  assert.match(sent[0], /Cap the backoff, and never retry a 404\./);
  await chatClick(`${pending} button.approve`);
  await turnEnds(4);
  assert.equal(await chatCount('#log [data-kind="plan-review"].outcome-approved'), 1);
  await waitFor('plan mode off in the header', async () => (await chatTexts('#plan-status'))[0] === 'plan mode: off');
  assert.equal(c.reviews.all().length, 0, 'a review is still open');
  await chatShot('chat-plan-approved');
});

test('a plan review from the keyboard: Ctrl+Alt+K sends it back with feedback, Ctrl+Alt+Enter approves the revision', async () => {
  await vscode.commands.executeCommand('dsh.plan.on');
  await chatType('#prompt', 'Plan a cache.');
  await driver({ action: 'press', key: 'Enter' });
  const pending = '#log [data-kind="plan-review"].outcome-pending';
  await waitFor('the plan card', async () => (await chatTexts(`${pending} .card-title`))[0] === 'Plan review: Plan: a cache', 30000);
  await vscode.commands.executeCommand('dsh.chat.show'); // the keys work from the chat view too
  await driver({ action: 'press', key: 'Control+Alt+K' });
  await driver({ action: 'type', text: 'Measure first.', selector: quickInput('Keep planning') });
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the revision', async () => (await chatTexts(`${pending} .card-title`))[0] === 'Plan review: Plan: a cache (revised)', 30000);
  await driver({ action: 'press', key: 'Control+Alt+Enter' });
  await turnEnds(5);
  assert.equal(await chatCount('#log [data-kind="plan-review"].outcome-approved'), 2);
  assert.equal(await chatCount('#log [data-kind="plan-review"].outcome-sent-back'), 2);
});

const clientPy = () => path.join(vscode.workspace.workspaceFolders![0].uri.fsPath, 'http', 'client.py');
const picker = '.quick-input-widget:visible';

test('an edit the agent asks to make opens in the diff editor; Allow on its title bar writes it', async () => {
  fs.mkdirSync(path.dirname(clientPy()), { recursive: true });
  fs.writeFileSync(clientPy(), 'import urllib.request\n\nTIMEOUT = 10\n');
  await chatType('#prompt', 'Raise the timeout.');
  await driver({ action: 'press', key: 'Enter' });
  const diff = await waitFor('the diff editor', () => {
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    return input instanceof vscode.TabInputTextDiff && input.modified.scheme === 'dsh-approval' ? input : undefined;
  }, 30000);
  assert.equal((await vscode.workspace.openTextDocument(diff.original)).getText(), 'import urllib.request\n\nTIMEOUT = 10\n');
  assert.equal((await vscode.workspace.openTextDocument(diff.modified)).getText(), 'import urllib.request\n\nTIMEOUT = 30\n');
  // The same request is a card in the chat, and a notification naming it.
  await waitFor('the permission card', async () => (await chatCount('#permissions .permission-request button.allow')) === 1);
  assert.deepEqual((await chatTexts('#permissions .permission-request button')).map((t) => t.trim()), ['Allow', 'Allow for this session', 'Reject', 'Show the diff']);
  assert.deepEqual(await chatTexts('#permissions .card-title'), ['The agent asks: Edit http/client.py']);
  await waitFor('the notification', async () => (await notificationTexts()).some((t) => t.startsWith('dsh asks: Edit http/client.py')));
  // The title bar's three buttons, each labelled (icons with a name people hear and see on hover).
  for (const label of ['Allow', 'Allow for This Session', 'Reject…']) {
    assert.equal((await driver({ action: 'count', selector: `.editor-actions a.action-label[aria-label="${label}"]`, settleMs: 100 })).count, 1, label);
  }
  await screenshot('approval-edit-diff');
  await driver({ action: 'click', selector: '.editor-actions a.action-label[aria-label="Allow"]' });
  await turnEnds(6);
  assert.equal(fs.readFileSync(clientPy(), 'utf8'), 'import urllib.request\n\nTIMEOUT = 30\n');
  assert.equal(await chatCount('#permissions .permission-request'), 0);
  assert.ok(!vscode.window.tabGroups.all.some((g) => g.tabs.some((t) => t.input instanceof vscode.TabInputTextDiff)), 'the diff stayed open');
  assert.ok((await chatTexts('#log [data-kind="permission"]')).some((t) => /allowed/i.test(t)));
  await waitFor('the notification to go', async () => !(await notificationTexts()).some((t) => t.startsWith('dsh asks:')));
});

test('Reject asks why; the file stays as it was and the agent reads the reason', async () => {
  await chatType('#prompt', 'Lower it again.');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the diff editor', () => vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputTextDiff, 30000);
  await driver({ action: 'click', selector: '.editor-actions a.action-label[aria-label^="Reject"]' });
  await driver({ action: 'type', text: 'Keep 30: the staging server is slow.', selector: quickInput('Reject') });
  await screenshot('approval-reject-why');
  await driver({ action: 'press', key: 'Enter' });
  await turnEnds(7);
  assert.equal(fs.readFileSync(clientPy(), 'utf8'), 'import urllib.request\n\nTIMEOUT = 30\n');
  await chatClick('#log details[data-kind="tool-call"].status-failed summary >> nth=-1'); // unfold the card
  const failed = await chatTexts('#log details[data-kind="tool-call"].status-failed .result');
  assert.ok(failed.some((t) => t.includes('Keep 30: the staging server is slow.')), JSON.stringify(failed));
});

test('a command shows with its folder in the chat and a notification (no picker by itself); Allow in the picker its link opens runs it', async () => {
  await chatType('#prompt', 'Write a marker file.');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the card', async () => (await chatCount('#permissions .permission-request')) === 1, 30000);
  assert.equal((await driver({ action: 'count', selector: picker, settleMs: 500 })).count, 0, 'a picker opened by itself');
  await waitFor('the notification', async () => (await notificationTexts()).some((t) => t.startsWith('dsh asks: Run `echo hi > marker.txt`')));
  await showNotifications();
  await driver({ action: 'click', selector: '.notifications-center .notification-list-item:has-text("dsh asks") a:has-text("Answer here")' });
  await vscode.commands.executeCommand('notifications.hideList');
  const rows = await waitFor('the command picker', async () => {
    const t = (await driver({ action: 'texts', selector: `${picker} .monaco-list-row`, settleMs: 300 })).texts;
    return t?.length ? t : undefined;
  }, 30000);
  const root = vscode.workspace.workspaceFolders![0].uri.fsPath;
  assert.ok(rows.some((r) => r.includes('echo hi > marker.txt') && r.includes(root)), JSON.stringify(rows));
  assert.ok((await chatTexts('#permissions .command')).includes('echo hi > marker.txt'));
  await screenshot('approval-command');
  // The picker opens from the notification's link, never by itself; its first item decides nothing.
  assert.equal(rows.length, 4, JSON.stringify(rows));
  assert.match(rows[0], /Decide later/);
  await driver({ action: 'click', selector: `${picker} .monaco-list-row:has-text("Allow"):not(:has-text("Session"))` });
  await turnEnds(8);
  assert.equal(fs.readFileSync(path.join(root, 'marker.txt'), 'utf8').trim(), 'hi');
});

test('a request that is withdrawn (the person stops the turn) closes its picker and its card', async () => {
  await chatType('#prompt', 'Run the slow command.');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the card', async () => (await chatCount('#permissions .permission-request')) === 1, 30000);
  await chatClick('#stop');
  await turnEnds(9);
  await waitFor('the card to go', async () => (await chatCount('#permissions .permission-request')) === 0);
  assert.equal((await driver({ action: 'count', selector: `${picker}:has-text("dsh asks")`, settleMs: 300 })).count, 0, 'the picker stayed open');
  assert.equal(c.approvals.pending().length, 0);
});

test('the shield in the status bar shows the sandbox and changes it for this session', async () => {
  await waitFor('the shield', () => c.policyItem.text === '$(shield) workspace-write');
  const change = vscode.commands.executeCommand('dsh.permission.policy');
  await driver({ action: 'click', selector: `${picker} .monaco-list-row:has-text("Sandbox: read-only")` });
  await change;
  await waitFor('read-only', () => c.policyItem.text === '$(shield) read-only');
  const shot = await screenshot('policy-read-only', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => t.includes('read-only')), JSON.stringify(shot.statusTexts));
});

test('the session picker shows titles; Export opens the same conversation as markdown', async () => {
  await chatClick('#session-title');
  const rows = await waitFor('the session picker', async () => {
    const t = (await driver({ action: 'texts', selector: '.quick-input-widget:visible .monaco-list-row', settleMs: 300 })).texts;
    return t?.length ? t : undefined;
  });
  assert.ok(rows.some((r) => r.includes('Where does the client send requests?')), JSON.stringify(rows));
  await screenshot('chat-session-picker');
  await driver({ action: 'press', key: 'Escape' });
  await chatClick('#export');
  const doc = await waitFor('the export', () => vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'dsh-transcript'));
  await waitFor('the export to fill', () => doc.getText().includes('Measuring first.'));
  const md = doc.getText();
  assert.match(md, /\(sent back with feedback\)/);
  assert.match(md, /The agent blocked|blocked/);
  assert.doesNotMatch(md, /\*\*failed\*\*/);
});

export async function run(): Promise<void> { await runAll(); }

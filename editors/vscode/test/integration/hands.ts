// A person's hands (questions that never take stray keys, states that are true, sessions that come
// back), in a real VS Code against the real dshd and a real HTTP model peer: tests/editors/vscode/test_vscode.py
// starts a loopback server speaking OpenAI's streaming Chat Completions and scripts its replies,
// some of them slow (a plan that takes seconds to arrive, a tool call after a slow sentence), so
// that a question opens while the person is typing. The tests run in the script's order.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, notificationTexts, quickInput, runAll, screenshot, showNotifications, started, test, waitFor } from './harness';

let c: Controller;
const workspace = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const { texts: chatTexts, count: chatCount, click: chatClick } = chat;
/** Every notification message seen, checked for internal words at the end. */
const seenNotices = new Set<string>();
const notices = async () => { const t = await notificationTexts(); for (const m of t) seenNotices.add(m); return t; };

interface LogEvent { seq: number; type: string; data: any; turn?: number }
function readLog(): LogEvent[] {
  const file = path.join(workspace(), '.dsh', 'sessions', c.session!.sessionId, 'log.jsonl');
  return fs.readFileSync(file, 'utf8').split('\n').slice(0, -1).filter(Boolean).map((l) => JSON.parse(l));
}
/** The calls of this tool in the log, and whether each has a result or a decision yet. */
function calls(tool: string): { callId: string; result?: LogEvent; decision?: LogEvent }[] {
  const log = readLog();
  return log.filter((e) => e.type === 'tool/call' && e.data.name === tool).map((e) => ({
    callId: e.data.callId,
    result: log.find((r) => r.type === 'tool/result' && r.data.callId === e.data.callId),
    decision: log.find((r) => r.type === 'permission/decision' && r.data.callId === e.data.callId),
  }));
}

/** Words a person types without pause: no Enter, nothing an editor would complete or pair. */
const SENTENCE = 'the quick brown fox jumps over the lazy dog while the agent keeps working and nothing I type may answer it ';
const TYPED = SENTENCE.repeat(2).trimEnd();
const KEY_DELAY_MS = 30;

/**
 * Types TYPED at a person's pace, starting now; resolves with when typing started and ended.
 * `selector`: the chat's prompt box (else whatever has the keyboard).
 */
async function typeContinuously(selector?: string): Promise<{ start: number; end: number }> {
  const start = Date.now();
  await driver({ action: 'type', text: TYPED, delay: KEY_DELAY_MS, settleMs: 0, ...(selector ? { selector, frame: 'chat' as const } : {}) });
  return { start, end: Date.now() };
}

async function clearPrompt(): Promise<void> {
  await driver({ action: 'click', selector: '#prompt', frame: 'chat' });
  await driver({ action: 'press', key: 'Control+A' });
  await driver({ action: 'press', key: 'Backspace' });
  assert.equal((await driver({ action: 'value', selector: '#prompt', frame: 'chat' })).value, '');
}

const pending = '#log [data-kind="plan-review"].outcome-pending';
const tabLabels = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).map((t) => t.label);

test('plan mode can be turned on before any session exists: the status bar item starts one in plan mode', async () => {
  c = (await started({ showChat: true })).controller;
  assert.equal(c.session, undefined);
  await waitFor('the plan item without a session', () => c.planItem.text === '$(checklist) plan: off');
  await driver({ action: 'click', selector: '#workbench\\.parts\\.statusbar .statusbar-item:has-text("plan: off")' });
  await waitFor('a session in plan mode', () => c.session?.plan.active === true);
  assert.equal(c.statusText().plan, '$(checklist) plan: on');
  await vscode.commands.executeCommand('dsh.session.close');
});

test('a first prompt "/plan …" titles the session after its words; the plan card says the plan is arriving while it streams, then waits for you', async () => {
  await chat.type('#prompt', '/plan Add retries to the HTTP client');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the session', () => c.session);
  assert.equal(c.session!.title, 'Add retries to the HTTP client');
  const badges = '#log [data-kind="plan-review"] .badge';
  await waitFor('the plan arriving', async () => (await chat.texts(badges, 0)).includes('the plan is arriving…'), 30000);
  assert.equal(await chatCount(`${pending} button.approve`, 0), 0, 'a plan still arriving can be answered');
  await screenshot('hands-plan-arriving');
  await waitFor('the review', async () => (await chatCount(`${pending} button.approve`)) === 1, 30000);
  assert.deepEqual(await chatTexts(`${pending} .badge`), ['waiting for your review']);
  assert.deepEqual(await chatTexts('#session-title'), ['Add retries to the HTTP client']);
  // A question is open: the header and the status bar say so, not "working…".
  await waitFor('waiting for you in the header', async () => (await chatTexts('#busy'))[0] === 'waiting for you');
  assert.equal(c.statusText().waiting, true);
  assert.equal(c.statusText().busy, false);
  // The plan and its rendered preview are two tabs with two names.
  const labels = await waitFor('the plan tabs', () => { const l = tabLabels().filter((t) => t.startsWith('Plan retries')); return l.length === 2 ? l : undefined; });
  assert.equal(new Set(labels).size, 2, JSON.stringify(labels));
  // The title bar's answers are words, not icons.
  for (const word of ['Approve Plan', 'Keep Planning...']) {
    const n = (await driver({ action: 'count', selector: `.editor-actions a.action-label:text-is("${word}")`, settleMs: 100 })).count;
    assert.equal(n, 1, `no "${word}" on the title bar`);
  }
  await screenshot('hands-review-opened');
});

test('closing the plan\'s tabs decides nothing: the question stays in the chat and the status, and opens again from its card', async () => {
  const review = c.reviews.current()!;
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await waitFor('the tabs to close', () => !tabLabels().some((t) => t.startsWith('Plan retries')));
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(review.settled, false, 'closing the tab answered the review');
  const [plan] = calls('exit_plan_mode');
  assert.ok(plan && !plan.result, 'the daemon got an answer');
  assert.equal(await chatCount(`${pending} button.approve`), 1, 'the card lost its buttons');
  assert.deepEqual(await chatTexts('#busy'), ['waiting for you']);
  assert.equal(c.statusText().waiting, true);
  await screenshot('hands-review-closed-still-waiting');
  await chatClick(`${pending} button.open-plan`);
  await waitFor('the plan open again', () => vscode.window.activeTextEditor?.document.uri.toString() === review.uri.toString());
  // Sent back from the card, with feedback typed there; then the revision is approved there.
  await chat.type(`${pending} textarea.feedback-box`, 'Cap the backoff at 30 seconds.');
  await screenshot('hands-plan-card', undefined);
  await chatClick(`${pending} button.keep-planning`);
  await waitFor('the revision', async () => (await chatTexts(`${pending} .card-title`))[0] === 'Plan review: Plan: retries (revised)', 30000);
  await chatClick(`${pending} button.approve`);
  await waitFor('plan mode off', () => c.statusText().plan === '$(checklist) plan: off', 30000);
  await waitFor('the turn to end', async () => !c.busy && (await chatCount('#busy:visible')) === 0, 30000);
  // Finished text keeps no streaming cursor: the cursor needs a running turn.
  assert.equal(await chatCount('body.busy'), 0);
});

test('a plan review that opens while the person types in the chat box takes none of the keys', async () => {
  await vscode.commands.executeCommand('dsh.plan.on');
  let askedAt = 0;
  const watch = c.reviews.onDidAsk(() => { askedAt = Date.now(); });
  void vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Plan a cache.' });
  const typing = await typeContinuously('#prompt');
  watch.dispose();
  assert.ok(askedAt > typing.start + 300 && askedAt < typing.end - 1000, `the review opened at ${askedAt - typing.start} ms of ${typing.end - typing.start} ms of typing`);
  const box = await driver({ action: 'value', selector: '#prompt', frame: 'chat' });
  assert.equal(box.value, TYPED, 'the typed text is not intact');
  assert.equal(box.focused, true, 'the prompt box lost the keyboard');
  const review = c.reviews.current();
  assert.ok(review && !review.settled, 'the review was answered');
  const cache = calls('exit_plan_mode').pop()!;
  assert.equal(cache.result, undefined, 'the daemon got an answer');
  assert.equal(c.statusText().waiting, true);
  await screenshot('hands-typing-plan-review');
  await clearPrompt();
  await chatClick(`${pending} button.approve`);
  await waitFor('the turn to end', async () => !c.busy && !c.statusText().waiting, 30000);
  assert.equal(calls('exit_plan_mode').pop()!.result?.data.ok, true);
});

test('a command approval that opens while the person types opens no picker and takes none of the keys; the card answers it', async () => {
  let askedAt = 0;
  const watch = c.approvals.onDidAsk(() => { askedAt = Date.now(); });
  void vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Write a marker file.' });
  const typing = await typeContinuously('#prompt');
  watch.dispose();
  assert.ok(askedAt > typing.start + 300 && askedAt < typing.end - 1000, `the request came at ${askedAt - typing.start} ms of ${typing.end - typing.start} ms of typing`);
  const box = await driver({ action: 'value', selector: '#prompt', frame: 'chat' });
  assert.equal(box.value, TYPED, 'the typed text is not intact');
  assert.equal(box.focused, true, 'the prompt box lost the keyboard');
  assert.equal((await driver({ action: 'count', selector: '.quick-input-widget:visible', settleMs: 0 })).count, 0, 'a picker opened by itself');
  const [run] = calls('run_command');
  assert.ok(run && !run.decision && !run.result, 'the request was answered');
  assert.equal(c.approvals.pending().length, 1);
  assert.deepEqual(await chatTexts('#busy'), ['waiting for you']);
  assert.ok((await notices()).some((t) => t.startsWith('dsh asks: Run `echo hi > marker.txt`')));
  await showNotifications();
  await screenshot('hands-typing-command');
  await vscode.commands.executeCommand('notifications.hideList');
  await clearPrompt();
  // Opened on purpose, the picker's first, preselected answer is "Decide later", and an Enter in
  // its first moments answers nothing.
  void vscode.commands.executeCommand('dsh.permission.show');
  await driver({ action: 'press', key: 'Enter', settleMs: 0 }); // ignored, or "Decide later" on a slow machine
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(c.approvals.pending().length, 1, 'the early Enter answered');
  assert.equal(calls('run_command')[0].decision, undefined, 'the early Enter answered');
  if (!(await driver({ action: 'count', selector: '.quick-input-widget:visible', settleMs: 0 })).count) void vscode.commands.executeCommand('dsh.permission.show');
  const focused = await waitFor('the picker', async () => (await driver({ action: 'texts', selector: '.quick-input-widget:visible .monaco-list-row.focused', settleMs: 200 })).texts?.[0]);
  assert.match(focused, /Decide later/);
  await screenshot('hands-picker-decide-later');
  await driver({ action: 'press', key: 'Enter' }); // Decide later: nothing decided, the picker goes
  await waitFor('the picker to go', async () => (await driver({ action: 'count', selector: '.quick-input-widget:visible', settleMs: 200 })).count === 0);
  assert.equal(c.approvals.pending().length, 1);
  assert.equal(calls('run_command')[0].decision, undefined);
  await chatClick('#permissions .permission-request button.allow');
  await waitFor('the turn to end', async () => !c.busy && !c.statusText().waiting, 30000);
  assert.equal(fs.readFileSync(path.join(workspace(), 'marker.txt'), 'utf8').trim(), 'hi');
  assert.equal(calls('run_command')[0].decision?.data.by, 'person');
});

test('an edit approval that opens while the person types in an editor opens beside it, takes none of the keys; Allow on its title bar writes it', async () => {
  const root = workspace();
  fs.mkdirSync(path.join(root, 'http'), { recursive: true });
  fs.writeFileSync(path.join(root, 'http', 'client.py'), 'import urllib.request\n\nTIMEOUT = 10\n');
  fs.writeFileSync(path.join(root, 'notes.txt'), '');
  const notes = await vscode.workspace.openTextDocument(path.join(root, 'notes.txt'));
  await vscode.window.showTextDocument(notes, { viewColumn: vscode.ViewColumn.One, preview: false });
  await driver({ action: 'click', selector: '.editor-group-container .monaco-editor .view-lines' });
  let askedAt = 0;
  const watch = c.approvals.onDidAsk(() => { askedAt = Date.now(); });
  void vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Raise the timeout.' });
  const typing = await typeContinuously();
  watch.dispose();
  assert.ok(askedAt > typing.start + 300 && askedAt < typing.end - 1000, `the request came at ${askedAt - typing.start} ms of ${typing.end - typing.start} ms of typing`);
  // The editor's last keys reach this extension host a moment after the browser typed them.
  await waitFor('the typed text in the editor', () => notes.getText() === TYPED, 5000).catch(() => undefined);
  assert.equal(notes.getText(), TYPED, 'the typed text is not intact');
  assert.equal(vscode.window.activeTextEditor?.document, notes, 'the person\'s editor lost the keyboard');
  const diff = vscode.window.tabGroups.all.flatMap((g) => g.tabs).find((t) => t.input instanceof vscode.TabInputTextDiff);
  assert.ok(diff, 'the diff did not open');
  assert.notEqual(diff.group, vscode.window.tabGroups.activeTabGroup, 'the diff covered the person\'s editor');
  const [edit] = calls('edit_file');
  assert.ok(edit && !edit.decision, 'the request was answered');
  await screenshot('hands-typing-edit');
  // Closing the diff decides nothing: the request stays on its card and in the status.
  await vscode.window.tabGroups.close(diff);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(c.approvals.pending().length, 1, 'closing the diff answered the request');
  assert.equal(calls('edit_file')[0].decision, undefined, 'closing the diff answered the request');
  assert.equal(c.statusText().waiting, true);
  // The person turns to the change (the notification's link, the card's "Show the diff"): its
  // title bar's answers are words.
  await chatClick('#permissions .permission-request button.show-diff');
  await waitFor('the diff in front', () => vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputTextDiff);
  await screenshot('hands-edit-title-bar');
  await driver({ action: 'click', selector: '.editor-actions a.action-label:text-is("Allow")' });
  await waitFor('the turn to end', async () => !c.busy && !c.statusText().waiting, 30000);
  assert.equal(fs.readFileSync(path.join(root, 'http', 'client.py'), 'utf8'), 'import urllib.request\n\nTIMEOUT = 30\n');
  await vscode.commands.executeCommand('workbench.action.files.revert');
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
});

test('a plan review that opens while the person types in an editor takes none of the keys', async () => {
  const root = workspace();
  fs.writeFileSync(path.join(root, 'notes.txt'), '');
  await vscode.commands.executeCommand('dsh.plan.on');
  const notes = await vscode.workspace.openTextDocument(path.join(root, 'notes.txt'));
  await vscode.window.showTextDocument(notes, { viewColumn: vscode.ViewColumn.One, preview: false });
  await driver({ action: 'click', selector: '.editor-group-container .monaco-editor .view-lines' });
  let askedAt = 0;
  const watch = c.reviews.onDidAsk(() => { askedAt = Date.now(); });
  void vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Plan the docs.' });
  const typing = await typeContinuously();
  watch.dispose();
  assert.ok(askedAt > typing.start + 300 && askedAt < typing.end - 1000, `the review opened at ${askedAt - typing.start} ms of ${typing.end - typing.start} ms of typing`);
  // The editor's last keys reach this extension host a moment after the browser typed them.
  await waitFor('the typed text in the editor', () => notes.getText() === TYPED, 5000).catch(() => undefined);
  assert.equal(notes.getText(), TYPED, 'the typed text is not intact');
  const review = c.reviews.current();
  assert.ok(review && !review.settled, 'the review was answered');
  assert.equal(calls('exit_plan_mode').pop()!.result, undefined, 'the daemon got an answer');
  // The person's editor stays in view: the plan opened beside it.
  assert.ok(vscode.window.visibleTextEditors.some((e) => e.document === notes), 'the plan covered the person\'s editor');
  await screenshot('hands-typing-editor-plan-review');
  await chatClick(`${pending} button.approve`);
  await waitFor('the turn to end', async () => !c.busy && !c.statusText().waiting, 30000);
  await vscode.window.showTextDocument(notes);
  await vscode.commands.executeCommand('workbench.action.files.revert');
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
});

test('a new goal: the round budget says the configured default, a token budget can be set; the notice and the status bar say the same tokens', async () => {
  await vscode.commands.executeCommand('notifications.clearAll');
  const created = vscode.commands.executeCommand<{ maxRounds: number; maxTokens?: number }>('dsh.goal.create');
  await driver({ action: 'type', text: 'Document the retry policy', selector: quickInput('New goal (1/3)') });
  await driver({ action: 'press', key: 'Enter' });
  const prompt = await waitFor('the round budget box', async () => (await driver({ action: 'texts', selector: '.quick-input-widget:visible:has-text("New goal (2/3)") .quick-input-message', settleMs: 300 })).texts?.[0]);
  assert.match(prompt, /empty: 40, from \.dsh\/config\.toml/);
  await screenshot('hands-goal-rounds-default');
  await driver({ action: 'press', key: 'Enter' }); // empty: the configured 40
  await driver({ action: 'type', text: '50k', selector: quickInput('New goal (3/3)') });
  await driver({ action: 'press', key: 'Enter' });
  const goal = await created;
  assert.equal(goal?.maxRounds, 40);
  assert.equal(goal?.maxTokens, 50000);
  const done = await waitFor('the completion notice', async () => (await notices()).find((t) => t.startsWith('Goal complete')), 40000);
  await waitFor('the round to end', () => !c.busy);
  const used = c.session!.goal!.tokensUsed!;
  assert.ok(used >= 1240, `tokens used: ${used}`);
  // Both show the daemon's words (GoalView.status), which count the same tokens.
  const words = c.session!.goal!.status;
  assert.ok(done.includes(`(${words.usage})`), done);
  assert.match(words.usage, /^1 of 40 rounds used, [\d.]+k of 50k tokens$/);
  assert.equal(c.statusText().goal, `$(target) ${words.text}`);
  assert.match(words.text, /^1\/40 · [\d.]+k\/50k tok · complete$/);
  const told = c.noticesShown.filter((t) => t.startsWith('Goal complete'));
  assert.equal(told.length, 1, `told ${JSON.stringify(told)}; goal changes ${JSON.stringify(c.goalChangesSeen)}`);

  await showNotifications();
  await screenshot('hands-goal-tokens-agree');
  await vscode.commands.executeCommand('notifications.hideList');
});

test('the window reopens the workspace\'s newest session at start; the picker shows titles, times in words and the goal', async () => {
  const sessionId = c.session!.sessionId;
  await vscode.commands.executeCommand('dsh.session.close'); // this window forgets it
  assert.equal(c.session as unknown, undefined);
  await c.daemon.stop();
  assert.equal(await c.startDaemon(true), true); // as when a window opens on the workspace
  await waitFor('the newest session', () => c.session?.sessionId === sessionId);
  assert.equal(c.session?.title, 'Add retries to the HTTP client');
  await waitFor('its chat', async () => (await chatTexts('#session-title'))[0] === 'Add retries to the HTTP client');
  await chatClick('#session-title');
  const rows = await waitFor('the session picker', async () => {
    const t = (await driver({ action: 'texts', selector: '.quick-input-widget:visible .monaco-list-row', settleMs: 300 })).texts;
    return t && t.length >= 2 ? t : undefined;
  });
  const mine = rows.find((r) => r.includes('Add retries to the HTTP client'));
  assert.ok(mine, JSON.stringify(rows));
  assert.match(mine, /just now|minutes? ago/);
  assert.match(mine, /complete/);
  assert.ok(!rows.some((r) => /\d{4}-\d\d-\d\dT/.test(r)), `a raw timestamp: ${JSON.stringify(rows)}`);
  await screenshot('hands-session-picker');
  await driver({ action: 'press', key: 'Escape' });
});

test('errors say what to do, and nothing a person read names wire methods or internal words', async () => {
  await vscode.commands.executeCommand('notifications.clearAll');
  await vscode.commands.executeCommand('dsh.goal.pause'); // the goal is complete: pause does not apply
  const error = await waitFor('the error', async () => (await notices()).find((t) => t.startsWith('dsh:')));
  assert.match(error, /complete/);
  assert.match(error, /pick an action|create|resume|edit/i);
  const jargon = /dsh\/[a-z]|\b(dis)?armed\b|\bplugins?\b|\brevision\b|field text/i;
  for (const m of seenNotices) assert.doesNotMatch(m, jargon, m);
  // The chat too: every item, label and card of this whole session.
  for (const t of await chatTexts('#log .item')) assert.doesNotMatch(t, jargon, t);
  for (const t of await chatTexts('header')) assert.doesNotMatch(t, jargon, t);
  await vscode.commands.executeCommand('notifications.clearAll');
});

export async function run(): Promise<void> { await runAll(); }

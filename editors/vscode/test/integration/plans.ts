// Plans of record, goals from plans and spend you can see, in a real VS Code against the real dshd
// and a real HTTP model peer (tests/editors/vscode/test_vscode_plans.py scripts a loopback server
// speaking OpenAI's streaming Chat Completions): a plan sent back with a line comment and feedback,
// its revision reviewed beside them; "Approve and start a goal"; a goal round waiting for an
// approval (the status bar, one notice); the round budget spent, raised and resumed; the rounds
// timeline in the chat header; the plan picker. The tests run in the script's order.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, notificationTexts, quickInput, runAll, screenshot, showNotifications, started, test, waitFor } from './harness';
import { commentOnLine, keepPlanningWith } from './ui';

let c: Controller;
const workspace = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const { texts: chatTexts, count: chatCount, click: chatClick } = chat;
const pending = '#log [data-kind="plan-review"].outcome-pending';
const OBJECTIVE = 'Carry out the approved plan "Plan: retries (revised)"';

interface LogEvent { seq: number; type: string; data: any; turn?: number }
function readLog(): LogEvent[] {
  const file = path.join(workspace(), '.dsh', 'sessions', c.session!.sessionId, 'log.jsonl');
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}
const waitingFor = () => c.session?.goal?.waitingFor;
const pickerRows = async () => (await driver({ action: 'texts', selector: '.quick-input-widget:visible .monaco-list-row', settleMs: 300 })).texts ?? [];

test('a revised plan\'s review sets the feedback and line comment of the round before beside it (card and compare view)', async () => {
  c = (await started({ showChat: true })).controller;
  await chat.type('#prompt', '/plan Add retries to the HTTP client');
  await driver({ action: 'press', key: 'Enter' });
  const first = await waitFor('the first review', () => c.reviews.current(), 30000);
  assert.equal(first.asked, undefined, 'a first plan has nothing asked before it');
  await vscode.commands.executeCommand('dsh.review.show');
  await commentOnLine(4, 'Never retry a 404.'); // "3. Retry on every exception."
  await waitFor('the comment', () => first.comments.length === 1);
  assert.equal(await keepPlanningWith('Cap the backoff at 30 seconds.'), true);

  const revised = await waitFor('the revised review', () => { const r = c.reviews.current(); return r && r !== first && !r.settled ? r : undefined; }, 30000);
  assert.equal(revised.question.title, 'Plan: retries (revised)');
  // What the daemon said was asked last time (the question's `previous`), as the card shows it.
  assert.deepEqual(revised.asked, {
    title: 'Plan: retries', feedback: 'Cap the backoff at 30 seconds.',
    comments: [{ line: 5, text: 'Never retry a 404.', quote: '3. Retry on every exception.' }],
  });
  await waitFor('the card\'s "last round" notes', async () => (await chatCount(`${pending} .asked`)) === 1);
  assert.deepEqual(await chatTexts(`${pending} .asked .asked-feedback`), ['Cap the backoff at 30 seconds.']);
  assert.deepEqual(await chatTexts(`${pending} .asked-comments li`), ['line 5 “3. Retry on every exception.”: Never retry a 404.']);
  assert.deepEqual((await chatTexts(`${pending} .actions button`)).map((t) => t.trim()),
    ['Approve', 'Approve and start a goal…', 'Keep planning', 'Comment on lines…', 'Compare with the previous plan']);
  await screenshot('review-previous-asked-card');
  // The compare view: the plan before on the left, with what was asked of it beside its lines.
  await chatClick(`${pending} button.compare`);
  const diff = await waitFor('the diff editor', () => {
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    return input instanceof vscode.TabInputTextDiff ? input : undefined;
  });
  assert.equal(diff.original.toString(), revised.previous!.uri.toString());
  assert.equal(diff.modified.toString(), revised.uri.toString());
  assert.equal(revised.askedThreads.length, 2);
  assert.deepEqual(revised.askedThreads.map((t) => t.range?.start.line), [0, 4]);
  await waitFor('the comments beside the previous plan', async () =>
    (await driver({ action: 'texts', selector: '.review-widget .comment-body', settleMs: 300 })).texts?.join('\n').includes('Never retry a 404.'));
  await screenshot('review-previous-asked-compare');
});

test('"Approve and start a goal" asks the budgets, approves, then starts a goal whose objective names the plan', async () => {
  const revised = c.reviews.current()!;
  await vscode.commands.executeCommand('notifications.clearAll'); // the goal's first round may wait at once: its notice must stay
  await chatClick(`${pending} button.approve-goal`);
  await driver({ action: 'type', text: '2', selector: quickInput('round budget') });
  await screenshot('approve-and-start-goal-rounds');
  await driver({ action: 'press', key: 'Enter' });
  await driver({ action: 'press', key: 'Enter', settleMs: 800 }); // no token budget
  const goal = await waitFor('the goal', () => c.session?.goal, 30000);
  assert.equal(goal.objective, OBJECTIVE);
  assert.equal(goal.maxRounds, 2);
  assert.equal(revised.decided, 'approve');
  // Two calls composed by the editor, in this order: the approval is in the log before the goal.
  const log = readLog();
  const approved = log.find((e) => e.type === 'tool/result' && e.data.callId === log.filter((x) => x.type === 'tool/call' && x.data.name === 'exit_plan_mode').pop()!.data.callId)!;
  const created = log.find((e) => e.type === 'goal/change' && e.data.op === 'create')!;
  assert.ok(approved && created && approved.seq < created.seq, `approval at ${approved?.seq}, goal at ${created?.seq}`);
  assert.equal(approved.data.review?.outcome ?? 'approved', 'approved');
  await waitFor('plan mode off', () => c.session?.plan.active === false);
});

test('a goal round waiting for an approval: the status bar says "waiting for you", one notice says so; it goes once answered', async () => {
  await waitFor('the approval card', async () => (await chatCount('#permissions .permission-request')) === 1, 40000);
  await waitFor('waitingFor from the daemon', () => waitingFor() === 'approval', 10000);
  assert.equal(c.session!.goal!.status.short, 'waiting for you');
  await waitFor('the status bar', () => c.statusText().waiting);
  const said = c.noticesShown.filter((t) => t.includes('is waiting for you'));
  assert.deepEqual(said, [`The goal "${OBJECTIVE}" is waiting for you: a request to approve.`]);
  assert.ok(c.goalChangesSeen.some((x) => x.startsWith('waiting ')), JSON.stringify(c.goalChangesSeen));
  await waitFor('the waiting notice', async () => (await notificationTexts()).some((t) => t.includes('is waiting for you')));
  await showNotifications();
  await screenshot('waiting-for-you');
  await vscode.commands.executeCommand('notifications.hideList');
  await chatClick('#permissions .permission-request button.allow');
  await waitFor('waitingFor to go', () => !waitingFor(), 20000);
  assert.equal(c.noticesShown.filter((t) => t.includes('is waiting for you')).length, 1, 'told more than once');
  await waitFor('the marker file', () => fs.existsSync(path.join(workspace(), 'marker.txt')), 20000);
});

test('the round budget spent: "Raise the budget and resume" edits the goal, then resumes it with the edit\'s new ref', async () => {
  await waitFor('the goal blocked for its budget', () => c.session?.goal?.blockedReason?.code === 'round-budget-exhausted', 60000);
  await waitFor('the budget notice', () => c.noticesShown.some((t) => t.startsWith('The goal spent its round budget')), 20000);
  assert.ok(c.session!.goal!.actions.some((a) => a.id === 'raise'), JSON.stringify(c.session!.goal!.actions));
  await waitFor('the header\'s raise button', async () => (await chatCount('#raise:visible')) === 1);
  await chatClick('#raise');
  await driver({ action: 'press', key: 'Control+A', settleMs: 600 });
  await driver({ action: 'type', text: '3', selector: quickInput('Raise the budget and resume') });
  await screenshot('raise-budget');
  await driver({ action: 'press', key: 'Enter' });
  // The raised goal runs its third round at once (the model completes it): the log says what was written.
  await waitFor('the goal complete', () => c.session?.goal?.phase === 'complete', 60000);
  assert.equal(c.session!.goal!.maxRounds, 3);
  const changes = readLog().filter((e) => e.type === 'goal/change');
  const from = changes.findIndex((e) => e.data.op === 'block');
  const [block, edit, resume] = changes.slice(from);
  assert.deepEqual([block, edit, resume].map((e) => e.data.op), ['block', 'edit', 'resume']);
  assert.equal(edit.data.goal.maxRounds, 3);
  assert.equal(edit.data.goal.revision, block.data.goal.revision + 1);
  assert.equal(resume.data.goal.revision, edit.data.goal.revision + 1, 'the resume named the edit\'s new ref');
  await waitFor('the round to end', () => !c.busy, 20000);
});

test('the chat header draws the goal\'s rounds as a timeline: one bar per round, the wait marked, words on hover', async () => {
  const rounds = await waitFor('three rounds', async () => { const r = await c.readRounds(); return r && r.rounds.length === 3 && r.rounds.every((x) => x.outcome !== 'running') ? r : undefined; }, 20000);
  assert.equal(rounds.goalId, c.session!.goal!.id);
  assert.ok(rounds.rounds[0].waitedMs > 0, 'round 1 waited for the approval');
  assert.equal(rounds.rounds[0].toolCalls, 1);
  assert.deepEqual(rounds.rounds.map((r) => r.outcome), ['end-turn', 'end-turn', 'end-turn']);
  await waitFor('the timeline line', async () => (await chatTexts('#timeline-toggle'))[0]?.includes('3 rounds'));
  await chatClick('#timeline-toggle');
  await waitFor('the bars', async () => (await chatCount('#timeline-chart g.round')) === 3);
  assert.equal(await chatCount('#timeline-chart g.round[data-round="1"] rect.waited'), 1);
  assert.equal(await chatCount('#timeline-chart g.round rect.waited'), 1);
  assert.equal(await chatCount('#timeline-chart g.round.outcome-ok'), 3);
  const html = (await driver({ action: 'html', selector: '#timeline-chart g.round[data-round="1"]', frame: 'chat' })).html ?? '';
  assert.match(html, /<title>Round 1: [^<]*1 tool call · waited for you [^<]* · ended: end-turn/);
  await screenshot('timeline');
  await driver({ action: 'screenshot', name: 'timeline-header', selector: 'header', frame: 'chat' });
});

test('the plan picker (header button) lists every plan newest first; a plan reopens read-only with its diff to the one before, or alone with its comments and feedback', async () => {
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await chatClick('#plans');
  const rows = await waitFor('the picker', async () => { const r = await pickerRows(); return r.length === 2 ? r : undefined; });
  assert.match(rows[0], /Plan: retries \(revised\)[\s\S]*approved/);
  assert.match(rows[1], /Plan: retries[\s\S]*sent back · 1 comment · feedback/);
  assert.match(rows[1], /Feedback: Cap the backoff at 30 seconds\./);
  await screenshot('plan-picker');
  await driver({ action: 'press', key: 'Enter' }); // the newest: the revised plan
  const diff = await waitFor('the diff to the plan before', () => {
    const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    return input instanceof vscode.TabInputTextDiff && input.modified.scheme === 'dsh-plan-history' ? input : undefined;
  });
  assert.match((await vscode.workspace.openTextDocument(diff.original)).getText(), /Retry on every exception/);
  assert.match((await vscode.workspace.openTextDocument(diff.modified)).getText(), /Retry only connection errors/);
  assert.match(vscode.window.tabGroups.activeTabGroup.activeTab!.label, /changes since "Plan: retries"/);
  await screenshot('plan-picker-diff');
  // The first plan: alone (nothing before it), with the comment beside its line and the feedback.
  const picked = vscode.commands.executeCommand('dsh.plan.history'); // the palette's way; settles once picked
  await waitFor('the picker again', async () => (await pickerRows()).length === 2);
  await driver({ action: 'press', key: 'ArrowDown' });
  await driver({ action: 'press', key: 'Enter' });
  await picked;
  const opened = await waitFor('the first plan', () => c.history.lastOpened?.record.title === 'Plan: retries' ? c.history.lastOpened : undefined);
  assert.equal(opened.before, undefined);
  assert.equal(opened.threads, 2);
  const doc = await waitFor('its document', () => vscode.window.activeTextEditor?.document.uri.toString() === opened.uri.toString() ? vscode.window.activeTextEditor.document : undefined);
  assert.match(doc.getText(), /^# Plan: retries\n/);
  const notes = await waitFor('the comment and the feedback beside the plan', async () => {
    const t = (await driver({ action: 'texts', selector: '.review-widget .comment-body', settleMs: 300 })).texts ?? [];
    return t.some((x) => x.includes('Never retry a 404.')) && t.some((x) => x.includes('Cap the backoff at 30 seconds.')) ? t : undefined;
  });
  assert.ok(notes.length >= 2);
  // Read-only: a past plan takes no edits and no new comments.
  assert.equal(await vscode.commands.executeCommand('dsh.review.approve'), false);
  await screenshot('plan-picker-first-plan');
});

test('a goal round waiting for a plan review is a new waiting spell: one more notice, in its own words; approved, the goal goes on', async () => {
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await vscode.commands.executeCommand('dsh.goal.clear');
  await waitFor('no goal', () => c.session?.goal === null);
  await vscode.commands.executeCommand('dsh.plan.on');
  await waitFor('plan mode on', () => c.session?.plan.active === true);
  await vscode.commands.executeCommand('dsh.goal.create', { objective: 'Document the retry policy', maxRounds: 1 });
  const review = await waitFor('the round\'s plan review', () => c.reviews.current(), 30000);
  assert.equal(review.question.title, 'Plan: docs');
  await waitFor('waitingFor from the daemon', () => waitingFor() === 'plan-review', 10000);
  await waitFor('the status bar', () => c.statusText().waiting && /waiting for you/.test(c.goalItem.text));
  assert.match(c.goalItem.text, /^\$\(bell\) \d+\/1 · .*waiting for you$/, 'the goal\'s own words, the bell in front');
  const said = await waitFor('the second spell\'s notice', () => { const t = c.noticesShown.filter((x) => x.includes('is waiting for you')); return t.length === 2 ? t : undefined; });
  assert.equal(said[1], 'The goal "Document the retry policy" is waiting for you: a plan to review.');
  await waitFor('the notice on screen', async () => (await notificationTexts()).some((t) => t.includes('waiting for you: a plan to review')));
  await showNotifications();
  await screenshot('waiting-for-you-plan-review');
  await vscode.commands.executeCommand('notifications.hideList');
  assert.equal(await vscode.commands.executeCommand('dsh.review.approve'), true);
  await waitFor('the goal complete', () => c.session?.goal?.phase === 'complete', 30000);
  assert.equal(waitingFor(), undefined);
  assert.equal(c.noticesShown.filter((x) => x.includes('is waiting for you')).length, 2, 'told more than once for a spell');
});

export async function run(): Promise<void> { await runAll(); }

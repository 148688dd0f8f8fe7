// Runs in a real VS Code whose workspace names a dshd that does not exist.
// 1. The extension must say so, with the fix, and show the daemon as down (not hang, not pretend).
// 2. The plan review UI, driven as a person would through the workbench page: it answers
//    `dsh/questions/ask` exactly as the language client's handler calls it, so no daemon is needed.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import type { DshApi } from '../../src/extension';
import type { QuestionsAskParams } from '../../src/protocol';
import { driver, notificationTexts, runAll, screenshot, showNotifications, test, waitFor } from './harness';
import { commentOnLine, keepPlanningWith } from './ui';

let c: Controller;

test('a dshd that cannot be started gives a clear error naming the fix', async () => {
  const ext = vscode.extensions.getExtension<DshApi>('dshd.dshd-vscode');
  assert.ok(ext, 'extension not found');
  const api = await ext.activate();
  assert.equal(await api.ready, false);
  c = api.controller;
  assert.equal(c.connection, 'failed');
  assert.match(c.daemon.lastError ?? '', /"\/nonexistent\/dshd" was not found/);
  assert.match(c.daemon.lastError ?? '', /set "dsh\.server\.command"/);
  assert.equal(c.statusText().goal, '$(error) dsh: not running');
  assert.equal(c.statusText().warning, true);
  await showNotifications(); // the centre holds every notification, toast or not
  const shown = await driver({ action: 'texts', selector: '.notifications-center .notification-list-item-message', settleMs: 500 });
  assert.ok(shown.texts?.some((t) => t.includes('dshd could not be started') && t.includes('dsh.server.command')), JSON.stringify(shown.texts));
  await screenshot('error-no-daemon');
  await vscode.commands.executeCommand('notifications.hideList');
  const shot = await screenshot('status-no-daemon', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => t.includes('dsh: not running')), JSON.stringify(shot.statusTexts));
});

test('commands that need the daemon fail with a message, not a hang', async () => {
  const r = await vscode.commands.executeCommand('dsh.goal.create', { objective: 'x' });
  assert.equal(r, undefined);
  assert.equal(c.session, undefined);
});

const PLAN = '# Plan: retries\n\n1. Add a RetryPolicy.\n2. Wrap send().\n3. Retry on every exception.\n4. Add tests.\n';
const REVISED = '# Plan: retries\n\n1. Add a RetryPolicy with capped backoff.\n2. Wrap send().\n3. Retry only connection errors and 502/503/504.\n4. Add tests.\n';
let asked = 0;
function ask(plan = PLAN): { answer: Thenable<unknown>; cancel: () => void } {
  const id = `q${++asked}`;
  const params: QuestionsAskParams = {
    agentId: 'a-test', sessionId: 's-0123456789abcdefghjkmnpqrs',
    questions: [{ id, kind: 'plan-review', title: 'Plan: retries', plan, choices: ['approve', 'revise'] }],
  };
  const source = new vscode.CancellationTokenSource();
  return { answer: c.reviews.ask(params, source.token), cancel: () => source.cancel() };
}

/** The open review, brought to the front as a person would (it opens without taking the focus). */
async function reviewInFront() {
  const review = await waitFor('a plan review', () => {
    const r = c.reviews.current();
    return r && !r.settled ? r : undefined;
  });
  await vscode.commands.executeCommand('dsh.review.show');
  return waitFor('the plan review in front', () => vscode.window.activeTextEditor?.document.uri.toString() === review.uri.toString() ? review : undefined);
}

/** A tab of a plan under review (its text or its rendered preview). */
const planTabOpen = () => vscode.window.tabGroups.all.some((g) => g.tabs.some((t) =>
  (t.input instanceof vscode.TabInputText || t.input instanceof vscode.TabInputCustom) && t.input.uri.scheme === 'dsh-plan'));

test('review UI: a comment typed in the gutter widget and feedback typed in the input box are sent, each comment with its line', async () => {
  const { answer } = ask();
  const review = await reviewInFront();
  const editor = vscode.window.activeTextEditor!;
  assert.equal(editor.document.getText(), PLAN);
  assert.equal(editor.document.languageId, 'markdown');
  // Line 5 (1-based) is "3. Retry on every exception."
  await commentOnLine(4, 'Retrying a 404 only hides bugs.');
  await waitFor('the comment to be recorded', () => review.comments.length === 1);
  await screenshot('review');
  const keep = keepPlanningWith('Cap the backoff.');
  assert.equal(await keep, true);
  assert.deepEqual(await answer, {
    answers: [{ id: review.question.id, choice: 'revise', feedback: 'Cap the backoff.', comments: [{ line: 5, text: 'Retrying a 404 only hides bugs.' }] }],
  });
  await waitFor('the review to close', () => !planTabOpen());
});

test('review UI: the Approve button on the editor title approves', async () => {
  const { answer } = ask();
  const review = await reviewInFront();
  await driver({ action: 'click', selector: '.editor-actions a.action-label[aria-label^="Approve Plan"]' });
  assert.deepEqual(await answer, { answers: [{ id: review.question.id, choice: 'approve' }] });
});

test('review UI: closing the plan decides nothing: the question stays open until the daemon withdraws it (never an approval)', async () => {
  const { answer, cancel } = ask();
  const review = await reviewInFront();
  let answered = false;
  void Promise.resolve(answer).then(() => { answered = true; });
  await driver({ action: 'click', selector: '.tab.active .tab-actions .action-label' });
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(answered, false, 'closing the plan answered it');
  assert.equal(review.settled, false);
  assert.equal(c.reviews.all().length, 1);
  cancel();
  assert.equal(await answer, undefined, 'a withdrawn review gives no answer (the daemon is sent RequestCancelled)');
});

test('review UI: a question the daemon withdraws closes the review, unanswered', async () => {
  const { answer, cancel } = ask();
  await reviewInFront();
  cancel();
  assert.equal(await answer, undefined, 'a withdrawn review gives no answer (the daemon is sent RequestCancelled)');
  assert.equal(c.reviews.all().length, 0);
});


const closeActiveTab = () => driver({ action: 'click', selector: '.tab.active .tab-actions .action-label' });
const dialogButtons = '.monaco-dialog-box .dialog-buttons a.monaco-button';

test('review UI: closing the plan with an unsent comment asks nothing and loses nothing; it opens again with the comment, which Keep planning sends', async () => {
  const { answer } = ask();
  const review = await reviewInFront();
  await commentOnLine(2, 'Why a class and not a function?');
  await waitFor('the comment to be recorded', () => review.comments.length === 1);
  await closeActiveTab();
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal((await driver({ action: 'count', selector: dialogButtons, settleMs: 300 })).count, 0, 'closing asked');
  assert.equal(review.settled, false);
  await reviewInFront();
  assert.deepEqual(review.comments.map((c) => c.body), ['Why a class and not a function?']);
  await screenshot('review-reopened-with-comment');
  assert.equal(await keepPlanningWith(''), true); // the comment alone is enough
  assert.deepEqual(await answer, { answers: [{ id: review.question.id, choice: 'revise', comments: [{ line: 3, text: 'Why a class and not a function?' }] }] });
});

test('review UI: the keyboard approves (Ctrl+Alt+Enter); the review\'s notification and tabs go with it', async () => {
  const { answer } = ask();
  const review = await reviewInFront();
  await waitFor('the review notification', async () => (await notificationTexts()).some((t) => t.includes('Plan review: Plan: retries')));
  await driver({ action: 'press', key: 'Control+Alt+Enter' });
  assert.deepEqual(await answer, { answers: [{ id: review.question.id, choice: 'approve' }] });
  await waitFor('the notification to go', async () => !(await notificationTexts()).some((t) => t.includes('Plan review:')));
  await waitFor('the tabs to go', () => !planTabOpen());
});

test('review UI: the keyboard keeps planning (Ctrl+Alt+K) with feedback; a revised plan compares with the previous one', async () => {
  const { answer } = ask(REVISED);
  const review = await reviewInFront();
  assert.ok(review.previous, 'no previous plan to compare with');
  assert.equal(await vscode.commands.executeCommand('dsh.review.compare'), true);
  await waitFor('the diff editor', () => vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputTextDiff);
  const diff = vscode.window.tabGroups.activeTabGroup.activeTab!.input as vscode.TabInputTextDiff;
  assert.equal(diff.modified.toString(), review.uri.toString());
  assert.equal((await vscode.workspace.openTextDocument(diff.original)).getText(), PLAN);
  await screenshot('review-compare');
  await driver({ action: 'click', selector: '.monaco-diff-editor .modified .view-lines' });
  await driver({ action: 'press', key: 'Control+Alt+K' });
  await driver({ action: 'type', text: 'Name the status codes.', selector: '.quick-input-widget:visible:has-text("Keep planning") input' });
  await driver({ action: 'press', key: 'Enter' });
  assert.deepEqual(await answer, { answers: [{ id: review.question.id, choice: 'revise', feedback: 'Name the status codes.' }] });
  await waitFor('the diff to close with the review', () => !vscode.window.tabGroups.all.some((g) => g.tabs.some((t) => t.input instanceof vscode.TabInputTextDiff)));
});

export async function run(): Promise<void> { await runAll(); }

// Runs inside a real VS Code extension host (see scripts/run-vscode-tests.mjs), against the real
// dshd started by the extension, in a workspace whose scripted model (fixture/script.json) replies
// in a fixed order: the tests below run in that order and each consumes its replies.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import type { DshApi } from '../../src/extension';
import type { PlanReview } from '../../src/review';
import { driver, notificationTexts, quickInput, runAll, screenshot, showNotifications, test, waitFor } from './harness';
import { commentOnLine, keepPlanningWith } from './ui';

let api: DshApi;
let transcript: vscode.TextDocument | undefined;
let c: Controller;
const seenStatus: string[] = [];
const workspace = () => vscode.workspace.workspaceFolders![0].uri.fsPath;

interface LogEvent { seq: number; type: string; data: any; turn?: number }
function readLog(sessionId: string): LogEvent[] {
  const file = path.join(workspace(), '.dsh', 'sessions', sessionId, 'log.jsonl');
  // Complete lines only: the daemon may be appending the last one right now.
  const lines = fs.readFileSync(file, 'utf8').split('\n').slice(0, -1);
  return lines.filter(Boolean).map((l) => JSON.parse(l));
}

/** The next plan review, brought to the front as a person would (it opens without taking the focus). */
async function nextReview(): Promise<PlanReview> {
  const review = await waitFor('a plan review to open', () => {
    const r = c.reviews.current();
    return r && !r.settled ? r : undefined;
  });
  await vscode.commands.executeCommand('dsh.review.show');
  await waitFor('the plan in front', () => vscode.window.activeTextEditor?.document.uri.toString() === review.uri.toString());
  return review;
}

const planText = () => c.statusText().plan;


test('the extension activates and starts dshd for the workspace', async () => {
  const ext = vscode.extensions.getExtension<DshApi>('dshd.dshd-vscode');
  assert.ok(ext, 'extension not found');
  api = await ext.activate();
  c = api.controller;
  c.onDidChangeStatus(() => { const t = c.statusText().goal; if (seenStatus[seenStatus.length - 1] !== t) seenStatus.push(t); });
  assert.equal(await api.ready, true, 'dshd did not start');
  assert.equal(c.connection, 'running');
  const caps = c.daemon.client?.initializeResult?.capabilities.experimental as { dsh?: { version: number } } | undefined;
  assert.equal(caps?.dsh?.version, 1, 'the daemon does not declare dsh protocol version 1');
  assert.equal(c.statusText().goal, '$(target) no session');
  const commands = await vscode.commands.getCommands(true);
  for (const id of ['dsh.session.new', 'dsh.session.open', 'dsh.agent.prompt', 'dsh.agent.steer', 'dsh.agent.cancel', 'dsh.plan.on', 'dsh.plan.off',
    'dsh.goal.create', 'dsh.goal.edit', 'dsh.goal.pause', 'dsh.goal.resume', 'dsh.goal.complete', 'dsh.goal.block', 'dsh.goal.clear', 'dsh.transcript.show']) {
    assert.ok(commands.includes(id), `command ${id} missing`);
  }
});

test('a new session shows "no goal" and plan mode off; plan mode on is shown', async () => {
  const s = await vscode.commands.executeCommand<{ sessionId: string }>('dsh.session.new', { title: 'vscode integration' });
  assert.ok(s?.sessionId);
  assert.equal(c.statusText().goal, '$(target) no goal');
  assert.equal(planText(), '$(checklist) plan: off');
  await vscode.commands.executeCommand('dsh.plan.on');
  await waitFor('plan: on in the status bar', () => planText() === '$(checklist) plan: on');
});

test('exit_plan_mode opens the review; Keep planning sends feedback and a line comment, plan mode stays on', async () => {
  const prompt = vscode.commands.executeCommand<{ stopReason: string }>('dsh.agent.prompt', { text: 'Add retries to the HTTP client' });
  const review = await nextReview();
  assert.match(review.question.plan, /^# Plan: retries/);
  assert.equal(vscode.window.activeTextEditor!.document.getText(), review.question.plan);
  assert.equal(vscode.window.activeTextEditor!.document.languageId, 'markdown');
  await commentOnLine(4, 'Retrying a 404 only hides bugs: retry connection errors and 502/503/504.'); // 0-based: "3. Retry on every exception."
  await waitFor('the comment to be recorded', () => review.comments.length === 1);
  await screenshot('review');
  assert.equal(await keepPlanningWith('Cap the backoff.'), true);
  const result = await prompt;
  assert.ok(result, 'prompt gave no result');
  const log = readLog(c.session!.sessionId);
  const toolResult = log.filter((e) => e.type === 'tool/result').pop()!;
  assert.equal(toolResult.data.ok, false);
  assert.match(toolResult.data.content, /Cap the backoff\./);
  assert.match(toolResult.data.content, /Line 5: 3\. Retry on every exception\.\n\s*Comment: Retrying a 404 only hides bugs/);
  assert.ok(!log.some((e) => e.type === 'plan/mode' && e.data.active === false), 'plan mode was turned off');
  assert.equal(planText(), '$(checklist) plan: on');
  assert.equal(c.reviews.all().length, 0, 'the review stayed open after it was answered');
});

test('closing the review with a comment decides nothing: it opens again with the comment, which Keep planning sends; plan mode stays on', async () => {
  const prompt = vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Show me the plan again' });
  const review = await nextReview();
  await commentOnLine(2, 'Name the class RetryPolicy?');
  await waitFor('the comment to be recorded', () => review.comments.length === 1);
  const results = () => readLog(c.session!.sessionId).filter((e) => e.type === 'tool/result').length;
  const before = results();
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(review.settled, false, 'closing the plan answered it');
  assert.equal(results(), before, 'the daemon got an answer');
  assert.equal(c.statusText().waiting, true, 'the status does not say the question waits');
  await vscode.commands.executeCommand('dsh.review.show');
  await waitFor('the plan again', () => vscode.window.activeTextEditor?.document.uri.toString() === review.uri.toString());
  assert.equal(review.comments.length, 1, 'the comment was lost');
  await screenshot('review-reopened-with-comment');
  assert.equal(await keepPlanningWith('Name it.'), true);
  await prompt;
  const log = readLog(c.session!.sessionId);
  const toolResult = log.filter((e) => e.type === 'tool/result').pop()!;
  assert.equal(toolResult.data.ok, false);
  assert.match(toolResult.data.content, /Name the class RetryPolicy\?/);
  assert.ok(!log.some((e) => e.type === 'plan/mode' && e.data.active === false), 'plan mode was turned off');
  const plan = await c.daemon.request('dsh/plan/get', { agentId: c.session!.agentId });
  assert.equal(plan.active, true);
  assert.equal(planText(), '$(checklist) plan: on');
});

test('a revised plan compares with the previous one; Approve from the palette turns plan mode off and ends the review everywhere', async () => {
  const prompt = vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Revise it' });
  const review = await nextReview();
  assert.match(review.question.plan, /revised/);
  await waitFor('the review notification', async () => (await notificationTexts()).some((t) => t.includes('Plan review:')));
  assert.match(review.previous?.plan ?? '', /Retry on every exception/);
  assert.equal(await vscode.commands.executeCommand('dsh.review.compare'), true);
  await waitFor('the diff editor', () => vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputTextDiff);
  await screenshot('review-compare');
  assert.equal(await vscode.commands.executeCommand('dsh.review.approve'), true);
  await prompt;
  await waitFor('plan: off in the status bar', () => planText() === '$(checklist) plan: off');
  const log = readLog(c.session!.sessionId);
  const toolResult = log.filter((e) => e.type === 'tool/result').pop()!;
  assert.equal(toolResult.data.ok, true);
  assert.deepEqual(log.filter((e) => e.type === 'plan/mode').map((e) => e.data.active), [true, false]);
  // Nothing stale is left: no notification, no plan tab, no diff.
  await waitFor('the notification to go', async () => !(await notificationTexts()).some((t) => t.includes('Plan review:')));
  const planTab = (t: vscode.Tab) => (t.input instanceof vscode.TabInputText || t.input instanceof vscode.TabInputCustom) && t.input.uri.scheme === 'dsh-plan';
  await waitFor('the tabs to go', () => !vscode.window.tabGroups.all.some((g) => g.tabs.some((t) => planTab(t) || t.input instanceof vscode.TabInputTextDiff)));
});

test('the transcript loads the history and follows new events', async () => {
  const doc = await vscode.commands.executeCommand<vscode.TextDocument>('dsh.transcript.show');
  assert.ok(doc);
  transcript = doc;
  const text = doc.getText();
  assert.match(text, /^# Session "vscode integration"/);
  assert.match(text, /Add retries to the HTTP client/);
  assert.match(text, /### Plan review: Plan: retries for the HTTP client \(sent back with feedback\)/);
  assert.match(text, /### Plan review: Plan: retries for the HTTP client \(revised\) \(approved\)/);
  assert.match(text, /Plan approved\. Starting with the RetryPolicy\./);
});

test('a new goal shows 0/40 · active and moves as rounds are spent', async () => {
  seenStatus.length = 0;
  // Through the two input boxes, as a person would: objective, then the round budget.
  const created = vscode.commands.executeCommand<{ maxRounds: number }>('dsh.goal.create');
  await driver({ action: 'type', text: 'Retries for the HTTP client', selector: quickInput('New goal (1/3)') });
  await driver({ action: 'press', key: 'Enter' });
  await driver({ action: 'type', text: '40', selector: quickInput('New goal (2/3)') });
  await driver({ action: 'press', key: 'Enter' });
  await driver({ action: 'type', text: '', selector: quickInput('New goal (3/3)') });
  await driver({ action: 'press', key: 'Enter' }); // no token budget
  assert.equal((await created)?.maxRounds, 40);
  await waitFor('2/40 · active', () => c.statusText().goal === '$(target) 2/40 · active', 15000);
  assert.ok(seenStatus.includes('$(target) 0/40 · active'), `status went ${JSON.stringify(seenStatus)}`);
  assert.ok(seenStatus.includes('$(target) 1/40 · active'), `status went ${JSON.stringify(seenStatus)}`);
  const shot = await screenshot('status-active', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => t.includes('2/40 · active')), `DOM status bar: ${JSON.stringify(shot.statusTexts)}`);
  assert.equal(c.statusText().warning, false);
  // The open transcript follows live events.
  await waitFor('the transcript to show the goal', () => transcript?.getText().includes('Goal set: "Retries for the HTTP client"'));
  await waitFor('the transcript to show round 2', () => transcript?.getText().includes('Goal round 2 of 40'));
});

test('pause, block (warning colour) and resume from commands; the model completes the goal', async () => {
  await vscode.commands.executeCommand('dsh.goal.pause');
  await waitFor('paused', () => c.statusText().goal === '$(target) 2/40 · paused');
  await vscode.commands.executeCommand('dsh.goal.edit', { maxRounds: 50 });
  await waitFor('a budget of 50', () => c.statusText().goal === '$(target) 2/50 · paused');
  await driver({ action: 'hover', selector: '#workbench\\.parts\\.statusbar .statusbar-item:has-text("2/50 · paused")' });
  await screenshot('status-tooltip', undefined);
  await driver({ action: 'press', key: 'Escape' });
  await vscode.commands.executeCommand('dsh.goal.block', { code: 'needs-decision', message: 'Which status codes are retryable?' });
  await waitFor('blocked', () => c.statusText().goal === '$(target) 2/50 · blocked: needs-decision');
  assert.equal(c.statusText().warning, true);
  const tooltip = c.goalItem.tooltip as vscode.MarkdownString;
  assert.match(tooltip.value, /needs-decision/);
  assert.match(tooltip.value, /Retries for the HTTP client/);
  const shot = await screenshot('status-blocked', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => t.includes('2/50 · blocked: needs-decision')), `DOM status bar: ${JSON.stringify(shot.statusTexts)}`);
  // A click on the status bar offers the actions valid for a blocked goal.
  await driver({ action: 'click', selector: '#workbench\\.parts\\.statusbar .statusbar-item:has-text("2/50 · blocked: needs-decision")' });
  const rows = await driver({ action: 'texts', selector: '.quick-input-widget .monaco-list-row', settleMs: 700 });
  assert.deepEqual(rows.texts?.map((t) => t.trim()), ['Edit the goal…', 'Resume', 'Mark complete', 'Clear']);
  await driver({ action: 'press', key: 'Escape' });
  // Someone else wrote meanwhile (here: our view is made one revision old): the resume comes back
  // stale-revision; the extension reads the goal again and asks; the person says Resume.
  const goal = c.session!.goal!;
  c.session!.goal = { ...goal, revision: goal.revision - 1 };
  const resumed = vscode.commands.executeCommand('dsh.goal.resume');
  // The question waits in the notification centre (toasts hide after a while).
  await waitFor('the question', async () => {
    await showNotifications();
    const shown = await driver({ action: 'texts', selector: '.notifications-center .notification-list-item-message', settleMs: 300 });
    return shown.texts?.some((t) => t.includes('now blocked: needs-decision, 2 of 50 rounds used')); // the daemon's words
  });
  await driver({ action: 'click', selector: '.notifications-center .notification-list-item:has-text("changed meanwhile") a.monaco-button:has-text("Resume")' });
  await vscode.commands.executeCommand('notifications.hideList');
  assert.equal(((await resumed) as { phase: string } | undefined)?.phase, 'active');
  await waitFor('complete', () => c.statusText().goal === '$(target) 3/50 · complete', 15000);
  await vscode.commands.executeCommand('dsh.goal.clear');
  await waitFor('no goal', () => c.statusText().goal === '$(target) no goal');
});

test('steer reaches the running turn; cancel ends it', async () => {
  const sessionId = c.session!.sessionId;
  const prompt = vscode.commands.executeCommand<{ stopReason: string }>('dsh.agent.prompt', { text: 'Next step, slowly' });
  await waitFor('the turn to run', () => readLog(sessionId).some((e) => e.type === 'user/message' && e.data.text === 'Next step, slowly'));
  assert.deepEqual(await vscode.commands.executeCommand('dsh.agent.steer', { text: 'Also add jitter.' }), { queued: true });
  await vscode.commands.executeCommand('dsh.agent.cancel');
  assert.equal((await prompt)?.stopReason, 'cancelled');
  const log = readLog(sessionId);
  const close = log.filter((e) => e.type === 'turn/close').pop()!;
  assert.equal(close.data.stopReason, 'cancelled');
  assert.ok(log.some((e) => e.type === 'user/message' && e.data.text === 'Also add jitter.' && e.seq < close.seq), 'the steered text is not in the turn');
});

test('a daemon that crashes mid-review: not an approval; one message with how it ended; the same session reopens', async () => {
  const sessionId = c.session!.sessionId;
  const agentBefore = c.session!.agentId;
  await vscode.commands.executeCommand('dsh.plan.on');
  await waitFor('plan: on', () => planText() === '$(checklist) plan: on');
  void vscode.commands.executeCommand('dsh.agent.prompt', { text: 'One more plan' });
  const review = await nextReview();
  await vscode.commands.executeCommand('notifications.clearAll'); // what follows is the crash's alone
  const pid = c.daemon.pid;
  assert.ok(pid && pid > 1, 'no daemon pid');
  process.kill(pid, 'SIGKILL');
  await waitFor('the review to end', () => review.settled);
  // The extension starts the daemon again and opens the session it had (a new agent, same session).
  await waitFor('the session to reopen', () => c.connection === 'running' && c.session?.sessionId === sessionId && c.session.agentId !== agentBefore, 30000);
  assert.equal(c.session?.title, 'vscode integration');
  assert.equal(planText(), '$(checklist) plan: on', 'plan mode is off after the daemon was lost mid-review');
  const crashed = await waitFor('the crash message', async () => {
    const t = (await notificationTexts()).filter((m) => /crash|stopped/i.test(m));
    return t.length ? t : undefined;
  });
  assert.equal(crashed.length, 1, `said more than once: ${JSON.stringify(crashed)}`);
  assert.match(crashed[0], /dshd crashed \(killed by SIGKILL\)\. It was restarted and reopened "vscode integration"/);
  await showNotifications();
  await screenshot('crash-recovered');
  await vscode.commands.executeCommand('notifications.hideList');
  await vscode.commands.executeCommand('notifications.clearAll');
});

test('fork switches to a copy that inherits plan mode from the log; close leaves no session', async () => {
  const parent = c.session!.sessionId;
  const fork = await vscode.commands.executeCommand<{ sessionId: string; plan: { active: boolean } }>('dsh.session.fork');
  assert.ok(fork && fork.sessionId !== parent);
  assert.equal(fork.plan.active, true);
  assert.equal(planText(), '$(checklist) plan: on');
  assert.equal(readLog(fork.sessionId)[0].data.forkedFrom.sessionId, parent);
  await vscode.commands.executeCommand('dsh.session.close');
  assert.equal(c.session, undefined);
  assert.equal(c.statusText().goal, '$(target) no session');
});

test('one bad config key: one error naming it and its file, whose button opens the file at the key', async () => {
  const file = path.join(workspace(), '.dsh', 'config.toml');
  const good = fs.readFileSync(file, 'utf8');
  fs.writeFileSync(file, `${good}\n[goals]\nmaxRounds = 0\n`);
  const keyLine = `${good}\n[goals]`.split('\n').length; // 0-based line of "maxRounds = 0"
  await vscode.commands.executeCommand('notifications.clearAll');
  try {
    assert.equal(await vscode.commands.executeCommand('dsh.server.restart'), false);
    const errors = await waitFor('the config error', async () => {
      const t = await notificationTexts();
      return t.length ? t : undefined;
    });
    assert.equal(errors.length, 1, `more than one message: ${JSON.stringify(errors)}`);
    assert.match(errors[0], /dshd cannot start: invalid config goals\.maxRounds: must be at least 1 \(in \.dsh\/config\.toml\)/);
    await showNotifications();
    await screenshot('config-error');
    await driver({ action: 'click', selector: '.notifications-center .notification-list-item:has-text("maxRounds") a.monaco-button:has-text("Open config.toml")' });
    const editor = await waitFor('config.toml open at the key', () => {
      const e = vscode.window.activeTextEditor;
      return e?.document.uri.fsPath === file && e.selection.active.line === keyLine ? e : undefined;
    });
    assert.equal(editor.document.lineAt(keyLine).text, 'maxRounds = 0');
    await screenshot('config-error-opened');
  } finally {
    fs.writeFileSync(file, good);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('notifications.clearAll');
  }
  assert.equal(await vscode.commands.executeCommand('dsh.server.restart'), true);
});

export async function run(): Promise<void> { await runAll(); }

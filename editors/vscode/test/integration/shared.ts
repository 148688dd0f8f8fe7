// Several clients on one live session, in a real VS Code: the extension reaches the workspace's
// shared daemon through `dshd connect` (the default mode), and a second client (another
// `dshd connect` process, spoken to from this suite with vscode-jsonrpc: test/integration/peer.ts)
// opens the same session. Each sees the other's prompts and the replies; VS Code shows who else is
// attached; a plan review or an approval goes to both, the first answer counts, and the other's
// windows close with one line saying who answered what. The scripted model
// (fixture/shared-script.json) replies in a fixed order: the tests run in that order.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, notificationTexts, runAll, screenshot, started, test, waitFor } from './harness';
import { Peer } from './peer';

const PEER = 'peer editor';
let c: Controller;
let peer: Peer;
const folder = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const dshd = () => vscode.workspace.getConfiguration('dsh.server').get<string>('command')!;
const myName = () => `VS Code — ${path.basename(folder())}`; // the extension's default dsh.clientName

/** Chat item texts of one kind in the chat page. */
const chatTexts = (kind: string, part = '') => chat.texts(`#log [data-kind="${kind}"]${part}`);

/** Every tab showing one of this extension's own documents (plans, approvals). */
function ownTabs(scheme: string): vscode.Tab[] {
  return vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => {
    const input = t.input;
    const uris = input instanceof vscode.TabInputText || input instanceof vscode.TabInputCustom ? [input.uri]
      : input instanceof vscode.TabInputTextDiff ? [input.original, input.modified] : [];
    return uris.some((u) => u.scheme === scheme);
  });
}

async function turnEnds(n: number): Promise<void> {
  await waitFor(`${n} turn ends in VS Code's chat`, () => (c.feed.store?.items.filter((i) => i.kind === 'turn-end').length ?? 0) >= n, 40000);
}

test('VS Code reaches the workspace\'s shared daemon through dshd connect (the default mode)', async () => {
  c = (await started({ showChat: true })).controller;
  assert.equal(c.daemon.mode, 'connect');
  assert.equal(vscode.workspace.getConfiguration('dsh.server').get('mode'), 'connect', 'connect is the default');
  assert.equal(c.connection, 'running');
  const s = await vscode.commands.executeCommand<{ sessionId: string }>('dsh.session.new', { title: 'one session, two clients' });
  assert.ok(s?.sessionId);
  assert.equal(c.statusText().others, undefined, 'nobody else is attached yet');
  // The daemon was started for this window: its settings are the ones in force (no false warning).
  await c.daemon.sharedSettingsChecked;
  assert.deepEqual(c.daemon.sharedSettingsNotInForce, []);
});

test('another client opens the same session: it gets the live agent, and each sees the other attached', async () => {
  peer = await Peer.start(dshd(), folder(), PEER);
  const opened = await peer.request('dsh/session/open', { sessionId: c.session!.sessionId });
  assert.equal(opened.agentId, c.session!.agentId, 'the second client got another agent, not the live one');
  // As an editor that shows the conversation does: its chat items, then their upserts as they come.
  await peer.request('dsh/chat/get', { agentId: opened.agentId });
  await waitFor('the other client in the status bar', () => c.statusText().others === `$(organization) ${PEER}`);
  assert.deepEqual(c.clientChanges, [`${PEER} joined this session.`]);
  assert.match(String(c.clientsItem.tooltip), new RegExp(`Also attached to this session: ${PEER}`));
  await waitFor('"also here" in the chat header', async () => (await chat.texts('#others:visible')).join('') === `also here: ${PEER}`);
  // The peer is told the same list from its side: itself, and this window by its name.
  const lists = peer.seen('dsh/session/clients', (p) => p.agentId === opened.agentId);
  const last = lists[lists.length - 1];
  assert.ok(last, 'the peer got no dsh/session/clients');
  assert.deepEqual(last.clients.map((x: any) => [x.clientName, x.you]).sort(), [[PEER, true], [myName(), false]].sort());
  await screenshot('shared-attached');
});

test('a prompt from the other client and its reply show in VS Code; VS Code\'s prompt reaches the other client', async () => {
  const agentId = c.session!.agentId;
  const answered = peer.request('dsh/agent/prompt', { agentId, text: 'Hello from the other editor' });
  await waitFor('the peer\'s prompt in VS Code\'s chat', async () => (await chatTexts('user-message', ' .text')).includes('Hello from the other editor'));
  await waitFor('the reply in VS Code\'s chat', async () => (await chatTexts('assistant-message')).some((t) => t.includes('Hello to both of you')));
  await answered;
  await turnEnds(1);
  // Typed in VS Code's chat box, as a person does.
  await chat.type('#prompt', 'And hello from VS Code');
  await driver({ action: 'press', key: 'Enter' });
  await turnEnds(2);
  await waitFor('VS Code\'s prompt at the peer', () => peer.seen('dsh/chat/item', (p) => p.item?.kind === 'user-message' && p.item.text === 'And hello from VS Code').length > 0);
  await waitFor('the reply at the peer', () => peer.seen('dsh/chat/item', (p) => p.item?.kind === 'assistant-message' && /VS Code said hello too/.test(p.item.text)).length > 0);
  await screenshot('shared-prompts');
});

test('a plan review goes to both; the other client approves first: VS Code\'s review closes and says who approved', async () => {
  const agentId = c.session!.agentId;
  await peer.request('dsh/plan/set', { agentId, active: true });
  await waitFor('plan: on in VS Code', () => c.statusText().plan === '$(checklist) plan: on');
  const turn = peer.request('dsh/agent/prompt', { agentId, text: 'Plan retries for the client' });
  const review = await waitFor('the review in VS Code', () => c.reviews.current(), 30000);
  await waitFor('the plan\'s tabs in VS Code', () => ownTabs('dsh-plan').length > 0);
  const ask = await waitFor('the review at the peer', () => peer.openAsk('dsh/questions/ask'));
  const question = ask.params.questions[0];
  assert.equal(question.id, review.question.id, 'the two clients were asked different questions');
  await screenshot('shared-review-both');
  ask.answer({ answers: [{ id: question.id, choice: 'approve' }] });
  await waitFor('VS Code\'s review to end', () => review.settled && !c.reviews.current());
  await waitFor('its tabs to close', () => ownTabs('dsh-plan').length === 0);
  const line = `${PEER} approved the plan "Plan: retries".`;
  assert.deepEqual(c.resolvedElsewhere, [line]);
  assert.ok((await notificationTexts()).includes(line), 'the one line is not in the notifications');
  await waitFor('the approved card in VS Code\'s chat', async () => (await chat.count('#log [data-kind="plan-review"].outcome-approved')) === 1);
  await turn;
  await turnEnds(3);
  assert.ok((await chatTexts('assistant-message')).some((t) => t.includes('Approved elsewhere')));
  // The peer answered: it was not withdrawn, and it was told too (by itself).
  assert.equal(ask.withdrawn, false);
  const resolved = peer.seen('dsh/question/resolved', (p) => p.questionId === question.id);
  assert.deepEqual(resolved.map((p) => [p.kind, p.outcome, p.by?.clientName]), [['plan-review', 'approve', PEER]]);
  await screenshot('shared-review-approved-elsewhere');
});

test('VS Code approves first: the other client is told who approved and its ask is withdrawn', async () => {
  await vscode.commands.executeCommand('dsh.plan.on');
  const prompt = vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Plan a cache' });
  const review = await waitFor('the review in VS Code', () => c.reviews.current(), 30000);
  const ask = await waitFor('the review at the peer', () => peer.openAsk('dsh/questions/ask'));
  const pending = '#log [data-kind="plan-review"].outcome-pending';
  await waitFor('the card\'s Approve', async () => (await chat.count(`${pending} button.approve`)) === 1);
  await chat.click(`${pending} button.approve`);
  await waitFor('the peer\'s ask withdrawn', () => ask.withdrawn, 10000);
  const resolved = await waitFor('dsh/question/resolved at the peer', () => peer.seen('dsh/question/resolved', (p) => p.questionId === review.question.id)[0]);
  assert.equal(resolved.outcome, 'approve');
  assert.equal(resolved.kind, 'plan-review');
  assert.equal(resolved.by.clientName, myName());
  await prompt;
  await turnEnds(4);
  assert.equal(c.resolvedElsewhere.length, 1, 'VS Code announced its own answer as another client\'s');
});

test('an approval goes to both; the other client rejects first: VS Code\'s card closes, nothing runs', async () => {
  const agentId = c.session!.agentId;
  const turn = peer.request('dsh/agent/prompt', { agentId, text: 'Write the marker file' });
  await waitFor('the permission card in VS Code', async () => (await chat.count('#permissions .permission-request')) === 1, 30000);
  const ask = await waitFor('the approval at the peer', () => peer.openAsk('dsh/permission/ask'));
  await screenshot('shared-approval-both');
  ask.answer({ outcome: 'reject', feedback: 'Not today.' });
  await waitFor('VS Code\'s card to go', async () => (await chat.count('#permissions .permission-request')) === 0);
  assert.equal(c.approvals.pending().length, 0);
  const line = c.resolvedElsewhere[c.resolvedElsewhere.length - 1];
  assert.match(line, new RegExp(`^${PEER} rejected "`));
  await turn;
  await turnEnds(5);
  assert.equal(fs.existsSync(path.join(folder(), 'marker.txt')), false, 'the rejected command ran');
});

test('VS Code attaches while a question is open: it is asked too, answers it, and the other client is told', async () => {
  const sessionId = c.session!.sessionId;
  await vscode.commands.executeCommand('dsh.session.close');
  await waitFor('no session in VS Code', () => !c.session);
  const agentId = (await peer.request('dsh/session/open', { sessionId })).agentId;
  const turn = peer.request('dsh/agent/prompt', { agentId, text: 'Write the second marker' });
  const ask = await waitFor('the approval at the peer', () => peer.openAsk('dsh/permission/ask'), 30000);
  // Open Session… says the session (loaded by the other client) waits for an approval.
  const picking = vscode.commands.executeCommand('dsh.session.open');
  const row = await waitFor('the session in the picker', async () => (await driver({ action: 'texts', selector: '.quick-input-widget:visible .monaco-list-row', settleMs: 300 })).texts?.find((t) => t.includes('one session, two clients')));
  assert.match(row, /waiting for you: approval/);
  await screenshot('shared-picker-waiting');
  await driver({ action: 'press', key: 'Escape' });
  assert.equal(await picking, undefined);
  await vscode.commands.executeCommand('dsh.session.open', { sessionId });
  assert.equal(c.session?.agentId, agentId);
  await waitFor('the permission card in VS Code', async () => (await chat.count('#permissions .permission-request button.allow')) === 1, 20000);
  await screenshot('shared-attached-mid-question');
  await chat.click('#permissions .permission-request button.allow');
  await waitFor('the peer\'s ask withdrawn', () => ask.withdrawn, 10000);
  const resolved = await waitFor('the resolution at the peer', () => peer.seen('dsh/question/resolved', (p) => p.questionId === ask.params.callId)[0]);
  assert.deepEqual([resolved.kind, resolved.outcome, resolved.by.clientName], ['permission', 'allow-once', myName()]);
  await turn;
  await waitFor('marker2.txt', () => fs.existsSync(path.join(folder(), 'marker2.txt')), 20000);
});

test('the other client leaves: VS Code no longer shows it', async () => {
  await peer.close();
  await waitFor('the status bar item to go', () => c.statusText().others === undefined);
  assert.equal(c.clientChanges[c.clientChanges.length - 1], `${PEER} left this session.`);
  await waitFor('"also here" to go', async () => (await chat.count('#others:visible')) === 0);
  await screenshot('shared-alone-again');
});

/** The pid of the workspace's shared daemon: the text of the lock it holds for its life (`<sock>.lock`). */
function daemonPid(): number | undefined {
  const dir = path.join(process.env.XDG_RUNTIME_DIR ?? '', 'dshd');
  for (const lock of fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => n.endsWith('.lock')) : []) {
    const pid = Number(fs.readFileSync(path.join(dir, lock), 'utf8').trim());
    try { if (pid > 0) { process.kill(pid, 0); return pid; } } catch { /* a daemon that died left its lock file */ }
  }
  return undefined;
}

test('the shared daemon is killed mid-turn: VS Code says so once, dshd connect starts a fresh daemon, the session reopens, nothing runs by itself', async () => {
  const sessionId = c.session!.sessionId;
  const before = daemonPid();
  assert.ok(before, 'no daemon pid in the lock file');
  const shown = c.noticesShown.length;
  void vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Take the long step' });
  await waitFor('the turn to run', () => c.statusText().busy, 20000);
  const log = path.join(folder(), '.dsh', 'sessions', sessionId, 'log.jsonl');
  await waitFor('the prompt in the log', () => fs.readFileSync(log, 'utf8').includes('Take the long step'));
  const states: string[] = [];
  c.daemon.onConnection((state) => states.push(state));
  process.kill(before, 'SIGKILL');
  await waitFor('VS Code to see the connection end', () => states.includes('stopped'), 20000);
  await waitFor('VS Code to reconnect and reopen the session', () => states.includes('running') && c.connection === 'running' && c.session?.sessionId === sessionId, 60000);
  const after = daemonPid();
  assert.ok(after && after !== before, `the same daemon (${before} -> ${after})`);
  await waitFor('the one notice', async () => (await notificationTexts()).some((t) => t.includes('daemon went away')), 20000);
  // The prompt the daemon had acknowledged is still in the log; the turn it killed is closed as
  // interrupted when the session is loaded again, and no turn starts by itself.
  const events = () => fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(events().some((e) => e.type === 'turn/close' && e.data?.stopReason === 'interrupted'), 'the killed turn was not closed as interrupted');
  const opens = events().filter((e) => e.type === 'turn/open').length;
  await new Promise((r) => setTimeout(r, 4000));
  assert.equal(events().filter((e) => e.type === 'turn/open').length, opens, 'a turn started by itself after the restart');
  assert.equal(c.statusText().busy, false);
  assert.equal(c.noticesShown.length >= shown, true);
  await screenshot('shared-daemon-killed');
});

test('a shared daemon another client started with other settings: VS Code says what is in force instead, and how to get its own', async () => {
  await c.daemon.stop();
  await waitFor('the idle daemon to exit', () => daemonPid() === undefined, 30000);
  // Another client starts the workspace's daemon first, saying the folder is not trusted.
  const wary = await Peer.start(dshd(), folder(), 'wary client', { trusted: false });
  try {
    assert.equal(await vscode.commands.executeCommand('dsh.server.restart'), true);
    await c.daemon.sharedSettingsChecked;
    assert.match(c.daemon.sharedSettingsNotInForce[0], /^the folder is not trusted there/);
    // The daemon's own notice (one, with its two ways out as buttons): VS Code's own check only logs.
    const said = await waitFor('the warning', async () => (await notificationTexts()).find((t) => t.startsWith('Your settings are not in force')), 20000);
    assert.match(said, /workspace trust/);
    assert.match(said, /restart the workspace's daemon/);
    await screenshot('shared-settings-not-in-force');
  } finally {
    await wary.close();
  }
});

test('a socket folder open to others: dshd connect refuses it and VS Code says so in its words, with the fix', async () => {
  const before = process.env.XDG_RUNTIME_DIR;
  const open = fs.mkdtempSync('/tmp/dsh-open-');
  fs.mkdirSync(path.join(open, 'dshd'), { mode: 0o755 });
  fs.chmodSync(path.join(open, 'dshd'), 0o755);
  process.env.XDG_RUNTIME_DIR = open; // what the next dshd connect inherits
  try {
    assert.equal(await vscode.commands.executeCommand('dsh.server.restart'), false, 'it connected through a folder others may enter');
    assert.match(c.daemon.lastError ?? '', /dshd said: .*socket folder .* is open to others \(mode 755\): `chmod 700` it or remove it/);
    assert.equal(fs.readdirSync(path.join(open, 'dshd')).length, 0, 'a socket or lock was made in the open folder');
    await screenshot('shared-open-socket-folder');
  } finally {
    process.env.XDG_RUNTIME_DIR = before;
    fs.rmSync(open, { recursive: true, force: true });
  }
  // The control: with its own private runtime folder the same command connects.
  assert.equal(await vscode.commands.executeCommand('dsh.server.restart'), true);
  assert.equal(c.connection, 'running');
});

export async function run(): Promise<void> { await runAll(); }

// The workspace's shared daemon, restarted from VS Code: a window whose settings differ from the
// daemon's is told which keys and the ways out; "DSH: Restart Workspace Daemon" runs
// `dshd daemon restart` (a new daemon pid), this window reattaches to its session first (its
// settings are the next daemon's), the other client is told and its connection ends for it to
// reattach, and a prompt in the same session works.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { notificationTexts, runAll, screenshot, showNotifications, started, test, waitFor } from './harness';
import { Peer } from './peer';

let c: Controller;
let peer: Peer;
let sessionId: string;
let firstPid: number;
const folder = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const dshd = () => vscode.workspace.getConfiguration('dsh.server').get<string>('command')!;
const NOTICE = 'Your settings are not in force';

/** `dshd daemon status --json`: the pid of the workspace's daemon, as a person would read it. */
function daemonPid(): number | undefined {
  try {
    const out = execFileSync(dshd(), ['daemon', 'status', '--workspace', folder(), '--json'], { encoding: 'utf8' });
    return JSON.parse(out).pid as number;
  } catch { return undefined; }
}

test('a window that joins with another model is told the key, what is in force and the ways out', async () => {
  c = (await started({ showChat: true })).controller;
  assert.equal(c.daemon.mode, 'connect');
  const s = await vscode.commands.executeCommand<{ sessionId: string }>('dsh.session.new', { title: 'kept across a restart' });
  sessionId = s!.sessionId;
  peer = await Peer.start(dshd(), folder(), 'peer editor'); // keeps the daemon and its settings alive
  await peer.request('dsh/session/open', { sessionId });
  firstPid = (await waitFor('the daemon\'s pid', () => daemonPid()))!;
  // This window now wants another model: reconnecting only this window leaves the daemon's as it was.
  await vscode.workspace.getConfiguration('dsh').update('model.name', 'model-y', vscode.ConfigurationTarget.Workspace);
  assert.equal(await vscode.commands.executeCommand('dsh.server.restart'), true);
  assert.equal(c.session?.sessionId, sessionId);
  const texts = await waitFor('the settings notice', async () => {
    const all = await notificationTexts();
    return all.find((t) => t.startsWith(NOTICE));
  });
  assert.match(texts, /model\.model \(yours: model-y; in force: model-x\)/);
  assert.match(texts, /Restart Workspace Daemon/);
  assert.match(texts, /dshd serve/);
  await showNotifications();
  await screenshot('daemon-restart-settings-notice');
  await vscode.commands.executeCommand('notifications.hideList');
});

test('"DSH: Restart Workspace Daemon" makes a new daemon; this window and the other client reattach', async () => {
  const peerExit = new Promise<number | null>((resolve) => peer.child.on('exit', (code) => resolve(code)));
  await vscode.commands.executeCommand('notifications.clearAll');
  await vscode.commands.executeCommand('dsh.daemon.restart');
  const newPid = await waitFor('a new daemon pid', () => { const p = daemonPid(); return p && p !== firstPid ? p : undefined; }, 40000);
  assert.notEqual(newPid, firstPid);
  // The other client was told, and its forwarder ended as when a daemon dies (its cue to reattach).
  assert.equal(await peerExit, 1);
  assert.ok(peer.seen('window/showMessage').some((p) => String(p.message).includes('restarting (dshd daemon restart)')));
  await waitFor('this window back on its session', () => c.connection === 'running' && c.session?.sessionId === sessionId, 40000);
  // It reattached first: its settings are the new daemon's, so no notice this time.
  await c.daemon.sharedSettingsChecked;
  assert.deepEqual(c.daemon.sharedSettingsNotInForce, []);
  // A prompt in the same session works.
  const before = c.feed.store?.items.filter((i) => i.kind === 'turn-end').length ?? 0;
  await vscode.commands.executeCommand('dsh.agent.prompt', { text: 'still there?' });
  await waitFor('the turn to end', () => (c.feed.store?.items.filter((i) => i.kind === 'turn-end').length ?? 0) > before, 40000);
  const texts = await notificationTexts();
  assert.ok(!texts.some((t) => t.startsWith(NOTICE)), `a settings notice after the restart: ${texts.join(' | ')}`);
  assert.ok(texts.some((t) => t.includes('restarted')), `no word of the restart: ${texts.join(' | ')}`);
  assert.ok(!texts.some((t) => t.includes('went away') || t.includes('crashed')), texts.join(' | '));
  await showNotifications();
  await screenshot('daemon-restart-reattached');
  await vscode.commands.executeCommand('notifications.hideList');
});

export async function run(): Promise<void> { await runAll(); }

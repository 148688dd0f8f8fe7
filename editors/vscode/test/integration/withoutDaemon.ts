// Runs in a real VS Code whose workspace names a dshd that does not exist: the extension must say
// so, with the fix, and show the daemon as down (not hang, not pretend).
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { DshApi } from '../../src/extension';
import { runAll, screenshot, test } from './harness';

test('a dshd that cannot be started gives a clear error naming the fix', async () => {
  const ext = vscode.extensions.getExtension<DshApi>('dshd.dshd-vscode');
  assert.ok(ext, 'extension not found');
  const api = await ext.activate();
  assert.equal(await api.ready, false);
  const c = api.controller;
  assert.equal(c.connection, 'failed');
  assert.match(c.daemon.lastError ?? '', /"\/nonexistent\/dshd" was not found/);
  assert.match(c.daemon.lastError ?? '', /set "dsh\.server\.command"/);
  assert.equal(c.statusText().goal, '$(error) dsh: not running');
  assert.equal(c.statusText().warning, true);
  const shot = await screenshot('status-no-daemon', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => t.includes('dsh: not running')), JSON.stringify(shot.statusTexts));
});

test('commands that need the daemon fail with a message, not a hang', async () => {
  const ext = vscode.extensions.getExtension<DshApi>('dshd.dshd-vscode')!;
  const r = await vscode.commands.executeCommand('dsh.goal.create', { objective: 'x' });
  assert.equal(r, undefined);
  assert.equal(ext.exports.controller.session, undefined);
});

export async function run(): Promise<void> { await runAll(); }

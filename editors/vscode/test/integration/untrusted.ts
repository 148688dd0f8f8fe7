// A folder the person has not trusted (VS Code's Workspace Trust, Restricted Mode): its own
// .vscode/settings.json may not pick the program that runs or its arguments, and its
// .dsh/config.toml may not choose the model server: dshd is told the folder is untrusted, ignores
// those keys and says so once; the notice offers to trust the folder.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { DshApi } from '../../src/extension';
import { driver, notificationTexts, runAll, screenshot, showNotifications, test, waitFor } from './harness';

test('in an untrusted folder the extension starts dshd with the user\'s settings only and says it is untrusted', async () => {
  assert.equal(vscode.workspace.isTrusted, false, 'the folder is trusted');
  // The workspace's own settings name another program and a bogus argument list: were they applied,
  // dshd would not start. VS Code hides them in Restricted Mode; the user's settings count.
  const settings = JSON.parse(fs.readFileSync(path.join(vscode.workspace.workspaceFolders![0].uri.fsPath, '.vscode', 'settings.json'), 'utf8'));
  assert.deepEqual(settings['dsh.server.args'], ['--not-an-option']);
  assert.deepEqual(vscode.workspace.getConfiguration('dsh.server').get('args'), []);
  assert.equal(settings['dsh.server.command'], '/nonexistent/dshd');
  assert.notEqual(vscode.workspace.getConfiguration('dsh.server').get('command'), '/nonexistent/dshd');
  const ext = vscode.extensions.getExtension<DshApi>('dshd.dshd-vscode')!;
  const api = await ext.activate();
  assert.equal(await api.ready, true, `dshd did not start: ${api.controller.daemon.lastError}`);
  const c = api.controller;
  const config = await c.daemon.request('dsh/config/get', {});
  assert.equal(config.trusted, false);
  const ignored = config.ignored.map((i) => i.key).sort();
  assert.ok(ignored.includes('model.provider') && ignored.includes('model.baseUrl'), JSON.stringify(config.ignored));
  assert.equal((config.effective as { model?: { provider?: string } }).model?.provider, 'scripted');
});

test('the daemon\'s notice of the ignored keys shows once, with a button to trust the folder', async () => {
  const notices = await waitFor('the notice', async () => {
    const t = (await notificationTexts()).filter((m) => m.includes('ignored'));
    return t.length ? t : undefined;
  });
  assert.equal(notices.length, 1, JSON.stringify(notices));
  assert.match(notices[0], /model\.provider/);
  assert.match(notices[0], /not trusted/);
  await showNotifications();
  assert.equal((await driver({ action: 'count', selector: '.notifications-center .notification-list-item:has-text("ignored") a.monaco-button:has-text("Manage Workspace Trust")' })).count, 1);
  await screenshot('untrusted-notice');
  await vscode.commands.executeCommand('notifications.hideList');
});

export async function run(): Promise<void> { await runAll(); }

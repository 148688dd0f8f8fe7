// Who did what, in a real VS Code beside two real Neovims (their TUIs in tmux, driven by
// tests/editors/vscode/test_vscode_attribution.py) on one session of the workspace's shared
// daemon. The two sides meet through files in <workspace>/.who/: this suite writes the session id
// and what it has seen; the Python side writes the Neovims' names and what they did.
// VS Code's chat names each Neovim for its acts ("From Neovim (pid …)", "approved in Neovim (pid …)")
// and says "You" for its own prompt only.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { chat, runAll, screenshot, started, test, waitFor } from './harness';

const folder = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const who = (name: string) => path.join(folder(), '.who', name);
const said = (name: string) => (fs.existsSync(who(name)) ? fs.readFileSync(who(name), 'utf8') : undefined);
const tell = (name: string, text: string) => { fs.mkdirSync(path.join(folder(), '.who'), { recursive: true }); fs.writeFileSync(who(name), text); };
const texts = (selector: string) => chat.texts(`#log ${selector}`);

test('VS Code opens a session and names itself after its folder', async () => {
  await started({ showChat: true });
  const s = await vscode.commands.executeCommand<{ sessionId: string }>('dsh.session.new', { title: 'who did what' });
  assert.ok(s?.sessionId);
  tell('session', s.sessionId);
});

test('a prompt from Neovim A reads "From Neovim (pid …)" in VS Code\'s chat', async () => {
  const names = JSON.parse(await waitFor('the Neovims on the session', () => said('names'), 120000)) as { a: string; b: string };
  await waitFor('A\'s prompt in VS Code\'s chat', async () => (await texts('[data-kind="user-message"]')).some((t) => t.includes(`From ${names.a}`) && t.includes('hello from Neovim A')), 60000);
  // VS Code's own prompt, typed in its chat box: "You" here, VS Code's name in the Neovims.
  await chat.type('#prompt', 'hello from VS Code');
  await chat.click('#send');
  const permissions = async () => (await texts('[data-kind="permission"]')).join('\n');
  // The edit it asks for is approved in Neovim B.
  tell('prompted', '1');
  await waitFor('B\'s approval in VS Code\'s chat', async () => (await permissions()).includes(`approved in ${names.b}`), 90000);
  const users = await texts('[data-kind="user-message"]');
  assert.ok(users.some((t) => /You/.test(t) && t.includes('hello from VS Code')), users.join(' | '));
  assert.ok(!(await permissions()).includes('You allowed'), 'VS Code claims the approval Neovim B gave');
  await screenshot('who-did-what');
  tell('vscode-done', (await texts('[data-kind]')).join('\n'));
});

export async function run(): Promise<void> { await runAll(); }

// A real provider in a real VS Code: the workspace's settings point dshd at a loopback HTTP server
// that speaks OpenAI's streaming Chat Completions (tests/editors/vscode/test_vscode.py starts it and scripts its
// replies: a slow stream, a goal round with usage, a 401). The model settings reach the daemon as
// initializationOptions.config; the key comes from the environment variable they name.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, notificationTexts, runAll, screenshot, showNotifications, started, test, waitFor } from './harness';

let c: Controller;

const chatTexts = (selector: string) => chat.texts(selector, 0);
const chatCount = (selector: string) => chat.count(selector, 0);

test('the model settings start dshd on the provider they name', async () => {
  c = (await started({ showChat: true })).controller;
  const model = vscode.workspace.getConfiguration('dsh.model');
  assert.equal(model.get('provider'), 'openai');
  assert.equal(c.connection, 'running');
});

test('the model\'s text streams into the chat in several pieces before the turn ends', async () => {
  await driver({ action: 'type', selector: '#prompt', text: 'Explain the retry policy.', frame: 'chat' });
  await driver({ action: 'press', key: 'Enter' });
  // Sample the streaming reply until its turn ends: it must be seen growing, piece by piece.
  const seen: string[] = [];
  let shot = false;
  await waitFor('the turn to end', async () => {
    const partial = await chatTexts('#log [data-kind="assistant-message"].streaming .markdown');
    if (partial.length && partial[0] !== seen[seen.length - 1]) seen.push(partial[0]);
    if (partial.length && seen.length >= 2 && !shot) { shot = true; await screenshot('model-streaming'); }
    return (await chatCount('#log [data-kind="turn-end"]')) >= 1;
  }, 60000);
  assert.ok(seen.length >= 3, `saw ${seen.length} pieces: ${JSON.stringify(seen)}`);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i].startsWith(seen[i - 1].slice(0, -1)), `not growing: ${JSON.stringify(seen)}`);
  const final = await chatTexts('#log [data-kind="assistant-message"] .markdown');
  assert.match(final[0], /^A RetryPolicy decides when to try again/);
  assert.ok(final[0].length > seen[0].length);
  assert.equal(await chatCount('#log [data-kind="assistant-message"].streaming'), 0, 'still marked as streaming');
});

test('tokens used show next to the rounds', async () => {
  await vscode.commands.executeCommand('dsh.goal.create', { objective: 'Document the retry policy', maxRounds: 3 });
  const text = await waitFor('tokens in the status bar', () => {
    const t = c.statusText().goal;
    return /^\$\(target\) \d\/3 · \d+(\.\d)?k? tok · /.test(t) && !t.includes(' 0 tok') ? t : undefined;
  }, 30000);
  assert.match(text, / tok · /);
  const shot = await screenshot('model-tokens', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => / tok · /.test(t)), JSON.stringify(shot.statusTexts));
  assert.ok((await chatTexts('#goal-status'))[0].includes(' tok · '));
});

test('a model error is a notification with its kind and message (and never the key)', async () => {
  await vscode.commands.executeCommand('notifications.clearAll');
  await waitFor('the goal round to end', async () => !c.statusText().busy, 30000);
  await driver({ action: 'type', selector: '#prompt', text: 'One more thing.', frame: 'chat' });
  await driver({ action: 'press', key: 'Enter' });
  const errors = await waitFor('the error notification', async () => {
    const t = (await notificationTexts()).filter((m) => m.includes('model error'));
    return t.length ? t : undefined;
  }, 30000);
  assert.equal(errors.length, 1, JSON.stringify(errors));
  assert.match(errors[0], /^dsh: Turn \d+ stopped: model error \(authentication failed\): /);
  assert.ok(!errors[0].includes(process.env.DSHD_VSCODE_TEST_MODEL_KEY ?? '<no key>'), 'the key reached a notification');
  assert.ok((await chatTexts('#log [data-kind="turn-end"].error')).some((t) => t.includes('authentication failed')));
  await showNotifications();
  await screenshot('model-error');
  await vscode.commands.executeCommand('notifications.hideList');
});

export async function run(): Promise<void> { await runAll(); }

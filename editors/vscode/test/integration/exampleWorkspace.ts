// The example workspace's README (examples/workspace) walked in a real VS Code against the real
// dshd (tests/editors/vscode/test_vscode_example_workspace.py copies the folder): the plan sent
// back and approved, a goal whose round 1 edits http/client.py (each edit allowed on its card),
// whose round 2 calls the example's own MCP server (run in the sandbox, no network), the MCP
// cards with their results, "Rewind to here" on the edit putting the file back, and the goal's
// tokens in the status bar. The tests run in order.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, runAll, screenshot, started, test, waitFor } from './harness';
import { keepPlanningWith } from './ui';

let c: Controller;
const root = () => vscode.workspace.workspaceFolders![0].uri.fsPath;
const client = () => fs.readFileSync(path.join(root(), 'http', 'client.py'), 'utf8');
const pending = '#log [data-kind="plan-review"].outcome-pending';
const dialog = '.monaco-dialog-box';
const dialogButton = (label: string) => `${dialog} .dialog-buttons a.monaco-button:text-is("${label}")`;
let original = '';

test('the README\'s plan: sent back with feedback, the revised plan approved', async () => {
  original = client();
  c = (await started({ showChat: true })).controller;
  await chat.type('#prompt', '/plan Add retries to the HTTP client');
  await driver({ action: 'press', key: 'Enter' });
  const first = await waitFor('the first review', () => c.reviews.current(), 40000);
  await vscode.commands.executeCommand('dsh.review.show');
  assert.equal(await keepPlanningWith('Cap the backoff.'), true);
  const revised = await waitFor('the revised review', () => { const r = c.reviews.current(); return r && r !== first && !r.settled ? r : undefined; }, 40000);
  assert.match(revised.question.title, /\(revised\)/);
  await chat.click(`${pending} button.approve`);
  await waitFor('the approval\'s reply', async () => (await chat.texts('#log [data-kind="assistant-message"]')).some((t) => t.includes('Plan approved.')), 40000);
});

test('the goal: round 1\'s edits are allowed on their cards, round 2 calls the example\'s MCP server', async () => {
  await vscode.commands.executeCommand('dsh.goal.create', { objective: 'Retries for the HTTP client', maxRounds: 40 });
  // Round 1's two edits are asked one after the other: allow each card as it comes.
  let allowed = 0;
  const allow = '#permissions .permission-request button.allow';
  await waitFor('the goal to complete', async () => {
    if ((await chat.count(allow)) > 0) {
      if (allowed === 0) await screenshot('example-edit-approval');
      await chat.click(`${allow} >> nth=0`);
      allowed++;
    }
    return c.session?.goal?.phase === 'complete';
  }, 120000);
  assert.ok(allowed >= 2, `allowed ${allowed} cards`);
  assert.match(client(), /class RetryPolicy/);
  const mcpCards = '#log [data-kind="tool-call"]:has-text("HTTP status code")';
  await waitFor('the two MCP cards', async () => (await chat.count(mcpCards)) === 2, 20000);
  for (const nth of [0, 1]) await chat.click(`${mcpCards} summary >> nth=${nth}`); // unfold them: their results show
  const cards = (await chat.texts(mcpCards)).join('\n');
  assert.match(cards, /http-status/);
  assert.match(cards, /503 Service Unavailable: retry/, cards);
  assert.match(cards, /500 Internal Server Error: do not retry/, cards);
  await screenshot('example-mcp-cards');
});

test('the goal\'s spend: the status bar counts its tokens', async () => {
  const goal = c.session!.goal!;
  assert.ok(goal.tokensUsed > 0 && !goal.tokensEstimated, JSON.stringify(goal));
  const text = c.statusText().goal;
  assert.match(text, /3\/40 · [1-9][0-9.]*k tok/, text);
});

test('"Rewind to here" on round 1\'s edit: the dialog names client.py, "Rewind files" puts it back', async () => {
  const editCard = '#log [data-kind="tool-call"]:has-text("client.py") button.rewind';
  await waitFor('the edit cards\' rewind buttons', async () => (await chat.count(editCard)) === 2);
  c.rewinds.last = undefined;
  await chat.click(`${editCard} >> nth=0`);
  await waitFor('the rewind dialog', async () => (await driver({ action: 'count', selector: dialog, settleMs: 200 })).count === 1);
  const text = ((await driver({ action: 'texts', selector: dialog, settleMs: 300 })).texts ?? []).join('\n');
  assert.match(text, /http\/client\.py/);
  await screenshot('example-rewind-dialog');
  await driver({ action: 'click', selector: dialogButton('Rewind files') });
  const end = await waitFor('the rewind to end', () => c.rewinds.last, 20000);
  assert.ok(end.outcome === 'rewound', JSON.stringify(end));
  assert.deepEqual(end.result.restored, ['http/client.py']);
  assert.equal(client(), original);
  await screenshot('example-rewound');
});

export async function run(): Promise<void> { await runAll(); }

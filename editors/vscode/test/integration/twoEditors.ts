// VS Code's half of tests/editors/test_two_editors.py: a real VS Code and a real Neovim attached
// to one session of the workspace's shared daemon. The two halves take turns through files in a
// folder both see (DSHD_TWO_EDITORS_COORD): each writes `<step>.json` when it has done its part and
// waits for the other's. The scripted model (the Python test writes it) replies in a fixed order.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, notificationTexts, runAll, screenshot, started, test, waitFor } from './harness';

const NVIM = 'Neovim';
let c: Controller;
const coord = () => process.env.DSHD_TWO_EDITORS_COORD!;

/** This half's step is done (what the other half needs to know goes with it). */
function done(step: string, data: Record<string, unknown> = {}): void {
  const file = path.join(coord(), `${step}.json`);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(data));
  fs.renameSync(`${file}.tmp`, file);
}

/** Waits for the other half's step. */
function other(step: string, ms = 90000): Promise<Record<string, unknown>> {
  const file = path.join(coord(), `${step}.json`);
  return waitFor(`Neovim's step "${step}"`, () => (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : undefined), ms);
}

const userTexts = () => chat.texts('#log [data-kind="user-message"] .text');
const replyTexts = () => chat.texts('#log [data-kind="assistant-message"]');
const turnEnds = () => c.feed.store?.items.filter((i) => i.kind === 'turn-end').length ?? 0;

test('VS Code starts a session on the shared daemon and hands it to Neovim', async () => {
  c = (await started({ showChat: true })).controller;
  assert.equal(c.daemon.mode, 'connect');
  await vscode.commands.executeCommand('dsh.session.new', { title: 'VS Code and Neovim' });
  // The name the daemon knows this window by: the extension's default dsh.clientName.
  done('vscode-session', { sessionId: c.session!.sessionId, clientName: `VS Code — ${path.basename(vscode.workspace.workspaceFolders![0].uri.fsPath)}` });
});

test('Neovim attaches: VS Code names it; Neovim\'s prompt and its reply show in VS Code', async () => {
  await waitFor('Neovim in the status bar', () => c.statusText().others === `$(organization) ${NVIM}`, 60000);
  await waitFor('"also here: Neovim" in the chat header', async () => (await chat.texts('#others:visible')).join('') === `also here: ${NVIM}`);
  await other('nvim-prompted');
  await waitFor('Neovim\'s prompt in VS Code\'s chat', async () => (await userTexts()).includes('Hello from Neovim'), 30000);
  await waitFor('the reply in VS Code\'s chat', async () => (await replyTexts()).some((t) => t.includes('Hello, Neovim')), 30000);
  await waitFor('the turn to end', () => turnEnds() >= 1, 30000);
  await screenshot('two-editors-neovim-prompt');
});

test('VS Code\'s prompt, typed in its chat box, reaches Neovim', async () => {
  await chat.type('#prompt', 'Hello from VS Code');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the reply', () => turnEnds() >= 2, 30000);
  done('vscode-prompted');
  await other('nvim-saw-vscode');
});

test('Neovim answers a plan review first: VS Code\'s review closes and says Neovim approved it', async () => {
  await other('nvim-review-open');
  const review = await waitFor('the review in VS Code too', () => c.reviews.current(), 30000);
  await screenshot('two-editors-review-both');
  done('vscode-review-open', { questionId: review.question.id });
  await waitFor('VS Code\'s review to end', () => review.settled && !c.reviews.current(), 60000);
  const line = `${NVIM} approved the plan "Plan: retries".`;
  assert.ok(c.resolvedElsewhere.includes(line), JSON.stringify(c.resolvedElsewhere));
  assert.ok((await notificationTexts()).includes(line), 'the one line is not in the notifications');
  await waitFor('the approved card', async () => (await chat.count('#log [data-kind="plan-review"].outcome-approved')) === 1);
  await waitFor('the turn to end', () => turnEnds() >= 3, 30000);
  await screenshot('two-editors-approved-in-neovim');
  done('vscode-saw-approval');
});

test('VS Code answers a plan review first: Neovim is told VS Code approved it', async () => {
  await vscode.commands.executeCommand('dsh.plan.on');
  const prompt = vscode.commands.executeCommand('dsh.agent.prompt', { text: 'Plan a cache' });
  await waitFor('the review in VS Code', () => c.reviews.current(), 30000);
  await other('nvim-has-review');
  const pending = '#log [data-kind="plan-review"].outcome-pending';
  await waitFor('the card\'s Approve', async () => (await chat.count(`${pending} button.approve`)) === 1);
  await chat.click(`${pending} button.approve`);
  await prompt;
  await waitFor('the turn to end', () => turnEnds() >= 4, 30000);
  done('vscode-approved');
  await other('nvim-saw-resolution');
  await screenshot('two-editors-approved-in-vscode');
});

export async function run(): Promise<void> { await runAll(); }

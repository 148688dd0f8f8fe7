// A tiny test runner for the suite that the extension runs inside its extension host (see
// scripts/run-vscode-tests.mjs): it records each test's outcome and writes them to the file the
// driver waits for.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { DshApi } from '../../src/extension';

export interface TestResult { name: string; ok: boolean; ms: number; error?: string }
type TestFn = () => Promise<void>;
const tests: { name: string; fn: TestFn }[] = [];

export function test(name: string, fn: TestFn): void { tests.push({ name, fn }); }

export async function runAll(): Promise<TestResult[]> {
  const results: TestResult[] = [];
  // A fresh profile may open a welcome page behind the first editors and an empty chat side bar:
  // start from an empty editor area.
  await new Promise((r) => setTimeout(r, 1000));
  await vscode.commands.executeCommand('workbench.action.closeAllEditors');
  await vscode.commands.executeCommand('workbench.action.closeAuxiliaryBar'); // an empty AI chat side bar
  for (const t of tests) {
    const started = Date.now();
    try {
      await t.fn();
      results.push({ name: t.name, ok: true, ms: Date.now() - started });
    } catch (e) {
      results.push({ name: t.name, ok: false, ms: Date.now() - started, error: String((e as Error)?.stack ?? e) });
      await screenshot(`failed-${results.length}`).catch(() => undefined); // what the workbench showed
      // A dialog or picker the failed test left open would hold up the next ones.
      for (let i = 0; i < 2; i++) await driver({ action: 'press', key: 'Escape', settleMs: 200 }).catch(() => undefined);
    }
    // So far, for the driver to show when the suite hangs or times out.
    if (process.env.DSHD_VSCODE_TEST_RESULTS) fs.writeFileSync(`${process.env.DSHD_VSCODE_TEST_RESULTS}.partial`, JSON.stringify(results, null, 2));
  }
  const passed = results.filter((r) => r.ok).length;
  const file = process.env.DSHD_VSCODE_TEST_RESULTS;
  if (file) fs.writeFileSync(file, JSON.stringify({ passed, failed: results.length - passed, results }, null, 2));
  return results;
}

export type DriverAction = (
  | { action: 'screenshot' | 'dump'; name: string; selector?: string }
  | { action: 'click' | 'hover' | 'count' | 'texts' | 'html' | 'value'; selector: string }
  | { action: 'type'; text: string; selector?: string; /** ms between keys (default 5) */ delay?: number }
  | { action: 'press'; key: string }
) & { /** Inside the chat view's webview instead of the workbench. */ frame?: 'chat' };
export interface DriverReply {
  statusTexts: string[]; count?: number; texts?: string[]; html?: string;
  /** `value`: the input's text, and whether it has the keyboard focus (its page focused too). */
  value?: string; focused?: boolean;
}

let requests = 0;
/**
 * Asks the driver (scripts/run-vscode-tests.mjs, outside VS Code) to act on the workbench page as a
 * person would, and waits until it has.
 */
export async function driver(req: DriverAction & { settleMs?: number }): Promise<DriverReply> {
  const control = process.env.DSHD_VSCODE_TEST_CONTROL;
  if (!control) throw new Error('not run by scripts/run-vscode-tests.mjs: no driver');
  const name = `r${++requests}`;
  const done = path.join(control, `${name}.done`);
  fs.writeFileSync(path.join(control, `${name}.req.tmp`), JSON.stringify(req));
  fs.renameSync(path.join(control, `${name}.req.tmp`), path.join(control, `${name}.req`)); // never read half-written
  // Long enough for the slowest action (a person typing for several seconds).
  const tries = 300 + Math.ceil(('delay' in req && req.delay ? req.delay * req.text.length : 0) / 100);
  for (let i = 0; i < tries; i++) {
    if (fs.existsSync(done)) {
      const r = JSON.parse(fs.readFileSync(done, 'utf8'));
      if (!r.ok) throw new Error(`driver ${JSON.stringify(req)} failed: ${r.error}`);
      return r;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`driver ${JSON.stringify(req)}: no answer in 30s`);
}

export const screenshot = (name: string, selector?: string) => driver({ action: 'screenshot', name, selector });

/** The input of the quick input widget (input box or quick pick) whose title or prompt has `text`. */
export const quickInput = (text: string) => `.quick-input-widget:visible:has-text("${text}") input`;

/** Polls `probe` until it returns a truthy value; fails with `what` after `ms`. */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, ms = 20000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try { const v = await probe(); if (v) return v as NonNullable<T>; last = v; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The messages in the notification centre (every notification, toast or not). */
export async function notificationTexts(): Promise<string[]> {
  await showNotifications();
  const shown = await driver({ action: 'texts', selector: '.notifications-center .notification-list-item-message', settleMs: 400 });
  await vscode.commands.executeCommand('notifications.hideList');
  return shown.texts ?? [];
}

/** Inside the chat view's page. */
export const chat = {
  texts: async (selector: string, settleMs = 200) => (await driver({ action: 'texts', selector, frame: 'chat', settleMs })).texts ?? [],
  count: async (selector: string, settleMs = 200) => (await driver({ action: 'count', selector, frame: 'chat', settleMs })).count ?? 0,
  click: (selector: string) => driver({ action: 'click', selector, frame: 'chat' }),
  type: (selector: string, text: string) => driver({ action: 'type', selector, text, frame: 'chat' }),
};

/** The extension, activated, with dshd started for the workspace; the chat view shown when asked. */
export async function started(opts: { showChat?: boolean } = {}): Promise<DshApi> {
  const ext = vscode.extensions.getExtension<DshApi>('dshd.dshd-vscode');
  assert.ok(ext, 'extension not found');
  const api = await ext.activate();
  assert.equal(await api.ready, true, 'dshd did not start');
  if (opts.showChat) {
    await vscode.commands.executeCommand('dsh.chat.show');
    await waitFor('the chat page', async () => (await chat.count('#prompt')) === 1);
  }
  return api;
}

/** Opens the notification centre alone (toasts hidden, so a screenshot shows each message once). */
export async function showNotifications(): Promise<void> {
  await vscode.commands.executeCommand('notifications.hideToasts');
  await vscode.commands.executeCommand('notifications.showList');
}

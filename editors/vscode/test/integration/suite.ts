import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { runAll, screenshot, test } from './harness';

test('smoke: extension present and activates', async () => {
  const ext = vscode.extensions.getExtension('dshd.dshd-vscode');
  assert.ok(ext);
  await ext.activate();
  assert.ok(ext.isActive);
  const shot = await screenshot('smoke-status', '#workbench\\.parts\\.statusbar');
  assert.ok(shot.statusTexts.some((t) => t.includes('smoke')), JSON.stringify(shot.statusTexts));
});

export async function run(): Promise<void> { await runAll(); }

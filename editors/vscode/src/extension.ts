import * as vscode from 'vscode';
import { Controller } from './controller';
import { Daemon } from './daemon';

let daemon: Daemon | undefined;

/** What activate returns: the live controller, for the integration tests and other extensions. */
export interface DshApi { controller: Controller; ready: Promise<boolean> }

export function activate(context: vscode.ExtensionContext): DshApi {
  const output = vscode.window.createOutputChannel('dshd');
  daemon = new Daemon(output);
  const controller = new Controller(daemon, vscode.workspace.workspaceFolders?.[0]);
  controller.register(context);
  context.subscriptions.push(output, daemon);
  const ready = controller.startDaemon(true);
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (e) => {
    if (!['dsh.server', 'dsh.config', 'dsh.model'].some((k) => e.affectsConfiguration(k))) return;
    const pick = await vscode.window.showInformationMessage('The dshd settings changed. Restart dshd to use them? (Open reviews end unanswered.)', 'Restart dshd');
    if (pick) await vscode.commands.executeCommand('dsh.server.restart');
  }));
  context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(async () => {
    const pick = await vscode.window.showInformationMessage('This folder is trusted now. Restart dshd so that its .dsh/config.toml applies in full?', 'Restart dshd');
    if (pick) await vscode.commands.executeCommand('dsh.server.restart');
  }));
  const api = { controller, ready };
  // The integration suites (scripts/run-vscode-tests.mjs) run inside this extension host, in
  // development mode only: never in an installed extension.
  const suite = process.env.DSHD_VSCODE_TEST_SUITE;
  if (suite && context.extensionMode === vscode.ExtensionMode.Development) {
    setTimeout(() => void (require(suite) as { run(): Promise<void> }).run(), 0);
  }
  return api;
}

export function deactivate(): Promise<void> | undefined {
  return daemon?.stop();
}

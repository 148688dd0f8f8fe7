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
  const ready = controller.startDaemon();
  return { controller, ready };
}

export function deactivate(): Promise<void> | undefined {
  return daemon?.stop();
}

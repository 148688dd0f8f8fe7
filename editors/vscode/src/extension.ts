import * as vscode from 'vscode';
export function activate(context: vscode.ExtensionContext) {
  const item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 100);
  item.text = '$(target) smoke'; item.show(); context.subscriptions.push(item);
}
export function deactivate() {}

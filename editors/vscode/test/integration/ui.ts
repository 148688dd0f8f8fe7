// Person-like steps on the plan review, shared by the suites: a line comment typed into the
// Comments widget, and feedback typed into Keep Planning's input box.
import * as vscode from 'vscode';
import { driver, quickInput, waitFor } from './harness';

/** Comments on a 0-based line of the plan in the active editor, through the Comments widget. */
export async function commentOnLine(line: number, text: string): Promise<void> {
  const editor = vscode.window.activeTextEditor!;
  editor.selection = new vscode.Selection(line, 0, line, 0);
  // The command works once the editor has asked the controller for its commenting ranges.
  await waitFor('the comment widget', async () => {
    await vscode.commands.executeCommand('workbench.action.addComment');
    return (await driver({ action: 'count', selector: '.review-widget .comment-form .monaco-editor', settleMs: 300 })).count;
  });
  await driver({ action: 'click', selector: '.review-widget .comment-form .monaco-editor', settleMs: 500 });
  await driver({ action: 'type', text });
  await driver({ action: 'click', selector: 'a.monaco-button[aria-label^="Add Comment"]' });
}

/** Runs Keep Planning and types the feedback into the input box it opens. */
export async function keepPlanningWith(feedback: string): Promise<unknown> {
  const keep = vscode.commands.executeCommand('dsh.review.keepPlanning');
  await driver({ action: 'type', text: feedback, selector: quickInput('Keep planning') });
  await driver({ action: 'press', key: 'Enter' });
  return keep;
}

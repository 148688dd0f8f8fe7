// The windows a question to the person opens (a plan review, an approval) and that close when the
// question ends, however it ends: its editor tabs, and a notification saying where to answer.
import * as vscode from 'vscode';

/** The documents a tab shows: a text or custom editor's (the markdown preview), both sides of a diff, every side of a multi-file diff. */
function tabUris(tab: vscode.Tab): vscode.Uri[] {
  const input = tab.input;
  if (input instanceof vscode.TabInputText || input instanceof vscode.TabInputCustom) return [input.uri];
  if (input instanceof vscode.TabInputTextDiff) return [input.original, input.modified];
  // A multi-file changes view (`vscode.changes`; TabInputTextMultiDiff, newer than the API this builds against).
  const diffs = (input as { textDiffs?: unknown } | undefined)?.textDiffs;
  return Array.isArray(diffs) ? diffs.flatMap((d) => (d instanceof vscode.TabInputTextDiff ? [d.original, d.modified] : [])) : [];
}

/** The documents this extension shows (plans, approvals, transcripts): not the person's own work. */
const OWN_SCHEMES = new Set(['dsh-plan', 'dsh-plan-history', 'dsh-approval', 'dsh-transcript']);

/**
 * Where a window that opens by itself goes: beside the person's own editor (which stays in view and
 * keeps the keyboard: opening over it in its group would hide it mid-word), else the first column.
 * Opened with preserveFocus, so keys being typed reach what the person is typing in.
 */
export function quietColumn(): vscode.ViewColumn {
  const active = vscode.window.activeTextEditor;
  return active && !OWN_SCHEMES.has(active.document.uri.scheme) ? vscode.ViewColumn.Beside : vscode.ViewColumn.One;
}

/** Closes every tab that shows one of these documents (a tab already gone is no error). */
export async function closeTabsShowing(uris: readonly vscode.Uri[]): Promise<void> {
  const mine = new Set(uris.map((u) => u.toString()));
  const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => tabUris(t).some((u) => mine.has(u.toString())));
  if (tabs.length) await Promise.resolve(vscode.window.tabGroups.close(tabs)).catch(() => undefined);
}

/**
 * A notification that goes when `until` settles: a message with buttons could not be taken back
 * once the question was answered elsewhere (the chat card, the palette, a withdrawn request).
 */
export function notifyUntil(title: string, message: string, until: Promise<unknown>): void {
  void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, (progress) => {
    progress.report({ message });
    return until;
  });
}

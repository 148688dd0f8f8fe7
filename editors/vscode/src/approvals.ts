// Approvals: `dsh/permission/ask` asks the person before a tool changes a file or runs a
// command. An edit opens in VS Code's diff editor (the file as it is ↔ as the edit leaves it)
// with Allow / Allow for This Session / Reject on its title bar (and a notification saying so);
// a command shows with its folder in a notification-sized picker; both are also cards in the
// chat view. Reject asks why (the
// reason reaches the model). Fail closed: a closed picker, a withdrawn request
// (`$/cancelRequest`: timeout, cancel) or a lost daemon never allow, and every window of a
// request closes when it ends, however it ends.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { closeTabsShowing, notifyUntil } from './askWindows';
import type { PendingPermission } from './chat/messages';
import { diffTarget, previewEdit } from './editPreview';
import type { PermissionAskParams, PermissionAskResult } from './protocol';

export const APPROVAL_SCHEME = 'dsh-approval';

export type PermissionOutcome = PermissionAskResult['outcome'];
type PermissionAsk = PermissionAskParams;
type PermissionAnswer = PermissionAskResult;

export class PermissionRequest {
  readonly id: string;
  private settle!: (a: PermissionAnswer) => void;
  readonly answer: Promise<PermissionAnswer>;
  settled = false;
  /** The documents of its diff (before, after; or the diff itself when it does not apply). */
  uris: vscode.Uri[] = [];
  picker: vscode.QuickPick<vscode.QuickPickItem & { outcome: PermissionOutcome }> | undefined;

  constructor(readonly params: PermissionAsk, n: number) {
    this.id = `${params.callId}#${n}`;
    this.answer = new Promise((resolve) => { this.settle = resolve; });
  }

  finish(a: PermissionAnswer): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(a);
  }
}

const LABELS: Record<PermissionOutcome, string> = {
  'allow-once': '$(check) Allow',
  'allow-session': '$(check-all) Allow for This Session',
  reject: '$(close) Reject…',
};

export class Approvals implements vscode.Disposable {
  private readonly open = new Map<string, PermissionRequest>();
  private readonly docs = new Map<string, string>();
  private count = 0;
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly root: () => string | undefined) {
    this.disposables.push(
      this.changed,
      vscode.workspace.registerTextDocumentContentProvider(APPROVAL_SCHEME, {
        provideTextDocumentContent: (uri) => this.docs.get(uri.toString()) ?? '(this request was answered or withdrawn)',
      }),
    );
  }

  /** For the chat view's cards. */
  pending(): PendingPermission[] {
    return [...this.open.values()].filter((r) => !r.settled).map((r) => ({
      requestId: r.id, title: r.params.title, tool: r.params.tool, mutability: r.params.mutability,
      ...(r.params.command !== undefined ? { command: r.params.command } : {}),
      ...(r.params.cwd !== undefined ? { cwd: r.params.cwd } : {}),
      hasDiff: r.uris.length > 0,
    }));
  }

  /** The request in front (the diff being looked at, else the newest). */
  current(): PermissionRequest | undefined {
    const active = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
    if (active instanceof vscode.TabInputTextDiff) {
      const hit = [...this.open.values()].find((r) => r.uris.some((u) => u.toString() === active.modified.toString()));
      if (hit) return hit;
    }
    return [...this.open.values()].pop();
  }

  /** Answers one `dsh/permission/ask`. */
  async ask(params: PermissionAsk, token: vscode.CancellationToken): Promise<PermissionAnswer> {
    const request = new PermissionRequest(params, ++this.count);
    if (token.isCancellationRequested) return { outcome: 'reject' };
    const withdrawn = token.onCancellationRequested(() => request.finish({ outcome: 'reject' }));
    this.open.set(request.id, request);
    try {
      await this.setContext();
      this.changed.fire();
      if (params.diff) {
        await this.showDiff(request);
        this.changed.fire(); // the chat card can offer the diff now
        // The diff's title bar holds the answers; this says so, and goes when the request ends.
        notifyUntil(`dsh asks: ${params.title}`, 'Allow, Allow for This Session or Reject on the diff\'s title bar or in the dsh chat view.', request.answer);
      } else {
        this.showPicker(request);
      }
      return await request.answer;
    } finally {
      withdrawn.dispose();
      await this.close(request);
    }
  }

  /** Opens the edit in the diff editor: the file as it is on the left, as the edit leaves it on the right. */
  private async showDiff(r: PermissionRequest): Promise<void> {
    const diff = r.params.diff!;
    const base = `/${r.params.sessionId}/${r.id.replace(/[^A-Za-z0-9_.-]/g, '_')}`;
    // The file as it is now, read from the workspace (a path outside it is never read).
    const target = diffTarget(diff);
    const root = this.root();
    let before = '';
    if (root && target && !target.created) {
      const file = path.resolve(root, target.path);
      if (file.startsWith(root + path.sep)) { try { before = fs.readFileSync(file, 'utf8'); } catch { /* gone: the diff will not apply */ } }
    }
    const preview = previewEdit(diff, before);
    if (preview) {
      const left = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/before/${preview.path}` });
      const right = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/after/${preview.path}` });
      this.docs.set(left.toString(), preview.created ? '' : before);
      this.docs.set(right.toString(), preview.after);
      r.uris = [left, right];
      await vscode.commands.executeCommand('vscode.diff', left, right, `${r.params.title} (dsh asks)`, { preview: false, viewColumn: vscode.ViewColumn.One });
    } else {
      // The edit no longer applies to the file as it is (or the diff was cut): show the diff itself.
      const uri = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/edit.diff` });
      this.docs.set(uri.toString(), diff);
      r.uris = [uri];
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.languages.setTextDocumentLanguage(doc, 'diff');
      await vscode.window.showTextDocument(doc, { preview: false, viewColumn: vscode.ViewColumn.One });
    }
  }

  /** The notification-sized choice: what, where, and the three answers. Closing it decides nothing. */
  private showPicker(r: PermissionRequest): void {
    const picker = vscode.window.createQuickPick<vscode.QuickPickItem & { outcome: PermissionOutcome }>();
    r.picker = picker;
    const p = r.params;
    picker.title = `dsh asks: ${p.title}`;
    picker.placeholder = p.command !== undefined
      ? `Run \`${p.command}\` in ${p.cwd ?? 'the workspace folder'}?`
      : p.diff ? 'The change is open in the diff editor. Allow it?' : `Allow ${p.tool}?`;
    picker.ignoreFocusOut = true; // the person reads the diff meanwhile
    picker.items = (['allow-once', 'allow-session', 'reject'] as const).map((outcome) => ({
      label: LABELS[outcome], outcome,
      description: outcome === 'allow-session' ? `${p.tool} runs without asking until dshd restarts` : outcome === 'reject' ? 'say why: the agent reads it' : undefined,
      detail: outcome === 'allow-once' && p.command !== undefined ? `${p.command}    (in ${p.cwd ?? 'the workspace folder'})` : undefined,
    }));
    picker.onDidAccept(() => {
      const pick = picker.selectedItems[0];
      if (pick) void this.decide(r, pick.outcome);
    });
    picker.onDidHide(() => { if (r.picker === picker) r.picker = undefined; });
    picker.show();
  }

  /** Opens the request's diff (or picker) again. */
  async show(requestId: string): Promise<void> {
    const r = this.open.get(requestId);
    if (!r || r.settled) return;
    if (r.uris.length === 2) await vscode.commands.executeCommand('vscode.diff', r.uris[0], r.uris[1], `${r.params.title} (dsh asks)`, { preview: false });
    else if (r.uris.length === 1) await vscode.window.showTextDocument(r.uris[0], { preview: false });
    if (!r.picker && r.uris.length === 0) this.showPicker(r);
  }

  /** An answer from the picker, the diff's title bar or a chat card. Reject asks why unless told. */
  async decide(r: PermissionRequest | undefined = this.current(), outcome: PermissionOutcome, feedback?: string): Promise<boolean> {
    if (!r || r.settled) return false;
    if (outcome !== 'reject') { r.finish({ outcome }); return true; }
    let why = feedback;
    if (why === undefined) {
      r.picker?.hide();
      why = await vscode.window.showInputBox({
        title: `Reject: ${r.params.title}`, prompt: 'Why? The agent reads this (empty: just no).', ignoreFocusOut: true,
      });
      if (why === undefined) { if (!r.settled && !r.picker && r.uris.length === 0) this.showPicker(r); return false; } // escaped: still undecided
    }
    if (r.settled) return false;
    r.finish(why.trim() ? { outcome: 'reject', feedback: why.trim() } : { outcome: 'reject' });
    return true;
  }

  answer(requestId: string, outcome: PermissionOutcome, feedback?: string): void {
    void this.decide(this.open.get(requestId), outcome, outcome === 'reject' ? feedback ?? '' : undefined);
  }

  private async close(r: PermissionRequest): Promise<void> {
    r.finish({ outcome: 'reject' });
    this.open.delete(r.id);
    r.picker?.hide();
    r.picker?.dispose();
    await closeTabsShowing(r.uris);
    for (const u of r.uris) this.docs.delete(u.toString());
    await this.setContext();
    this.changed.fire();
  }

  private async setContext(): Promise<void> {
    await vscode.commands.executeCommand('setContext', 'dsh.permissionOpen', [...this.open.values()].some((r) => !r.settled));
  }

  /** The daemon went away: nothing it asked can be allowed any more. */
  dismissAll(): void { for (const r of this.open.values()) r.finish({ outcome: 'reject' }); }

  dispose(): void {
    this.dismissAll();
    for (const d of this.disposables) d.dispose();
  }
}

// Approvals: `dsh/permission/ask` asks the person before a tool changes a file or runs a
// command. Both are cards in the chat view (Allow / Allow for this session / Reject) and a
// notification; an edit also opens in VS Code's diff editor (the file as it is ↔ as the edit
// leaves it) with the same answers on its title bar. Nothing that opens by itself takes the
// keyboard: the diff opens without focus, beside the person's own editor, and a command opens
// no picker (a picker takes the keys being typed and Enter would answer it); the person opens
// one on purpose, and its first, preselected item is "Decide later". Reject asks why (the
// reason reaches the model). Closing any of these windows decides nothing: the request stays
// in the chat and the status until it is answered. Fail closed: a withdrawn request
// (`$/cancelRequest`: timeout, cancel) or a lost daemon never allow, and every window of a
// request closes when it ends, however it ends. Several clients may be attached to the session: the
// first answer counts, and a request answered in another one (`dsh/question/resolved`) closes here
// with no answer from this window.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { closeTabsShowing, notifyUntil, quietColumn } from './askWindows';
import { RecentlyWithdrawn } from './attached';
import type { PendingPermission } from './chat/messages';
import { diffTarget, previewEdit } from './editPreview';
import type { PermissionAskParams, PermissionAskResult } from './protocol';

export const APPROVAL_SCHEME = 'dsh-approval';

export type PermissionOutcome = PermissionAskResult['outcome'];
type PermissionAsk = PermissionAskParams;
type PermissionAnswer = PermissionAskResult;

export class PermissionRequest {
  readonly id: string;
  /** undefined: this window gives no answer (withdrawn, answered elsewhere, the daemon lost). */
  private settle!: (a: PermissionAnswer | undefined) => void;
  readonly answer: Promise<PermissionAnswer | undefined>;
  settled = false;
  /** The documents of its diff (before, after; or the diff itself when it does not apply). */
  uris: vscode.Uri[] = [];
  picker: vscode.QuickPick<PickItem> | undefined;

  constructor(readonly params: PermissionAsk, n: number) {
    this.id = `${params.callId}#${n}`;
    this.answer = new Promise((resolve) => { this.settle = resolve; });
  }

  finish(a: PermissionAnswer | undefined): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(a);
  }
}

type PickItem = vscode.QuickPickItem & { outcome: PermissionOutcome | 'later' };

const LABELS: Record<PermissionOutcome | 'later', string> = {
  later: '$(clock) Decide later',
  'allow-once': '$(check) Allow',
  'allow-session': '$(check-all) Allow for This Session',
  reject: '$(close) Reject…',
};

/** A picker ignores Enter (and clicks) this long after it opens: keys already in flight answer nothing. */
export const PICKER_GRACE_MS = 500;

export class Approvals implements vscode.Disposable {
  private readonly open = new Map<string, PermissionRequest>();
  private readonly docs = new Map<string, string>();
  private count = 0;
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly asked = new vscode.EventEmitter<PermissionRequest>();
  /** A new request arrived (the chat view shows itself, without taking the focus). */
  readonly onDidAsk = this.asked.event;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly withdrawn = new RecentlyWithdrawn();

  constructor(private readonly root: () => string | undefined) {
    this.disposables.push(
      this.changed,
      this.asked,
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

  /** Answers one `dsh/permission/ask`; undefined when this window gives no answer (withdrawn, answered elsewhere). */
  async ask(params: PermissionAsk, token: vscode.CancellationToken): Promise<PermissionAnswer | undefined> {
    const request = new PermissionRequest(params, ++this.count);
    if (token.isCancellationRequested) return undefined;
    const withdrawn = token.onCancellationRequested(() => {
      if (!request.settled) this.withdrawn.add(params.callId, params.title);
      request.finish(undefined);
    });
    this.open.set(request.id, request);
    try {
      await this.setContext();
      this.changed.fire();
      this.asked.fire(request);
      if (params.diff) {
        await this.showDiff(request, true);
        this.changed.fire(); // the chat card can offer the diff now
        // The diff's title bar and the chat card hold the answers; this says so, and goes when the request ends.
        notifyUntil(`dsh asks: ${params.title}`, 'Answer on the diff\'s title bar or in the dsh chat view. [Show the change](command:dsh.permission.show)', request.answer);
      } else {
        const what = params.command !== undefined ? `Run \`${params.command}\` in ${params.cwd ?? 'the workspace folder'}?` : `Allow ${params.tool}?`;
        notifyUntil(`dsh asks: ${what}`, 'Answer with the buttons in the dsh chat view. [Answer here…](command:dsh.permission.show)', request.answer);
      }
      return await request.answer;
    } finally {
      withdrawn.dispose();
      await this.close(request);
    }
  }

  /**
   * Opens the edit in the diff editor: the file as it is on the left, as the edit leaves it on the
   * right. `byItself`: the person did not ask for it, so it takes no focus and leaves their editor in place.
   */
  private async showDiff(r: PermissionRequest, byItself: boolean): Promise<void> {
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
      await vscode.commands.executeCommand('vscode.diff', left, right, `${r.params.title} (dsh asks)`, this.placement(byItself));
    } else {
      // The edit no longer applies to the file as it is (or the diff was cut): show the diff itself.
      const uri = vscode.Uri.from({ scheme: APPROVAL_SCHEME, path: `${base}/edit.diff` });
      this.docs.set(uri.toString(), diff);
      r.uris = [uri];
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.languages.setTextDocumentLanguage(doc, 'diff');
      await vscode.window.showTextDocument(doc, this.placement(byItself));
    }
  }

  private placement(byItself: boolean): vscode.TextDocumentShowOptions {
    return byItself ? { preview: false, preserveFocus: true, viewColumn: quietColumn() } : { preview: false, viewColumn: vscode.ViewColumn.One };
  }

  /**
   * The notification-sized choice, opened only when the person asks for it: what, where, and the
   * answers. Its first, preselected item decides nothing, and for its first moments it takes no
   * answer at all. Closing it decides nothing.
   */
  private showPicker(r: PermissionRequest): void {
    const picker = vscode.window.createQuickPick<PickItem>();
    r.picker = picker;
    const p = r.params;
    picker.title = `dsh asks: ${p.title}`;
    picker.placeholder = p.command !== undefined
      ? `Run \`${p.command}\` in ${p.cwd ?? 'the workspace folder'}?`
      : p.diff ? 'The change is open in the diff editor. Allow it?' : `Allow ${p.tool}?`;
    picker.ignoreFocusOut = true; // the person reads the diff meanwhile
    picker.items = (['later', 'allow-once', 'allow-session', 'reject'] as const).map((outcome) => ({
      label: LABELS[outcome], outcome,
      description: outcome === 'later' ? 'the question stays in the dsh chat view' : outcome === 'allow-session' ? `${p.tool} runs without asking until dshd restarts` : outcome === 'reject' ? 'say why: the agent reads it' : undefined,
      detail: outcome === 'allow-once' && p.command !== undefined ? `${p.command}    (in ${p.cwd ?? 'the workspace folder'})` : undefined,
    }));
    const shownAt = Date.now();
    picker.onDidAccept(() => {
      const pick = picker.selectedItems[0];
      if (!pick || Date.now() - shownAt < PICKER_GRACE_MS) return;
      if (pick.outcome === 'later') { picker.hide(); return; }
      void this.decide(r, pick.outcome);
    });
    picker.onDidHide(() => { if (r.picker === picker) { r.picker = undefined; picker.dispose(); } });
    picker.show();
  }

  /** The person asked to see a request: its diff (with the focus), or the picker. */
  async show(requestId?: string): Promise<void> {
    const r = requestId ? this.open.get(requestId) : this.current();
    if (!r || r.settled) return;
    // In the group where it is open already (not a second copy in front of the person's file).
    const shownIn = vscode.window.tabGroups.all.find((g) => g.tabs.some((t) => {
      const input = t.input;
      return input instanceof vscode.TabInputTextDiff ? input.modified.toString() === r.uris[1]?.toString()
        : input instanceof vscode.TabInputText && input.uri.toString() === r.uris[0]?.toString();
    }))?.viewColumn;
    const options = { preview: false, ...(shownIn ? { viewColumn: shownIn } : {}) };
    if (r.uris.length === 2) await vscode.commands.executeCommand('vscode.diff', r.uris[0], r.uris[1], `${r.params.title} (dsh asks)`, options);
    else if (r.uris.length === 1) await vscode.window.showTextDocument(r.uris[0], options);
    else if (!r.picker) this.showPicker(r);
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
      if (why === undefined) return false; // escaped: still undecided, still in the chat
    }
    if (r.settled) return false;
    r.finish(why.trim() ? { outcome: 'reject', feedback: why.trim() } : { outcome: 'reject' });
    return true;
  }

  answer(requestId: string, outcome: PermissionOutcome, feedback?: string): void {
    void this.decide(this.open.get(requestId), outcome, outcome === 'reject' ? feedback ?? '' : undefined);
  }

  /**
   * Another client answered the request of this tool call first: it ends here unanswered and its
   * windows close. The request's title when it was open here (undefined: nothing was open).
   */
  resolvedElsewhere(callId: string): string | undefined {
    const r = [...this.open.values()].find((x) => x.params.callId === callId && !x.settled);
    if (!r) return this.withdrawn.take(callId); // withdrawn just before the news came
    r.finish(undefined);
    return r.params.title;
  }

  private async close(r: PermissionRequest): Promise<void> {
    r.finish(undefined);
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
  dismissAll(): void { for (const r of this.open.values()) r.finish(undefined); }

  dispose(): void {
    this.dismissAll();
    for (const d of this.disposables) d.dispose();
  }
}

// "Rewind to here" on a chat message or tool card that carries a checkpoint: the files go back as
// they were before that step (dsh/checkpoint/restore), and optionally the conversation forks there.
// The diff comes first (dsh/checkpoint/diff): VS Code's diff editor shows each file now (left) and
// after the rewind (right), then a modal asks "Rewind files", "Rewind files and conversation" or
// Cancel (Escape and closing are Cancel). A file the person changed since the agent's last step
// is marked, and overwriting it takes a second, explicit "Overwrite my changes". Nothing is
// restored without both answers; every window it opened closes when it ends.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { closeTabsShowing } from './askWindows';
import { asDaemonError } from './daemon';
import type { CheckpointFileRestore, CheckpointRestoreResult, DshRequest, SessionHandle } from './protocol';
import type { ParamsOf, ResultOf } from './daemon';
import {
  DIFF_EDITOR_FILES, DONT_REWIND, checkpointPlace, confirmWords, doneWords, KEEP_MY_CHANGES, OVERWRITE_MY_CHANGES, overwriteWords, REWIND_FILES, REWIND_FILES_AND_CONVERSATION, rewindSides,
} from './rewindWords';

export const REWIND_SCHEME = 'dsh-rewind';
/** A file larger than this is not read for the left side (the diff is shown instead); snapshots leave out larger files by default. */
const MAX_READ_BYTES = 1024 * 1024;

export interface RewindHost {
  /** A request for the open session's agent. */
  req<M extends DshRequest>(method: M, params: Omit<ParamsOf<M>, 'agentId'>): Promise<ResultOf<M>>;
  /** The workspace folder (files are read only inside it). */
  root(): string | undefined;
  /** Switches the window to the conversation's fork. */
  openFork(handle: SessionHandle): Promise<void>;
}

/** How a rewind ended (the integration tests read it). */
export type RewindOutcome =
  | { outcome: 'cancelled'; files: CheckpointFileRestore[] }
  | { outcome: 'rewound'; files: CheckpointFileRestore[]; result: CheckpointRestoreResult };

export class Rewinds implements vscode.Disposable {
  private readonly docs = new Map<string, string>();
  private readonly disposables: vscode.Disposable[] = [];
  private count = 0;
  /** The last rewind's ending (tests read it). */
  last: RewindOutcome | undefined;
  /** The documents of the diff shown now, left and right of each file (tests read them). */
  shown: vscode.Uri[] = [];

  constructor(private readonly host: RewindHost) {
    this.disposables.push(vscode.workspace.registerTextDocumentContentProvider(REWIND_SCHEME, {
      provideTextDocumentContent: (uri) => this.docs.get(uri.toString()) ?? '(this rewind is over)',
    }));
  }

  /** The palette's way in: pick one of the session's checkpoints, newest first. */
  async pick(): Promise<RewindOutcome | undefined> {
    const { checkpoints } = await this.host.req('dsh/checkpoint/list', {});
    if (!checkpoints.length) {
      void vscode.window.showInformationMessage('This session has no checkpoints yet: one is taken before each step that may change files.');
      return undefined;
    }
    const picked = await vscode.window.showQuickPick([...checkpoints].reverse().map((c) => ({
      label: `Before turn ${c.turn}, step ${c.step}`,
      description: c.at.replace('T', ' ').replace(/\.\d+Z$|Z$/, ' UTC'),
      detail: c.files.length ? `that step changed ${c.files.slice(0, 5).join(', ')}${c.files.length > 5 ? ` and ${c.files.length - 5} more` : ''}` : 'that step changed no file',
      seq: c.seq,
    })), { title: 'Rewind to a checkpoint', placeHolder: 'The diff is shown before anything changes' });
    return picked ? this.rewind(picked.seq) : undefined;
  }

  /** Rewinds to the checkpoint `seq` after showing its diff and asking. */
  async rewind(seq: number): Promise<RewindOutcome> {
    const [{ files }, info] = await Promise.all([
      this.host.req('dsh/checkpoint/diff', { seq }),
      this.host.req('dsh/checkpoint/list', {}).then((r) => r.checkpoints.find((c) => c.seq === seq), () => undefined),
    ]);
    const place = checkpointPlace(seq, info);
    const uris = await this.showDiff(seq, place, files);
    this.shown = uris;
    try {
      const words = confirmWords(place, files);
      // The first button has the focus (a modal's Cancel never does): a stray Enter rewinds nothing.
      const choice = await vscode.window.showWarningMessage(words.message, { modal: true, detail: words.detail }, DONT_REWIND, REWIND_FILES, REWIND_FILES_AND_CONVERSATION);
      if (!choice || choice === DONT_REWIND) return this.end({ outcome: 'cancelled', files });
      const conversation = choice === REWIND_FILES_AND_CONVERSATION;
      let force = false;
      const mine = files.filter((f) => f.changedByPerson).map((f) => f.path);
      if (mine.length) {
        if (!(await this.overwrite(mine))) return this.end({ outcome: 'cancelled', files });
        force = true;
      }
      let result: CheckpointRestoreResult;
      try {
        result = await this.host.req('dsh/checkpoint/restore', { seq, conversation, ...(force ? { force } : {}) });
      } catch (e) {
        // The person changed a file after the diff was read: the same explicit question, then again.
        const err = asDaemonError(e);
        const paths = err.kind === 'person-changed' && Array.isArray(err.data.paths) ? err.data.paths.filter((p): p is string => typeof p === 'string') : undefined;
        if (!paths) throw e;
        if (!(await this.overwrite(paths))) return this.end({ outcome: 'cancelled', files });
        result = await this.host.req('dsh/checkpoint/restore', { seq, conversation, force: true });
      }
      void vscode.window.showInformationMessage(doneWords(place, result.restored.length, !!result.agent));
      this.end({ outcome: 'rewound', files, result });
      if (result.agent) await this.host.openFork(result.agent);
      return this.last!;
    } finally {
      this.shown = [];
      await closeTabsShowing(uris);
      for (const u of uris) this.docs.delete(u.toString());
    }
  }

  private end(outcome: RewindOutcome): RewindOutcome {
    this.last = outcome;
    return outcome;
  }

  private async overwrite(paths: string[]): Promise<boolean> {
    const words = overwriteWords(paths);
    // The first button has the focus (a modal's Cancel never does): a stray Enter keeps the person's work.
    const picked = await vscode.window.showWarningMessage(words.message, { modal: true, detail: words.detail }, KEEP_MY_CHANGES, OVERWRITE_MY_CHANGES);
    return picked === OVERWRITE_MY_CHANGES;
  }

  /** Opens the diff editor: one file as a diff, several as one multi-file changes view. */
  private async showDiff(seq: number, place: string, files: CheckpointFileRestore[]): Promise<vscode.Uri[]> {
    if (!files.length) return [];
    const base = `/${seq}-${++this.count}`;
    const root = this.host.root();
    const pairs = files.slice(0, DIFF_EDITOR_FILES).map((f) => {
      const sides = rewindSides(f, root ? readInside(root, f.path) : undefined);
      const mark = f.changedByPerson ? ' (changed by you)' : '';
      // One path for both sides (the changes view would read two as a rename); the query says which.
      const left = vscode.Uri.from({ scheme: REWIND_SCHEME, path: `${base}/${f.path}`, query: 'now' });
      const right = vscode.Uri.from({ scheme: REWIND_SCHEME, path: `${base}/${f.path}`, query: 'after-rewind' });
      this.docs.set(left.toString(), sides.now);
      this.docs.set(right.toString(), sides.after);
      const resource = root ? vscode.Uri.file(path.join(root, f.path)) : right;
      return { f, left, right, resource, title: `${f.path}${mark}: now ↔ after rewind to before ${place}` };
    });
    const uris = pairs.flatMap((p) => [p.left, p.right]);
    const options = { preview: false, viewColumn: vscode.ViewColumn.One };
    if (pairs.length === 1) {
      await vscode.commands.executeCommand('vscode.diff', pairs[0].left, pairs[0].right, pairs[0].title, options);
      return uris;
    }
    const mine = files.filter((f) => f.changedByPerson).map((f) => f.path);
    // VS Code adds "(N files)".
    const first = files.length > pairs.length ? ` (the first ${pairs.length} of ${files.length})` : '';
    const title = `Rewind to before ${place}: now ↔ after${first}${mine.length ? ` · changed by you: ${mine.slice(0, 5).join(', ')}${mine.length > 5 ? ', …' : ''}` : ''}`;
    try {
      await vscode.commands.executeCommand('vscode.changes', title, pairs.map((p) => [p.resource, p.left, p.right]));
    } catch {
      // A VS Code without the multi-file changes view: the first file's diff (the modal lists them all).
      await vscode.commands.executeCommand('vscode.diff', pairs[0].left, pairs[0].right, pairs[0].title, options);
    }
    return uris;
  }

  dispose(): void { for (const d of this.disposables) d.dispose(); }
}

/** A workspace file's text, read without following a link and only inside the root; undefined when absent or unreadable. */
function readInside(root: string, relative: string): string | undefined {
  const file = path.resolve(root, relative);
  if (!file.startsWith(root + path.sep)) return undefined;
  try {
    // No folder on the way may be a link either (a link's target would be read as the file).
    const folder = path.dirname(file);
    if (fs.realpathSync(folder) !== path.join(fs.realpathSync(root), path.relative(root, folder))) return undefined;
    const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile() || st.size > MAX_READ_BYTES) return undefined;
      return fs.readFileSync(fd, 'utf8');
    } finally { fs.closeSync(fd); }
  } catch {
    return undefined;
  }
}


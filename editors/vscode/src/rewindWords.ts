// "Rewind to here": what the person reads before files go back to a checkpoint, and the two texts
// the diff editor sets side by side per file (left: the file now, right: after the rewind). Pure
// (no vscode import): the caller reads the files; jsdiff applies the daemon's diff.
import { applyPatch, parsePatch } from 'diff';
import type { CheckpointFileRestore, CheckpointInfo } from './protocol';

/** The choices of the confirmation, as its buttons read (Cancel comes with every modal). */
/** The confirmation's first button (it has the focus, so a stray Enter presses it): restores nothing, like Cancel. */
export const DONT_REWIND = "Don't rewind";
export const REWIND_FILES = 'Rewind files';
export const REWIND_FILES_AND_CONVERSATION = 'Rewind files and conversation';
export const OVERWRITE_MY_CHANGES = 'Overwrite my changes';
/** The second question's first button (it has the focus): restores nothing, like Cancel. */
export const KEEP_MY_CHANGES = 'Keep my changes';

/** The most files the diff editor opens for one rewind (the confirmation still names every change). */
export const DIFF_EDITOR_FILES = 50;

/** Where a checkpoint sits, in words: "turn 2, step 1" (just "checkpoint 14" when the list does not have it). */
export function checkpointPlace(seq: number, info: CheckpointInfo | undefined): string {
  return info ? `turn ${info.turn}, step ${info.step}` : `checkpoint ${seq}`;
}

const WHAT_HAPPENS: Record<CheckpointFileRestore['status'], string> = {
  modified: 'goes back as it was',
  added: 'comes back (it was deleted since)',
  deleted: 'is deleted (it did not exist then)',
};

/** One line per file for the confirmation; a file the person changed says so. */
export function fileLine(f: CheckpointFileRestore): string {
  return `${f.path}: ${WHAT_HAPPENS[f.status]}${f.binary ? ' (binary)' : ''}${f.changedByPerson ? ' · CHANGED BY YOU since' : ''}`;
}

/** The confirmation's message and detail. */
export function confirmWords(place: string, files: CheckpointFileRestore[]): { message: string; detail: string } {
  const message = `Rewind to before ${place}?`;
  if (!files.length) {
    return { message, detail: 'No file differs from then: rewinding the files changes nothing. Rewinding the conversation too starts a new session from that point (this one stays as it is).' };
  }
  const mine = files.filter((f) => f.changedByPerson).length;
  const shown = files.slice(0, 12).map((f) => `• ${fileLine(f)}`);
  if (files.length > shown.length) {
    const inEditor = Math.min(files.length, DIFF_EDITOR_FILES);
    shown.push(`• …and ${files.length - shown.length} more (${inEditor === files.length ? 'all' : `the first ${inEditor}`} in the diff editor)`);
  }
  return {
    message,
    detail: [
      `${files.length === 1 ? 'One file changes' : `${files.length} files change`} (the diff editor shows each now and after the rewind):`,
      ...shown,
      '',
      ...(mine ? [`${mine === 1 ? 'One of them was' : `${mine} of them were`} changed by you since the agent's last step: you will be asked again before it is overwritten.`, ''] : []),
      'Rewinding the conversation too starts a new session from that point (this one stays as it is).',
    ].join('\n'),
  };
}

/** The second question, for files the person changed (nothing is restored without a yes). */
export function overwriteWords(paths: string[]): { message: string; detail: string } {
  const list = paths.slice(0, 12).map((p) => `• ${p}`);
  if (paths.length > list.length) list.push(`• …and ${paths.length - list.length} more`);
  return {
    message: paths.length === 1 ? 'You changed this file since the agent\'s last step. Overwrite your changes?' : `You changed ${paths.length} of these files since the agent's last step. Overwrite your changes?`,
    detail: [...list, '', 'Rewinding puts them back as they were at the checkpoint: your changes to them are lost. Keep my changes (or Cancel) restores nothing.'].join('\n'),
  };
}

/** What the rewind did, in one line. */
export function doneWords(place: string, restored: number, forked: boolean): string {
  const files = restored === 0 ? `No file needed to change: they are as they were before ${place}.`
    : `Rewound ${restored === 1 ? '1 file' : `${restored} files`} to before ${place}.`;
  return `${files}${forked ? ' The conversation goes on in a new session from there.' : ''}`;
}

/** The two sides of one file in the diff editor. */
export interface RewindSides { now: string; after: string }

/**
 * The file now and after the rewind. `now` is the file as read (undefined: it does not exist now,
 * or could not be read). A diff that does not apply to it (the file changed since the diff was
 * made, or the diff was cut at its size cap) shows the diff itself on the right.
 */
export function rewindSides(f: CheckpointFileRestore, now: string | undefined): RewindSides {
  const current = now ?? '';
  if (f.binary) return { now: '(a binary file: not shown)', after: `(a binary file: it ${WHAT_HAPPENS[f.status]})` };
  if (f.status === 'deleted') return { now: current, after: '' };
  if (f.diff === undefined) return { now: current, after: '(this change is too large to show here)' };
  let patches: ReturnType<typeof parsePatch> = [];
  try { patches = parsePatch(f.diff); } catch { patches = []; }
  const patch = patches.find((p) => p.hunks.length > 0);
  const after = patch ? applyPatch(f.status === 'added' ? '' : current, patch) : false;
  if (after === false) return { now: current, after: `(the change does not apply to the file as it is now; the diff:)\n\n${f.diff}` };
  return { now: f.status === 'added' ? '' : current, after };
}

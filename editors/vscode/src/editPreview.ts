// An edit the agent asks to make, as the two texts a diff editor compares: the file as it is and
// as the unified diff would leave it. Pure (the caller reads the file); jsdiff applies the patch.
import { applyPatch, parsePatch } from 'diff';

export interface EditPreview {
  /** The file's path relative to the workspace (`b/<path>` in the diff's header). */
  path: string;
  created: boolean;
  after: string;
}

/** The path a unified diff changes, and whether it creates the file (`--- /dev/null`). */
export function diffTarget(diff: string): { path: string; created: boolean } | undefined {
  return targetOf(parsed(diff)[0]);
}

function targetOf(patch: ReturnType<typeof parsePatch>[number]): { path: string; created: boolean } | undefined {
  const name = patch?.newFileName ?? patch?.oldFileName;
  if (!name || name === '/dev/null') return undefined;
  return { path: name.replace(/^b\//, ''), created: patch.oldFileName === '/dev/null' };
}

/**
 * The file after the edit, or undefined when the diff does not apply to `before` (the file
 * changed since, or the diff was cut at its size cap): then show the diff itself.
 */
export function previewEdit(diff: string, before: string): EditPreview | undefined {
  const patches = parsed(diff);
  const target = targetOf(patches[0]);
  if (!target || patches.length !== 1) return undefined;
  const after = applyPatch(target.created ? '' : before, patches[0]);
  return after === false ? undefined : { ...target, after };
}

/** The patches of a diff; none when it does not parse (a diff cut at its size cap, say). */
function parsed(diff: string): ReturnType<typeof parsePatch> {
  try { return parsePatch(diff); } catch { return []; }
}

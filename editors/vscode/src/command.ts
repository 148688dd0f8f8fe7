// Finding the dshd executable before starting it, so a missing one gets a clear message. Pure.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

function isExecutableFile(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * `command` as it would be spawned: a path (absolute, `~/…` in the home folder, or relative to
 * `cwd`), else a name on PATH.
 */
export function resolveCommand(command: string, cwd: string, envPath = process.env.PATH ?? '', home = os.homedir()): string | undefined {
  if (command.trim() === '') return undefined;
  if (command === '~' || command.startsWith('~/')) command = path.join(home, command.slice(1));
  if (command.includes('/')) {
    const p = path.resolve(cwd, command);
    return isExecutableFile(p) ? p : undefined;
  }
  for (const dir of envPath.split(path.delimiter).filter(Boolean)) {
    const p = path.join(dir, command);
    if (isExecutableFile(p)) return p;
  }
  return undefined;
}

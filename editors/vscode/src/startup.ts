// Pure pieces of starting dshd: the initialization options built from the settings, the words
// for how the process ended, and where a bad config key sits in a TOML file. No vscode import.

/** The `dsh.model.*` settings a person fills in; empty strings mean "not set". */
export interface ModelSettings { provider?: string; model?: string; baseUrl?: string; apiKeyEnv?: string }

type Table = Record<string, unknown>;

/**
 * `initializationOptions.config`: the `dsh.config` overrides with the model settings laid over
 * their `[model]` table (a setting left empty changes nothing). Undefined when there is nothing
 * to override.
 */
export function configOverrides(config: Table, model: ModelSettings): Table | undefined {
  const fromSettings = Object.fromEntries(Object.entries(model).filter(([, v]) => typeof v === 'string' && v.trim() !== '')
    .map(([k, v]) => [k, (v as string).trim()]));
  const merged: Table = { ...config };
  if (Object.keys(fromSettings).length) merged.model = { ...((config.model as Table | undefined) ?? {}), ...fromSettings };
  return Object.keys(merged).length ? merged : undefined;
}

/** How the extension reaches dshd: `connect` (the workspace's shared daemon, through `dshd connect`) or `serve` (a daemon of its own). */
export type ServerMode = 'connect' | 'serve';

/** dshd's subcommands: `dsh.server.args` starting with one of them is the whole command line (as before `dsh.server.mode`). */
const SUBCOMMANDS = new Set(['connect', 'serve']);

/**
 * The arguments dshd is started with: `connect --workspace <folder>` (the shared daemon, started by
 * the forwarder when none runs) or `serve` (one daemon for this window alone), then `extra`. Extra
 * arguments that begin with a subcommand are used as they are, the mode aside.
 */
export function serverArgs(mode: string | undefined, extra: readonly string[], folder: string): string[] {
  if (extra.length && SUBCOMMANDS.has(extra[0])) return [...extra];
  return mode === 'serve' ? ['serve', ...extra] : ['connect', '--workspace', folder, ...extra];
}

/** The value at a dotted path of a table (undefined when any part is missing). */
function at(table: unknown, dotted: string): unknown {
  let v: unknown = table;
  for (const k of dotted.split('.')) {
    if (!v || typeof v !== 'object' || Array.isArray(v) || !(k in (v as object))) return undefined;
    v = (v as Table)[k];
  }
  return v;
}

/** Every leaf of a table as a dotted path (a list is one leaf). */
function leaves(table: Table, prefix = ''): [string, unknown][] {
  return Object.entries(table).flatMap(([k, v]) => (v && typeof v === 'object' && !Array.isArray(v)
    ? leaves(v as Table, `${prefix}${k}.`) : [[`${prefix}${k}`, v] as [string, unknown]]));
}

/**
 * What this window asked of the daemon and is not in force there: a shared daemon keeps the config
 * and the trust of the client that started it while it lives. `sent`: this window's overrides;
 * `effective` and `trustedThere`: what `dsh/config/get` answers. Empty when all is as asked.
 */
export function settingsNotInForce(sent: Table | undefined, effective: unknown, trustedHere: boolean, trustedThere: boolean): string[] {
  const out: string[] = [];
  if (trustedHere !== trustedThere) {
    out.push(trustedThere ? 'the folder is trusted there (its .dsh/config.toml applies in full)'
      : 'the folder is not trusted there (its .dsh/config.toml may not choose the model server, the key or a looser sandbox)');
  }
  for (const [key, mine] of leaves(sent ?? {})) {
    const there = at(effective, key);
    if (JSON.stringify(there) !== JSON.stringify(mine)) out.push(`${key} is ${there === undefined ? 'not set' : JSON.stringify(there)} there, not ${JSON.stringify(mine)}`);
  }
  return out;
}

/** `exit status 1`, `killed by SIGKILL`: how a person reads a process's end. */
export function describeExit(code: number | null, signal: string | null): string {
  if (signal) return `killed by ${signal}`;
  if (code === null) return 'exit status unknown';
  return `exit status ${code}`;
}

/**
 * The 0-based line (and column) where `dotted` (`goals.maxRounds`) is set in a TOML text: the key
 * under its `[table]`, a dotted key, or the table header when the key itself is absent.
 */
export function locateTomlKey(text: string, dotted: string): { line: number; column: number } | undefined {
  const table = dotted.split('.').slice(0, -1).join('.');
  const normal = (k: string) => k.split('.').map((p) => p.trim().replace(/^"(.*)"$/, '$1')).join('.');
  const lines = text.split(/\r?\n/);
  let current = '';
  let header: { line: number; column: number } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const h = /^(\s*)\[([^\[\]]+)\]\s*(#.*)?$/.exec(lines[i]);
    if (h) {
      current = normal(h[2]);
      if (current === table || current === dotted) header ??= { line: i, column: h[1].length };
      continue;
    }
    const kv = /^(\s*)([A-Za-z0-9_\-."' ]+?)\s*=/.exec(lines[i]);
    if (kv && normal(current ? `${current}.${kv[2]}` : kv[2]) === dotted) return { line: i, column: kv[1].length };
  }
  return header;
}

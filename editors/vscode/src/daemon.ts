// The connection to dshd: a vscode-languageclient over stdio (the daemon speaks LSP framing), plus
// the `experimental.dsh` capability, typed requests and the error kinds of SPEC section 6.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { resolveCommand } from './command';
import { configOverrides, locateTomlKey, serverArgs, settingsNotInForce, type ServerMode } from './startup';
import { PROTOCOL_VERSION, type DshMethods, type DshRequest, type DshServerCapabilities } from './protocol';
import {
  CloseAction, ErrorAction, LanguageClient, ResponseError, State,
  type LanguageClientOptions, type ServerOptions, type StaticFeature,
} from 'vscode-languageclient/node';

/** Declares that this editor answers `dsh/questions/ask` (plan reviews) and `dsh/permission/ask` (approvals). */
class DshCapabilities implements StaticFeature {
  fillClientCapabilities(capabilities: { experimental?: unknown }): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    capabilities.experimental = { ...experimental, dsh: { questions: true, permissions: true } };
  }
  initialize(): void {}
  getState() { return { kind: 'static' as const }; }
  clear(): void {}
}

/**
 * The name the people at other clients of a shared session read for this window (initialize's
 * clientInfo.name, which the daemon makes distinct): `dsh.clientName`, else "VS Code — <folder>".
 */
export function clientName(setting: unknown, folderName: string): string {
  const given = typeof setting === 'string' ? setting.replace(/\s+/g, ' ').trim() : '';
  return given || `VS Code — ${folderName}`;
}

/** Sends `clientName` as initialize's clientInfo.name (languageclient would send the app's name). */
class DshClientName implements StaticFeature {
  constructor(private readonly name: string) {}
  fillInitializeParams(params: { clientInfo?: { name: string; version?: string } }): void {
    params.clientInfo = { ...(params.clientInfo ?? {}), name: this.name };
  }
  fillClientCapabilities(): void {}
  initialize(): void {}
  getState() { return { kind: 'static' as const }; }
  clear(): void {}
}

/**
 * languageclient writes its errors to the output channel and pops some up too ("couldn't create
 * connection to server" beside our own message when a start fails). This extension says what went
 * wrong itself, once, with the fix: the client's own errors go to the log only.
 */
class QuietLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown): void { super.error(message, data, false); }
}

/** A JSON-RPC error from the daemon, with its stable `data.kind` (SPEC section 6). */
export class DaemonError extends Error {
  constructor(message: string, readonly kind: string | undefined, readonly data: Record<string, unknown>) { super(message); }
}

export function asDaemonError(e: unknown): DaemonError {
  if (e instanceof DaemonError) return e;
  if (e instanceof ResponseError) {
    const data = (e.data && typeof e.data === 'object' ? e.data : {}) as Record<string, unknown>;
    return new DaemonError(e.message, typeof data.kind === 'string' ? data.kind : undefined, data);
  }
  return new DaemonError(e instanceof Error ? e.message : String(e), undefined, {});
}

/** Params and result of a request method, from the schema's method table. */
export type ParamsOf<M extends DshRequest> = DshMethods[M]['params'];
export type ResultOf<M extends DshRequest> = DshMethods[M] extends { result: infer R } ? R : never;

export type ConnectionListener = (state: 'starting' | 'running' | 'stopped' | 'failed', detail?: string) => void;

/** How the daemon's process ended (`code` or `signal`, as node reports them). */
export interface ExitInfo { code: number | null; signal: NodeJS.Signals | null }

export class Daemon implements vscode.Disposable {
  client: LanguageClient | undefined;
  private process: ChildProcess | undefined;
  private readonly handlers: ((client: LanguageClient) => void)[] = [];
  private readonly listeners: ConnectionListener[] = [];
  private readonly exitListeners: ((exit: ExitInfo | undefined) => void)[] = [];
  private stopping = false;
  /** Counts starts: a request that fails after the daemon went away (or was replaced) says nothing more. */
  generation = 0;
  /** How the last start reached dshd: the workspace's shared daemon (`connect`) or one of this window's own. */
  mode: ServerMode = 'connect';
  /** Why the last start failed, with the fix (also shown to the person). */
  lastError: string | undefined;

  constructor(private readonly output: vscode.OutputChannel) {}

  onConnection(fn: ConnectionListener): void { this.listeners.push(fn); }
  private emit(state: Parameters<ConnectionListener>[0], detail?: string) { for (const l of this.listeners) l(state, detail); }

  /**
   * A daemon that was running ended without being asked to (a crash, a kill): the listener says
   * so to the person, once, with how it ended (undefined when the process did not report it).
   */
  onUnexpectedExit(fn: (exit: ExitInfo | undefined) => void): void { this.exitListeners.push(fn); }

  /** Registers notification/request handlers on every client this daemon starts. */
  install(fn: (client: LanguageClient) => void): void { this.handlers.push(fn); if (this.client) fn(this.client); }

  get running(): boolean { return this.client?.state === State.Running; }

  /** The process id of the running daemon (tests kill it to play a crash). */
  get pid(): number | undefined { return this.process?.exitCode === null ? this.process.pid : undefined; }

  async start(folder: vscode.WorkspaceFolder): Promise<boolean> {
    await this.stop();
    this.generation++;
    const config = vscode.workspace.getConfiguration('dsh', folder.uri);
    const command = config.get<string>('server.command', 'dshd');
    const cwd = folder.uri.fsPath;
    this.mode = config.get<string>('server.mode') === 'serve' ? 'serve' : 'connect';
    // `connect`: the workspace's one daemon, shared with every other editor and ACP client on it.
    const args = serverArgs(this.mode, config.get<string[]>('server.args', []), cwd);
    const overrides = configOverrides(config.get<Record<string, unknown>>('config', {}), {
      provider: config.get<string>('model.provider'), model: config.get<string>('model.name'),
      baseUrl: config.get<string>('model.baseUrl'), apiKeyEnv: config.get<string>('model.apiKeyEnv'),
    });
    this.emit('starting');
    const resolved = resolveCommand(command, cwd);
    if (!resolved) {
      const why = `dshd could not be started: "${command}" was not found${command.includes('/') ? '' : ' on PATH'}.`;
      this.fail(why, 'Install dshd (pip install -e . in the dshd repository, which gives .venv/bin/dshd) or set "dsh.server.command" to the full path of the dshd executable.');
      return false;
    }
    // We start the process ourselves (not languageclient) to learn how it ended: a crash is
    // reported once, with its exit status or signal.
    let exited: Promise<ExitInfo> = Promise.resolve({ code: null, signal: null });
    // What the process last said on stderr: why it could not start, in its own words (the
    // forwarder's "the socket folder … is open to others", a traceback's last line).
    let said = '';
    let stdioClosed: Promise<unknown> = Promise.resolve();
    /** What it said, once its stderr is read to the end (a second at most). */
    const lastWords = async () => { await Promise.race([stdioClosed, new Promise((r) => setTimeout(r, 1000))]); return lastLine(said); };
    const serverOptions: ServerOptions = async () => {
      const child = spawn(resolved, args, { cwd, stdio: 'pipe' });
      stdioClosed = new Promise((resolve) => child.on('close', resolve));
      child.stderr?.on('data', (b: Buffer) => { said = (said + b.toString()).slice(-4000); });
      exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
      child.on('error', (e) => this.output.appendLine(`dshd process error: ${e.message}`));
      this.process = child;
      return child;
    };
    const clientOptions: LanguageClientOptions = {
      // dshd serves no language features: match no documents, so nothing is synced.
      documentSelector: [{ scheme: 'dsh-no-documents' }],
      workspaceFolder: folder,
      // Workspace trust decides whether the workspace's own .dsh/config.toml may choose the model
      // server, the key variable or a looser sandbox (the daemon ignores those keys otherwise).
      initializationOptions: { ...(overrides ? { config: overrides } : {}), trusted: vscode.workspace.isTrusted },
      outputChannel: this.output,
      initializationFailedHandler: () => false, // an invalid config does not get better by retrying
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        // The controller decides about restarting (and says so once): languageclient stays quiet.
        closed: () => ({ action: CloseAction.DoNotRestart, handled: true }),
      },
    };
    const client = new QuietLanguageClient('dshd', 'dshd', serverOptions, clientOptions);
    client.registerFeature(new DshCapabilities());
    client.registerFeature(new DshClientName(clientName(config.get<string>('clientName'), folder.name)));
    let started = false;
    client.onDidChangeState((e) => {
      if (e.newState !== State.Stopped || this.client !== client || this.stopping || !started) return;
      this.emit('stopped', 'dshd stopped.');
      const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 2000));
      void Promise.race([exited, timeout]).then((exit) => { for (const l of this.exitListeners) l(exit); });
    });
    // The daemon's own messages (the config keys it ignored, and why): shown as languageclient
    // would, with the way to act on them.
    client.onNotification('window/showMessage', (m: { type: number; message: string }) => void this.showDaemonMessage(m));
    for (const h of this.handlers) h(client);
    this.client = client;
    try {
      await client.start();
    } catch (e) {
      const err = asDaemonError(e);
      if (err.kind === 'invalid-config') {
        this.failConfig(err, folder, overrides);
      } else {
        const last = await lastWords();
        this.fail(`dshd could not be started: ${err.message}${last ? ` (dshd said: ${last})` : ''}`,
          `Check the dshd log ("Show Log"); the command was ${resolved} ${args.join(' ')} in ${cwd}.`);
      }
      return false;
    }
    if (!client.initializeResult) {
      // The process ended before it answered `initialize` (the client's start does not always fail then).
      const last = await lastWords();
      this.stopping = true;
      await client.stop(2000).catch(() => undefined);
      this.stopping = false;
      this.fail(`dshd could not be started: it ended before answering${last ? ` (dshd said: ${last})` : ''}.`,
        `Check the dshd log ("Show Log"); the command was ${resolved} ${args.join(' ')} in ${cwd}.`);
      return false;
    }
    // The daemon names its protocol version in capabilities.experimental.dsh; refuse another one
    // rather than misread its messages.
    const dsh = (client.initializeResult?.capabilities.experimental as { dsh?: DshServerCapabilities } | undefined)?.dsh;
    if (dsh?.version !== PROTOCOL_VERSION) {
      this.stopping = true;
      await client.stop(2000).catch(() => undefined);
      this.stopping = false;
      this.fail(`dshd at ${resolved} speaks dsh protocol ${dsh ? `version ${dsh.version}` : '(none declared)'}; this extension speaks version ${PROTOCOL_VERSION}.`,
        'Install a dshd and an extension of the same release, or point "dsh.server.command" at a matching dshd.');
      return false;
    }
    started = true;
    this.lastError = undefined;
    this.emit('running');
    this.sharedSettingsNotInForce = [];
    this.sharedSettingsChecked = this.mode === 'connect' ? this.checkSharedSettings(overrides) : Promise.resolve();
    return true;
  }

  /** What the last connection to a shared daemon found not in force there (tests read it). */
  sharedSettingsNotInForce: string[] = [];
  /** Settles when that was read (the warning, if any, is on its way then). */
  sharedSettingsChecked: Promise<void> = Promise.resolve();

  /**
   * The shared daemon keeps the config and trust of the client that started it while it lives:
   * when this window's differ, the person is told what is in force instead, and how to get theirs.
   */
  private async checkSharedSettings(overrides: Record<string, unknown> | undefined): Promise<void> {
    const generation = this.generation;
    let differ: string[];
    try {
      const inForce = await this.request('dsh/config/get', {});
      differ = settingsNotInForce(overrides, inForce.effective, vscode.workspace.isTrusted, inForce.trusted);
    } catch (e) {
      this.output.appendLine(`dsh/config/get: ${asDaemonError(e).message}`);
      return;
    }
    if (generation !== this.generation) return;
    this.sharedSettingsNotInForce = differ;
    if (!differ.length) return;
    // The daemon says it itself (window/showMessage, the keys and the ways out): the log only here.
    this.output.appendLine(`not in force in the shared daemon: ${differ.join('; ')}`);
  }

  /** When the daemon last said it is restarting (`dshd daemon restart`): its end is then no crash. */
  restartAnnounced: number | undefined;

  /**
   * `dshd daemon restart` for this folder: the workspace's daemon tells every client, stops, and
   * the next one starts; `said` is the command's own line (the new pid) or why it failed.
   */
  restartWorkspaceDaemon(folder: vscode.WorkspaceFolder): Promise<{ ok: boolean; said: string }> {
    const command = vscode.workspace.getConfiguration('dsh', folder.uri).get<string>('server.command', 'dshd');
    const cwd = folder.uri.fsPath;
    const resolved = resolveCommand(command, cwd);
    if (!resolved) return Promise.resolve({ ok: false, said: `"${command}" was not found` });
    return new Promise((resolve) => {
      execFile(resolved, ['daemon', 'restart', '--workspace', cwd], { cwd, timeout: 60_000 }, (error, stdout, stderr) => {
        const said = lastLine(error ? `${stdout}\n${stderr}` : stdout) || (error ? error.message : '');
        this.output.appendLine(`dshd daemon restart: ${said}`);
        resolve({ ok: !error, said });
      });
    });
  }

  private fail(why: string, fix: string) {
    this.lastError = `${why} ${fix}`;
    this.output.appendLine(`${why} ${fix}`);
    this.emit('failed', `${why} ${fix}`);
    void vscode.window.showErrorMessage(`${why} ${fix}`, 'Open Settings', 'Show Log').then((pick) => this.onPick(pick));
  }

  /**
   * One error for one bad config key, with a button that opens the file at that key (or the
   * settings, when the key came from `dsh.config`).
   */
  private failConfig(err: DaemonError, folder: vscode.WorkspaceFolder, overrides: Record<string, unknown> | undefined) {
    const key = typeof err.data.key === 'string' ? err.data.key : undefined;
    const named = typeof err.data.file === 'string' ? err.data.file : undefined;
    const workspaceFile = path.join(folder.uri.fsPath, '.dsh', 'config.toml');
    // The daemon names the editor's own settings layer "initializationOptions.config".
    const fromSettings = named === 'initializationOptions.config';
    const file = named && !fromSettings ? (path.isAbsolute(named) ? named : path.join(folder.uri.fsPath, named)) : workspaceFile;
    const inSettings = fromSettings || (named === undefined && key !== undefined && hasKey(overrides, key) && !fileHasKey(file, key));
    const where = inSettings ? 'the "dsh.config" / "dsh.model" settings' : path.relative(folder.uri.fsPath, file) || file;
    const message = `dshd cannot start: ${err.message} (in ${where}).`;
    this.lastError = message;
    this.output.appendLine(message);
    this.emit('failed', message);
    const open = inSettings ? 'Open Settings' : `Open ${path.basename(file)}`;
    void vscode.window.showErrorMessage(message, open, 'Show Log').then(async (pick) => {
      if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'dsh.');
      else if (pick === open) await openAtKey(file, key);
      else this.onPick(pick);
    });
  }

  private onPick(pick: string | undefined) {
    if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'dsh.server');
    if (pick === 'Show Log') this.output.show();
    if (pick === 'Restart dshd') void vscode.commands.executeCommand('dsh.server.restart');
  }

  showLog(): void { this.output.show(); }

  /** A `window/showMessage` from dshd; in an untrusted folder it offers to trust it (then restart). */
  private async showDaemonMessage(m: { type: number; message: string }): Promise<void> {
    this.output.appendLine(m.message);
    if (m.message.startsWith('The workspace\'s dshd daemon is restarting')) this.restartAnnounced = Date.now();
    if (m.message.startsWith('Your settings are not in force')) {
      // The shared daemon runs with another client's settings: the two ways out, as buttons.
      const restart = 'Restart Workspace Daemon';
      const own = 'Use a Daemon of This Window\'s Own';
      const pick = await vscode.window.showWarningMessage(m.message, restart, own);
      if (pick === restart) await vscode.commands.executeCommand('dsh.daemon.restart');
      if (pick === own) {
        await vscode.workspace.getConfiguration('dsh').update('server.mode', 'serve', vscode.ConfigurationTarget.Workspace);
        await vscode.commands.executeCommand('dsh.server.restart');
      }
      return;
    }
    const show = m.type === 1 ? vscode.window.showErrorMessage : m.type === 2 ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
    const trust = 'Manage Workspace Trust';
    const pick = await show(m.message, ...(vscode.workspace.isTrusted ? [] : [trust]));
    if (pick === trust) await vscode.commands.executeCommand('workbench.trust.manage');
  }

  log(line: string): void { this.output.appendLine(line); }

  /** What the running daemon declared in `capabilities.experimental.dsh` (its optional features). */
  get serverCapabilities(): Record<string, unknown> {
    return ((this.client?.initializeResult?.capabilities.experimental as { dsh?: Record<string, unknown> } | undefined)?.dsh) ?? {};
  }

  async request<M extends DshRequest>(method: M, params: ParamsOf<M>): Promise<ResultOf<M>> {
    const client = this.client;
    if (!client || client.state !== State.Running) throw new DaemonError('dshd is not running', undefined, {});
    try {
      return await client.sendRequest<ResultOf<M>>(method, params);
    } catch (e) {
      throw asDaemonError(e);
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    const child = this.process;
    if (!client) return;
    this.stopping = true;
    try { if (client.isRunning()) await client.stop(2000); } catch { /* already gone */ } finally { this.stopping = false; }
    if (this.client === client) this.client = undefined;
    // shutdown + exit end it; one that does not answer is terminated rather than left behind.
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const late = setTimeout(() => child.kill('SIGTERM'), 2000);
      await gone;
      clearTimeout(late);
    }
  }

  dispose(): void { void this.stop(); }
}

/** The last line a process wrote that says something, cut to a sentence's length. */
function lastLine(text: string): string {
  const line = text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean).pop() ?? '';
  return line.length > 300 ? `${line.slice(0, 299)}…` : line;
}

function hasKey(table: Record<string, unknown> | undefined, dotted: string): boolean {
  let v: unknown = table;
  for (const k of dotted.split('.')) {
    if (!v || typeof v !== 'object' || !(k in (v as object))) return false;
    v = (v as Record<string, unknown>)[k];
  }
  return true;
}

function fileHasKey(file: string, key: string): boolean {
  try { return locateTomlKey(fs.readFileSync(file, 'utf8'), key) !== undefined; } catch { return false; }
}

/** Opens a TOML file with the cursor on the key (or its table), in the person's editor. */
async function openAtKey(file: string, key: string | undefined): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(file));
  const at = key ? locateTomlKey(doc.getText(), key) : undefined;
  const pos = new vscode.Position(at?.line ?? 0, at?.column ?? 0);
  await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, doc.lineAt(pos.line).range.end), preview: false });
}

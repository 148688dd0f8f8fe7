// The connection to dshd: a vscode-languageclient over stdio (the daemon speaks LSP framing), plus
// the `experimental.dsh` capability, typed requests and the error kinds of SPEC section 6.
import * as vscode from 'vscode';
import { resolveCommand } from './command';
import { PROTOCOL_VERSION, type DshMethods, type DshRequest, type DshServerCapabilities } from './protocol';
import {
  CloseAction, ErrorAction, LanguageClient, ResponseError, State, TransportKind,
  type LanguageClientOptions, type ServerOptions, type StaticFeature,
} from 'vscode-languageclient/node';

/** Declares that this editor answers `dsh/questions/ask` (plan reviews). */
class DshCapabilities implements StaticFeature {
  fillClientCapabilities(capabilities: { experimental?: unknown }): void {
    const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
    capabilities.experimental = { ...experimental, dsh: { questions: true } };
  }
  initialize(): void {}
  getState() { return { kind: 'static' as const }; }
  clear(): void {}
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

export class Daemon implements vscode.Disposable {
  client: LanguageClient | undefined;
  private readonly handlers: ((client: LanguageClient) => void)[] = [];
  private readonly listeners: ConnectionListener[] = [];
  private stopping = false;
  /** Why the last start failed, with the fix (also shown to the person). */
  lastError: string | undefined;

  constructor(private readonly output: vscode.OutputChannel) {}

  onConnection(fn: ConnectionListener): void { this.listeners.push(fn); }
  private emit(state: Parameters<ConnectionListener>[0], detail?: string) { for (const l of this.listeners) l(state, detail); }

  /** Registers notification/request handlers on every client this daemon starts. */
  install(fn: (client: LanguageClient) => void): void { this.handlers.push(fn); if (this.client) fn(this.client); }

  get running(): boolean { return this.client?.state === State.Running; }

  async start(folder: vscode.WorkspaceFolder): Promise<boolean> {
    await this.stop();
    const config = vscode.workspace.getConfiguration('dsh', folder.uri);
    const command = config.get<string>('server.command', 'dshd');
    const args = config.get<string[]>('server.args', ['serve']);
    const overrides = config.get<Record<string, unknown>>('config', {});
    const cwd = folder.uri.fsPath;
    this.emit('starting');
    const resolved = resolveCommand(command, cwd);
    if (!resolved) {
      const why = `dshd could not be started: "${command}" was not found${command.includes('/') ? '' : ' on PATH'}.`;
      this.fail(why, 'Install dshd (pip install -e . in the dshd repository, which gives .venv/bin/dshd) or set "dsh.server.command" to the full path of the dshd executable.');
      return false;
    }
    const serverOptions: ServerOptions = { command: resolved, args, transport: TransportKind.stdio, options: { cwd } };
    const clientOptions: LanguageClientOptions = {
      // dshd serves no language features: match no documents, so nothing is synced.
      documentSelector: [{ scheme: 'dsh-no-documents' }],
      workspaceFolder: folder,
      initializationOptions: Object.keys(overrides).length ? { config: overrides } : undefined,
      outputChannel: this.output,
      initializationFailedHandler: () => false, // an invalid config does not get better by retrying
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        // We restart only when the person asks: a restart makes new agents, so silently
        // reconnecting would hide that every open review and armed goal went away.
        closed: () => ({ action: CloseAction.DoNotRestart, handled: true }),
      },
    };
    const client = new LanguageClient('dshd', 'dshd', serverOptions, clientOptions);
    client.registerFeature(new DshCapabilities());
    client.onDidChangeState((e) => {
      if (e.newState === State.Stopped && this.client === client && !this.stopping) {
        this.emit('stopped', 'dshd stopped.');
        void vscode.window.showErrorMessage('dshd stopped. Open reviews were closed without approval.', 'Restart dshd', 'Show Log')
          .then((pick) => this.onPick(pick));
      }
    });
    for (const h of this.handlers) h(client);
    this.client = client;
    try {
      await client.start();
    } catch (e) {
      const err = asDaemonError(e);
      this.fail(`dshd could not be started: ${err.message}`, `Check the dshd log ("Show Log"); the command was ${resolved} ${args.join(' ')} in ${cwd}.`);
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
    this.lastError = undefined;
    this.emit('running');
    return true;
  }

  private fail(why: string, fix: string) {
    this.lastError = `${why} ${fix}`;
    this.output.appendLine(`${why} ${fix}`);
    this.emit('failed', `${why} ${fix}`);
    void vscode.window.showErrorMessage(`${why} ${fix}`, 'Open Settings', 'Show Log').then((pick) => this.onPick(pick));
  }

  private onPick(pick: string | undefined) {
    if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'dsh.server');
    if (pick === 'Show Log') this.output.show();
    if (pick === 'Restart dshd') void vscode.commands.executeCommand('dsh.server.restart');
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
    if (!client) return;
    this.stopping = true;
    try { if (client.isRunning()) await client.stop(2000); } catch { /* already gone */ } finally { this.stopping = false; }
    if (this.client === client) this.client = undefined;
  }

  dispose(): void { void this.stop(); }
}

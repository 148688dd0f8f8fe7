// Another client of the workspace's shared daemon, for the suites that check several clients on one
// session: a second `dshd connect` process (a real forwarder to the same daemon) spoken to over its
// stdio with vscode-jsonrpc, as any editor would. It records every notification, keeps each
// question it is asked open until the test answers it, and tells when the daemon withdrew one.
import { spawn, type ChildProcess } from 'node:child_process';
import * as rpc from 'vscode-jsonrpc/node';

export interface Notice { method: string; params: any }

/** One `dsh/questions/ask` or `dsh/permission/ask` this client was sent, open until answered or withdrawn. */
export interface PeerAsk {
  method: 'dsh/questions/ask' | 'dsh/permission/ask';
  params: any;
  withdrawn: boolean;
  answered: boolean;
  answer(result: unknown): void;
}

export class Peer {
  readonly notices: Notice[] = [];
  readonly asks: PeerAsk[] = [];
  private constructor(readonly name: string, readonly child: ChildProcess, readonly conn: rpc.MessageConnection) {}

  /**
   * Starts `<dshd> connect --workspace <folder>` and initializes as `name` (answering questions and
   * approvals; `trusted`: what it says of the folder, true unless told).
   */
  static async start(dshd: string, folder: string, name: string, opts: { trusted?: boolean } = {}): Promise<Peer> {
    const env = process.env;
    const child = spawn(dshd, ['connect', '--workspace', folder], { cwd: folder, stdio: ['pipe', 'pipe', 'pipe'], env });
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => { stderr = (stderr + b.toString()).slice(-4000); });
    const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(child.stdout!), new rpc.StreamMessageWriter(child.stdin!));
    const peer = new Peer(name, child, conn);
    conn.onNotification((method: string, params: any) => { peer.notices.push({ method, params }); });
    for (const method of ['dsh/questions/ask', 'dsh/permission/ask'] as const) {
      conn.onRequest(method, (params: any, token: rpc.CancellationToken) => new Promise((resolve, reject) => {
        const ask: PeerAsk = {
          method, params, withdrawn: false, answered: false,
          answer: (result) => { ask.answered = true; resolve(result); },
        };
        token.onCancellationRequested(() => {
          ask.withdrawn = true;
          reject(new rpc.ResponseError(-32800, 'withdrawn'));
        });
        peer.asks.push(ask);
      }));
    }
    conn.listen();
    const exited = new Promise<never>((_, reject) => child.on('exit', (code) => reject(new Error(`dshd connect exited ${code}: ${stderr}`))));
    const init = conn.sendRequest('initialize', {
      processId: process.pid, clientInfo: { name }, rootUri: `file://${folder}`,
      workspaceFolders: [{ uri: `file://${folder}`, name: 'ws' }],
      capabilities: { experimental: { dsh: { questions: true, permissions: true } } },
      initializationOptions: { trusted: opts.trusted ?? true },
    });
    await Promise.race([init, exited]);
    await conn.sendNotification('initialized', {});
    return peer;
  }

  request<T = any>(method: string, params: unknown): Promise<T> { return this.conn.sendRequest(method, params) as Promise<T>; }

  /** The notifications of `method` so far whose params pass `pred`. */
  seen(method: string, pred: (params: any) => boolean = () => true): any[] {
    return this.notices.filter((n) => n.method === method && pred(n.params)).map((n) => n.params);
  }

  /** The newest open (unanswered, not withdrawn) ask of `method`. */
  openAsk(method: PeerAsk['method']): PeerAsk | undefined {
    return [...this.asks].reverse().find((a) => a.method === method && !a.answered && !a.withdrawn);
  }

  /** Leaves as an editor does: shutdown, exit, and the forwarder ends. */
  async close(): Promise<void> {
    try {
      await this.conn.sendRequest('shutdown');
      await this.conn.sendNotification('exit');
    } catch { /* already gone */ }
    await new Promise<void>((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      const late = setTimeout(() => { this.child.kill('SIGTERM'); }, 3000);
      this.child.once('exit', () => { clearTimeout(late); resolve(); });
    });
    this.conn.dispose();
  }
}

// The conversation of the open session, as the daemon projects it: `dsh/chat/get` fills a store
// and subscribes; `dsh/chat/item` upserts follow. Upserts that arrive while the first read is
// under way are applied after it (they are newer than what it returns).
import * as vscode from 'vscode';
import type { Daemon } from '../daemon';
import type { ChatItem, ChatItemParams } from '../protocol';
import { ChatStore } from './store';

export interface ChatItemEvent { item: ChatItem; isNew: boolean; store: ChatStore }

export class ChatFeed implements vscode.Disposable {
  store: ChatStore | undefined;
  private loading: { agentId: string; buffered: ChatItem[] } | undefined;
  private readonly itemEmitter = new vscode.EventEmitter<ChatItemEvent>();
  private readonly resetEmitter = new vscode.EventEmitter<ChatStore | undefined>();
  /** A live upsert (never fired for the history a first read returns). */
  readonly onItem = this.itemEmitter.event;
  /** The whole conversation changed (another session, or the first read finished). */
  readonly onReset = this.resetEmitter.event;

  constructor(private readonly daemon: Daemon) {
    daemon.install((client) => client.onNotification('dsh/chat/item', (p: ChatItemParams) => this.onNotification(p)));
  }

  private onNotification(p: ChatItemParams): void {
    if (this.loading?.agentId === p.agentId) { this.loading.buffered.push(p.item); return; }
    const store = this.store;
    if (!store || store.agentId !== p.agentId) return;
    const isNew = store.upsert(p.item);
    this.itemEmitter.fire({ item: p.item, isNew, store });
  }

  /** Follows this agent's conversation (undefined: no session). */
  async open(agentId: string | undefined, sessionId: string | undefined): Promise<void> {
    if (!agentId || !sessionId) { this.store = undefined; this.loading = undefined; this.resetEmitter.fire(undefined); return; }
    if (this.store?.agentId === agentId && !this.loading) return;
    const loading = { agentId, buffered: [] as ChatItem[] };
    this.loading = loading;
    this.store = new ChatStore(agentId, sessionId);
    this.resetEmitter.fire(this.store);
    try {
      const { items } = await this.daemon.request('dsh/chat/get', { agentId });
      if (this.loading !== loading) return; // another session was opened meanwhile
      const store = new ChatStore(agentId, sessionId, items);
      for (const item of loading.buffered) store.upsert(item);
      this.store = store;
    } finally {
      if (this.loading === loading) this.loading = undefined;
    }
    this.resetEmitter.fire(this.store);
  }

  dispose(): void { this.itemEmitter.dispose(); this.resetEmitter.dispose(); }
}

// The conversation of the open session, as the daemon projects it: `dsh/chat/get` of the newest
// page fills a store and subscribes; `dsh/chat/item` upserts follow. Upserts that arrive while the
// first read is under way are applied after it (they are newer than what it returns). The daemon
// answers a page from its chat marks, so a long session opens as fast as a short one; earlier
// pages are read when the person asks (the chat view's "Show earlier messages").
import * as vscode from 'vscode';
import type { Daemon } from '../daemon';
import type { ChatItem, ChatItemParams } from '../protocol';
import { CHAT_PAGE_SIZE, ChatStore, olderSeqOf } from './store';

export interface ChatItemEvent { item: ChatItem; isNew: boolean; store: ChatStore }
/** Earlier items put in front of the store (`items`, in list order). */
export interface ChatEarlierEvent { items: ChatItem[]; store: ChatStore }

/** dsh/chat/get beforeSeq above any seq: the newest page. */
const NEWEST_PAGE = Number.MAX_SAFE_INTEGER;

export class ChatFeed implements vscode.Disposable {
  store: ChatStore | undefined;
  private loading: { agentId: string; buffered: ChatItem[] } | undefined;
  private readonly itemEmitter = new vscode.EventEmitter<ChatItemEvent>();
  private readonly resetEmitter = new vscode.EventEmitter<ChatStore | undefined>();
  private readonly earlierEmitter = new vscode.EventEmitter<ChatEarlierEvent>();
  private earlier: Promise<void> | undefined;
  /** A live upsert (never fired for the history a first read returns). */
  readonly onItem = this.itemEmitter.event;
  /** The whole conversation changed (another session, or the first read finished). */
  readonly onReset = this.resetEmitter.event;
  /** An earlier page was put in front of the conversation. */
  readonly onEarlier = this.earlierEmitter.event;

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
      const { items } = await this.daemon.request('dsh/chat/get', { agentId, beforeSeq: NEWEST_PAGE, limit: CHAT_PAGE_SIZE });
      if (this.loading !== loading) return; // another session was opened meanwhile
      const store = new ChatStore(agentId, sessionId, items);
      store.olderSeq = olderSeqOf(items);
      for (const item of loading.buffered) store.upsert(item);
      this.store = store;
    } finally {
      if (this.loading === loading) this.loading = undefined;
    }
    this.resetEmitter.fire(this.store);
  }

  /** Reads the page before the first item held and puts it in front (nothing when none is left). */
  loadEarlier(): Promise<void> {
    const store = this.store;
    if (!store || this.loading || store.olderSeq === undefined) return Promise.resolve();
    this.earlier ??= (async () => {
      try {
        const { items } = await this.daemon.request('dsh/chat/get', { agentId: store.agentId, beforeSeq: store.olderSeq, limit: CHAT_PAGE_SIZE });
        if (this.store !== store) return; // another session was opened meanwhile
        const added = store.prepend(items, olderSeqOf(items));
        this.earlierEmitter.fire({ items: added, store });
      } finally {
        this.earlier = undefined;
      }
    })();
    return this.earlier;
  }

  /** Reads every earlier page (the export shows the whole conversation). */
  async loadAll(): Promise<void> {
    while (this.store && !this.loading && this.store.olderSeq !== undefined) {
      const before = this.store.olderSeq;
      await this.loadEarlier();
      if (this.store?.olderSeq === before) return; // the read failed or the session changed
    }
  }

  dispose(): void { this.itemEmitter.dispose(); this.resetEmitter.dispose(); this.earlierEmitter.dispose(); }
}

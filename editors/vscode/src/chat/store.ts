// The conversation of one agent as the daemon projects it: chat items kept by id (an upsert
// replaces the item with its id in place, a new id goes at the end). Pure: no vscode import.
import type { ChatItem, TurnEndChatItem } from '../protocol';

/** A turn that ended in an error (a model error or another): its card is red and it is a notification. */
export function turnFailed(item: TurnEndChatItem): boolean {
  return !!item.error || item.stopReason === 'model-error' || item.stopReason === 'error';
}

export class ChatStore {
  private readonly list: ChatItem[] = [];
  private readonly index = new Map<string, number>();

  constructor(readonly agentId: string, readonly sessionId: string, items: readonly ChatItem[] = []) {
    for (const item of items) this.upsert(item);
  }

  get items(): readonly ChatItem[] { return this.list; }

  /** Replaces the item with this id, or appends it; returns whether it was new. */
  upsert(item: ChatItem): boolean {
    const at = this.index.get(item.id);
    if (at !== undefined) { this.list[at] = item; return false; }
    this.index.set(item.id, this.list.length);
    this.list.push(item);
    return true;
  }

  get(id: string): ChatItem | undefined {
    const at = this.index.get(id);
    return at === undefined ? undefined : this.list[at];
  }

  /**
   * A turn is running: the newest turn an item names has no turn-end item yet. (A person's
   * prompt and a goal round both open one; a command like `/plan` opens none.)
   */
  get turnRunning(): boolean {
    let newest = 0;
    const ended = new Set<number>();
    for (const item of this.list) {
      const turn = (item as { turn?: number }).turn;
      if (typeof turn === 'number') newest = Math.max(newest, turn);
      if (item.kind === 'turn-end') ended.add(item.turn);
    }
    return newest > 0 && !ended.has(newest);
  }
}

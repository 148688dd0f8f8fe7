// The conversation of one agent as the daemon projects it: chat items kept by id (an upsert
// replaces the item with its id in place, a new id goes at the end). Pure: no vscode import.
import type { ChatItem, TurnEndChatItem } from '../protocol';

/** A turn that ended in an error (a model error or another): its card is red and it is a notification. */
export function turnFailed(item: TurnEndChatItem): boolean {
  return !!item.error || item.stopReason === 'model-error' || item.stopReason === 'error';
}

/** How many items a chat page holds (the newest on open, then each earlier one asked for). */
export const CHAT_PAGE_SIZE = 200;

/**
 * The seq to ask below for the page before `page` (its first item's), or undefined when the page
 * was short: nothing older is left. Items without a seq (live-only) do not count toward the limit.
 */
export function olderSeqOf(page: readonly ChatItem[], limit = CHAT_PAGE_SIZE): number | undefined {
  const seqs = page.map((i) => (i as { seq?: number }).seq).filter((s): s is number => typeof s === 'number');
  return seqs.length >= limit ? seqs[0] : undefined;
}

export class ChatStore {
  private list: ChatItem[] = [];
  private readonly index = new Map<string, number>();
  /** The seq below which earlier items are still to load (undefined: the store starts at the first). */
  olderSeq: number | undefined;

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

  /**
   * Puts an earlier page (in list order) in front of the items held and notes where the one
   * before it starts; an id already held keeps its newer form. Returns the items put in front.
   */
  prepend(page: readonly ChatItem[], olderSeq: number | undefined): ChatItem[] {
    const older = page.filter((item) => !this.index.has(item.id));
    this.olderSeq = olderSeq;
    if (!older.length) return [];
    this.list = [...older, ...this.list];
    this.index.clear();
    this.list.forEach((item, at) => this.index.set(item.id, at));
    return older;
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

// Several clients on one live session: who else is attached (`dsh/session/clients`) and who
// answered a question first (`dsh/question/resolved`), in the words the status bar, the chat
// header and the one-line notice use. Pure (no vscode import): node's test runner checks it.

import type { AttachedClient, QuestionResolvedParams, SessionClientsParams } from './protocol';

// The wire's own types (protocol/dshd_protocol, generated into protocol.ts): `dsh/session/clients`
// lists every connection attached to a session (`you`: this window's own), sent whenever the set
// changes; `dsh/question/resolved` says a question got its first valid answer, and from whom.
export type { AttachedClient, QuestionResolvedParams, SessionClientsParams };

/** What the one line needs of a resolution; an outcome or kind a newer daemon sends is still said. */
export interface Resolved { kind: string; outcome: string; by: { clientName: string } }

/** The names of the other clients attached (not this window), in the daemon's order. */
export function otherClients(clients: readonly AttachedClient[]): string[] {
  return clients.filter((c) => !c.you).map((c) => c.clientName);
}

/** `Neovim`, `Neovim and Zed`, `Neovim, Zed and 1 more`. */
export function namesInWords(names: readonly string[]): string {
  if (names.length <= 1) return names[0] ?? '';
  if (names.length === 2) return `${names[0]} and ${names[1]}`;
  if (names.length === 3) return `${names[0]}, ${names[1]} and ${names[2]}`;
  return `${names[0]}, ${names[1]} and ${names.length - 2} more`;
}

/** The chat header's line: `also here: Neovim` (empty when this window is alone on the session). */
export function attachedWords(clients: readonly AttachedClient[]): string {
  const others = otherClients(clients);
  return others.length ? `also here: ${namesInWords(others)}` : '';
}

/** The status bar item: `$(organization) Neovim` (undefined when nobody else is attached). */
export function attachedStatus(clients: readonly AttachedClient[]): { text: string; tooltip: string } | undefined {
  const others = otherClients(clients);
  if (!others.length) return undefined;
  const you = clients.find((c) => c.you)?.clientName;
  return {
    text: `$(organization) ${others.length <= 2 ? namesInWords(others) : `${others.length} others`}`,
    tooltip: `Also attached to this session: ${namesInWords(others)}${you ? ` (this window is "${you}")` : ''}. `
      + 'Prompts, replies, plan reviews and approvals reach every one of you; the first answer to a question counts.',
  };
}

/**
 * Who joined and who left between two lists of the same session (`Neovim joined this session.`),
 * for a passing status bar message; undefined when the others are the same. The first list seen
 * (`before` undefined) is no change: the person opened the session and sees who is there.
 */
export function clientsChange(before: readonly AttachedClient[] | undefined, after: readonly AttachedClient[]): string | undefined {
  if (!before) return undefined;
  const was = new Map(before.filter((c) => !c.you).map((c) => [c.clientId, c.clientName]));
  const now = new Map(after.filter((c) => !c.you).map((c) => [c.clientId, c.clientName]));
  const joined = [...now].filter(([id]) => !was.has(id)).map(([, name]) => name);
  const left = [...was].filter(([id]) => !now.has(id)).map(([, name]) => name);
  const parts = [
    ...(joined.length ? [`${namesInWords(joined)} joined this session`] : []),
    ...(left.length ? [`${namesInWords(left)} left it`] : []),
  ];
  if (!parts.length) return undefined;
  const text = parts.join('; ');
  return `${left.length && !joined.length ? text.replace(' left it', ' left this session') : text}.`;
}

/** Quoted, and cut short: a title in a one-line notice. */
function quoted(title: string | undefined): string {
  if (!title) return '';
  const t = title.trim().replace(/\s+/g, ' ');
  return ` "${t.length > 60 ? `${t.slice(0, 59)}…` : t}"`;
}

/**
 * The one line that says who answered what elsewhere: `Neovim approved the plan "Plan: retries".`
 * `title`: the question's title as this window showed it (the plan's, the request's).
 */
export function resolvedWords(p: Resolved, title?: string): string {
  const who = p.by.clientName || 'another client';
  if (p.kind === 'plan-review') {
    const plan = `the plan${quoted(title)}`;
    if (p.outcome === 'approve') return `${who} approved ${plan}.`;
    if (p.outcome === 'revise') return `${who} sent ${plan} back to planning.`;
    return `${who} answered ${plan} (${p.outcome}).`;
  }
  const what = title ? quoted(title).trim() : 'the request';
  if (p.outcome === 'allow-once') return `${who} allowed ${what}.`;
  if (p.outcome === 'allow-session') return `${who} allowed ${what}, and the same for the rest of the session.`;
  if (p.outcome === 'reject') return `${who} rejected ${what}.`;
  return `${who} answered ${what} (${p.outcome}).`;
}

/**
 * The questions the daemon withdrew from this window lately (question id -> title): the daemon
 * tells every client who answered (`dsh/question/resolved`) and withdraws the others' asks, and
 * the withdrawal may be read first (vscode-jsonrpc acts on `$/cancelRequest` as it arrives). A
 * few are kept, so the news that follows still names what was answered.
 */
export class RecentlyWithdrawn {
  private readonly titles = new Map<string, string>();
  constructor(private readonly keep = 20) {}
  add(questionId: string, title: string): void {
    this.titles.delete(questionId);
    this.titles.set(questionId, title);
    while (this.titles.size > this.keep) this.titles.delete(this.titles.keys().next().value as string);
  }
  /** The title of a question withdrawn lately (forgotten once taken). */
  take(questionId: string): string | undefined {
    const title = this.titles.get(questionId);
    this.titles.delete(questionId);
    return title;
  }
}

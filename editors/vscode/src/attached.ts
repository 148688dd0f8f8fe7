// Several clients on one live session: who else is attached (`dsh/session/clients`) and who
// answered a question first (`dsh/question/resolved`), in the words the status bar, the chat
// header and the one-line notice use. Pure (no vscode import): node's test runner checks it.

/** One connection attached to the session, as the daemon lists it (`you`: this window's own). */
export interface AttachedClient { clientId: string; clientName: string; you: boolean }

/** `dsh/session/clients`: every connection attached to the session, sent whenever the set changes. */
export interface SessionClientsParams { agentId: string; sessionId: string; clients: AttachedClient[] }

export type ResolvedOutcome = 'approve' | 'revise' | 'allow-once' | 'allow-session' | 'reject';

/**
 * `dsh/question/resolved`: a question to the people (a plan review, an approval) got its first
 * valid answer, from `by`; every other attached client closes its windows for it.
 */
export interface QuestionResolvedParams {
  agentId: string;
  sessionId: string;
  /** The plan question's `id`, or the permission request's `callId`. */
  questionId: string;
  kind: 'plan-review' | 'permission';
  outcome: ResolvedOutcome | string;
  by: { clientName: string };
}

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
export function resolvedWords(p: Pick<QuestionResolvedParams, 'kind' | 'outcome' | 'by'>, title?: string): string {
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

// The messages between the extension host and the chat webview, typed per direction (the host
// forwards a listed set and stays thin). Imported by both bundles: no vscode import.
import type { ChatItem } from '../protocol';
import type { GoalRoundsResult } from '../contract';
import type { PreviousNote } from '../planWords';

/** What the chat view's header shows: the session, the goal's status words, plan mode. */
export interface ChatHeader {
  connection: 'starting' | 'running' | 'stopped' | 'failed';
  session?: { title: string; sessionId: string };
  goal?: { text: string; tooltip: string; severity: 'none' | 'hint' | 'warning'; /** the daemon offers "raise" (a spent budget) */ raise?: string };
  plan?: { text: string; active: boolean };
  /** What runs: `waiting` (a question to the person is open) beats `working` (a turn runs). */
  activity: { kind: 'waiting' | 'working' | 'idle'; text: string };
  /** Who else is attached to the session (`also here: Neovim`), with their names in full; absent when nobody. */
  others?: { text: string; tooltip: string };
}

/** A plan review this window can answer, keyed by the question id its chat card carries. */
export interface AnswerableReview {
  questionId: string; draftFeedback: string; comments: number;
  /** What the person asked of the plan before (a revised plan's review): set beside this one. */
  asked?: { title: string; feedback?: string; comments: PreviousNote[] };
  /** There is a plan before this one to compare with. */
  canCompare?: boolean;
}

/** A permission request waiting for the person (an edit or a command the agent wants to run). */
export interface PendingPermission {
  requestId: string;
  title: string;
  tool: string;
  mutability: string;
  command?: string;
  cwd?: string;
  hasDiff: boolean;
}

export type HostToView =
  | { type: 'state'; header: ChatHeader; items: ChatItem[]; hasEarlier: boolean; busy: boolean; reviews: AnswerableReview[]; permissions: PendingPermission[]; rounds?: GoalRoundsResult | null }
  | { type: 'item'; item: ChatItem }
  /** Earlier items to put in front of those shown; `hasEarlier`: more are left before them. */
  | { type: 'earlier'; items: ChatItem[]; hasEarlier: boolean }
  | { type: 'header'; header: ChatHeader }
  | { type: 'busy'; busy: boolean }
  | { type: 'reviews'; reviews: AnswerableReview[] }
  | { type: 'permissions'; permissions: PendingPermission[] }
  /** The goal's rounds for the header's timeline (null: no goal, or a daemon without them). */
  | { type: 'rounds'; rounds: GoalRoundsResult | null }
  /** Opens (or folds) the header's timeline. */
  | { type: 'timeline'; open: boolean }
  | { type: 'focus' };

export type ViewToHost =
  | { type: 'ready' }
  | { type: 'send'; text: string }
  | { type: 'stop' }
  | { type: 'approve'; questionId: string }
  | { type: 'approveAndStartGoal'; questionId: string }
  | { type: 'compare'; questionId: string }
  | { type: 'pickPlan' }
  | { type: 'raise' }
  | { type: 'keepPlanning'; questionId: string; feedback: string }
  | { type: 'draft'; questionId: string; feedback: string }
  | { type: 'openPlan'; questionId: string }
  | { type: 'permission'; requestId: string; outcome: 'allow-once' | 'allow-session' | 'reject'; feedback?: string }
  | { type: 'showPermission'; requestId: string }
  | { type: 'pickSession' }
  | { type: 'newSession' }
  | { type: 'export' }
  | { type: 'showEarlier' }
  /** "Rewind to here" on an item that carries this checkpoint. */
  | { type: 'rewind'; seq: number };

/** A message from the webview, checked: anything else is dropped (the webview is not trusted to be well formed). */
export function parseViewMessage(m: unknown): ViewToHost | undefined {
  if (!m || typeof m !== 'object') return undefined;
  const o = m as Record<string, unknown>;
  const str = (k: string) => typeof o[k] === 'string';
  switch (o.type) {
    case 'ready': case 'stop': case 'pickSession': case 'newSession': case 'export': case 'showEarlier': case 'pickPlan': case 'raise':
      return { type: o.type };
    case 'send':
      return str('text') ? { type: 'send', text: o.text as string } : undefined;
    case 'approve': case 'openPlan': case 'approveAndStartGoal': case 'compare':
      return str('questionId') ? { type: o.type, questionId: o.questionId as string } : undefined;
    case 'keepPlanning': case 'draft':
      return str('questionId') && str('feedback') ? { type: o.type, questionId: o.questionId as string, feedback: o.feedback as string } : undefined;
    case 'rewind':
      return Number.isSafeInteger(o.seq) && (o.seq as number) >= 1 ? { type: 'rewind', seq: o.seq as number } : undefined;
    case 'showPermission':
      return str('requestId') ? { type: 'showPermission', requestId: o.requestId as string } : undefined;
    case 'permission':
      if (!str('requestId') || !['allow-once', 'allow-session', 'reject'].includes(o.outcome as string)) return undefined;
      if (o.feedback !== undefined && !str('feedback')) return undefined;
      return { type: 'permission', requestId: o.requestId as string, outcome: o.outcome as 'allow-once' | 'allow-session' | 'reject', ...(str('feedback') ? { feedback: o.feedback as string } : {}) };
    default:
      return undefined;
  }
}

// The wire shapes of plans of record, waiting goals and the rounds timeline, as the daemon sends
// them. Re-exported from the generated protocol types once the daemon's schema has them.
export interface PlanLineComment { line: number; text: string }

/** One plan presented in the session (`dsh/plan/history`), oldest first. */
export interface PlanRecord {
  callId: string;
  seq: number;
  title: string;
  markdown: string;
  outcome: 'approved' | 'revise' | 'failed' | 'pending';
  feedback?: string;
  comments?: PlanLineComment[];
  at: string;
}

/** The plan a revised one answers: what the person asked for last time (`question.previous`). */
export interface PreviousPlan {
  callId: string;
  title: string;
  markdown: string;
  feedback?: string;
  comments?: PlanLineComment[];
}

/** One round of the current goal (`dsh/goal/rounds`). */
export interface GoalRoundRecord {
  round: number;
  revision: number;
  turn: number;
  startedAt: string;
  endedAt?: string;
  tokens: { input: number; cachedInput: number; output: number };
  estimated?: boolean;
  toolCalls: number;
  waitedMs: number;
  outcome: string;
}

export interface GoalRoundsResult { goalId: string | null; rounds: GoalRoundRecord[] }

export type WaitingFor = 'plan-review' | 'approval';

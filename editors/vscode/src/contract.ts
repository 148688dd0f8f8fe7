// The wire shapes of plans of record, waiting goals and the rounds timeline, under the names this
// extension uses for them (all generated from the protocol's schema).
import type { GoalView, LineComment } from './protocol';

export type { GoalRoundRecord, GoalRoundsResult, PlanRecord, PlanReviewPrevious as PreviousPlan } from './protocol';
export type PlanLineComment = LineComment;
export type WaitingFor = NonNullable<GoalView['waitingFor']>;

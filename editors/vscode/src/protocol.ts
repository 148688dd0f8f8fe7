// Hand-written stand-in until protocol/dshd_protocol/dsh-protocol.schema.json exists;
// scripts/gen-protocol.mjs replaces this file with types generated from that schema.
export type GoalPhase = 'active' | 'paused' | 'blocked' | 'complete';
export type Activation = 'armed' | 'disarmed';
export type GoalChangeOp = 'create' | 'edit' | 'pause' | 'resume' | 'complete' | 'block' | 'clear' | 'round' | 'arm' | 'disarm';
export interface GoalRef { id: string; revision: number }
export interface BlockedReason { code: string; message: string }
export interface GoalView {
  id: string; revision: number; objective: string; phase: GoalPhase; maxRounds: number; roundsStarted: number;
  roundsLeft: number; createdAt: string; updatedAt: string; activation: Activation; blockedReason?: BlockedReason;
}
export interface PlanState { active: boolean; pending?: boolean }
export interface SessionEvent { seq: number; type: string; at: string; data: { [k: string]: unknown }; turn?: number }
export interface SessionSummary { sessionId: string; title: string | null; updatedAt: string; goal?: GoalView }
export interface SessionHandle { sessionId: string; agentId: string }
export interface SessionListResult { sessions: SessionSummary[] }
export interface SessionOpenResult { sessionId: string; agentId: string; plan: PlanState; goal: GoalView | null }
export interface SessionEventsResult { events: SessionEvent[]; nextSeq: number }
export interface PromptResult { turn: number; stopReason: string }
export interface SteerResult { queued: boolean }
export interface PlanSetResult { outcome: 'committed' | 'queued' | 'cancelled' | 'noop'; state: PlanState }
export interface GoalClearResult { ref: GoalRef }
export interface PlanReviewQuestion { id: string; kind: 'plan-review'; title: string; plan: string; choices: string[] }
export interface QuestionsAskParams { agentId: string; sessionId: string; questions: PlanReviewQuestion[] }
export interface LineComment { line: number; text: string }
export interface Answer { id: string; choice: string; feedback?: string; comments?: LineComment[] }
export interface QuestionsAskResult { answers: Answer[] }
export interface GoalChangedParams { agentId: string; sessionId: string; op: GoalChangeOp; revision: number; goal?: GoalView }
export interface PlanChangedParams { agentId: string; sessionId: string; active: boolean; pending?: boolean }
export interface SessionEventParams { agentId: string; sessionId: string; event: SessionEvent }

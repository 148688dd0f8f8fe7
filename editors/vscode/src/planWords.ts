// Words about past plans (the plan picker, the review's "last time" notes, the goal a plan
// starts). Pure: node's test runner checks them directly.
import type { PlanLineComment, PlanRecord, PreviousPlan } from './contract';
import { planFileName } from './reviewWords';
import { timeAgo } from './timeAgo';

const OUTCOME_WORDS: Record<PlanRecord['outcome'], string> = {
  approved: 'approved',
  revise: 'sent back',
  failed: 'not reviewed',
  pending: 'under review now',
};

const OUTCOME_ICONS: Record<PlanRecord['outcome'], string> = {
  approved: '$(pass)',
  revise: '$(reply)',
  failed: '$(circle-slash)',
  pending: '$(bell)',
};

export function outcomeWords(outcome: PlanRecord['outcome']): string {
  return OUTCOME_WORDS[outcome] ?? outcome;
}

function count(n: number, one: string): string { return `${n} ${one}${n === 1 ? '' : 's'}`; }

/** `sent back · 2 comments · feedback`: what a plan got, in a few words. */
export function planVerdict(p: Pick<PlanRecord, 'outcome' | 'feedback' | 'comments'>): string {
  const parts = [outcomeWords(p.outcome)];
  if (p.comments?.length) parts.push(count(p.comments.length, 'comment'));
  if (p.feedback?.trim()) parts.push('feedback');
  return parts.join(' · ');
}

export interface PlanPickItem { label: string; description: string; detail: string; index: number }

/** The picker's items: newest first, each naming its place in the session (`3 of 4`). */
export function planPickItems(plans: readonly PlanRecord[], now = Date.now()): PlanPickItem[] {
  return plans.map((p, index) => ({
    label: `${OUTCOME_ICONS[p.outcome] ?? ''} ${p.title}`.trim(),
    description: `${planVerdict(p)} · ${timeAgo(p.at, now)}`,
    detail: p.feedback?.trim() ? `Feedback: ${oneLine(p.feedback)}` : `Plan ${index + 1} of ${plans.length}${index > 0 ? ': opens with its changes since the one before' : ''}`,
    index,
  })).reverse();
}

function oneLine(text: string, max = 160): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** The file name a past plan's read-only document gets (its tab's label). */
export function pastPlanFileName(p: PlanRecord, index: number): string {
  return `${planFileName(p.title)} (${index + 1}, ${outcomeWords(p.outcome)}).md`;
}

/** The goal a plan approved with "Approve and start a goal" gets: its objective names the plan. */
export function goalObjectiveFor(planTitle: string): string {
  return `Carry out the approved plan "${planTitle.trim()}"`;
}

export interface PreviousNote { line: number; text: string; quote: string }

/**
 * What the person asked of the plan before (its line comments, each with the line it was on, and
 * its feedback), to set beside the revised plan.
 */
export function previousNotes(previous: PreviousPlan): { title: string; feedback?: string; comments: PreviousNote[] } {
  const lines = previous.markdown.split('\n');
  const comments = [...(previous.comments ?? [])].sort((a, b) => a.line - b.line).map((c: PlanLineComment) => ({
    line: c.line, text: c.text, quote: (lines[c.line - 1] ?? '').trim(),
  }));
  const feedback = previous.feedback?.trim();
  return { title: previous.title, ...(feedback ? { feedback } : {}), comments };
}

/** A number of milliseconds as people say it: `850 ms`, `12 s`, `3 min 5 s`. */
export function durationWords(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

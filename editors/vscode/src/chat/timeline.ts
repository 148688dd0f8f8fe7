// The goal's rounds as a timeline (the chat header draws it): one bar per round, its height the
// round's tokens (cached input, the rest of the input, output stacked), its colour the round's
// outcome, a mark above it when the round waited for the person. Pure geometry and words, shared
// by the page and the unit tests; no vscode import.
import type { GoalRoundRecord } from '../contract';
import { durationWords } from '../planWords';

export type OutcomeClass = 'ok' | 'running' | 'cancelled' | 'error' | 'other';

export interface Segment { kind: 'cached' | 'input' | 'output'; y: number; height: number }
export interface TimelineBar {
  round: number;
  x: number;
  width: number;
  segments: Segment[];
  /** The mark above the bar when the round waited for the person. */
  waited: boolean;
  outcome: OutcomeClass;
  /** The bar's tooltip: everything about the round in words. */
  title: string;
}

export interface TimelineLayout { width: number; height: number; bars: TimelineBar[]; summary: string; estimated: boolean }

export const WAIT_LANE = 5;

export function outcomeClass(outcome: string): OutcomeClass {
  if (outcome === 'end-turn') return 'ok';
  if (outcome === 'running') return 'running';
  if (outcome === 'cancelled') return 'cancelled';
  if (outcome === 'model-error' || outcome === 'error') return 'error';
  return 'other';
}

/** `950`, `12.3k`, `1.2M` (with `~` in front when the figure is an estimate). */
export function tokenWords(n: number, estimated = false): string {
  const t = n < 1000 ? String(n) : n < 1_000_000 ? `${trim(n / 1000)}k` : `${trim(n / 1_000_000)}M`;
  return estimated ? `~${t}` : t;
}

function trim(x: number): string { return (x >= 100 ? x.toFixed(0) : x.toFixed(1)).replace(/\.0$/, ''); }

function roundWords(r: GoalRoundRecord): string {
  const est = !!r.estimated;
  const parts = [
    `${tokenWords(r.tokens.input, est)} in${r.tokens.cachedInput ? ` (${tokenWords(r.tokens.cachedInput, est)} cached)` : ''}`,
    `${tokenWords(r.tokens.output, est)} out`,
    `${r.toolCalls} tool call${r.toolCalls === 1 ? '' : 's'}`,
  ];
  if (r.waitedMs > 0) parts.push(`waited for you ${durationWords(r.waitedMs)}`);
  const took = r.endedAt ? Date.parse(r.endedAt) - Date.parse(r.startedAt) : NaN;
  parts.push(r.outcome === 'running' ? 'running now' : `ended: ${r.outcome}${Number.isFinite(took) ? ` after ${durationWords(took)}` : ''}`);
  return `Round ${r.round}: ${parts.join(' · ')}`;
}

/** A reply's usage as its tooltip says it: cached input and estimates named. */
export function usageTitle(u: { inputTokens: number; outputTokens: number; cachedInputTokens?: number; estimated?: boolean }): string {
  const about = u.estimated ? 'about ' : '';
  const cached = u.cachedInputTokens ? ` (${u.cachedInputTokens} from the server's prompt cache)` : '';
  const note = u.estimated ? ' (estimated at a token per 4 characters: the model server reported no usage)' : '';
  return `${about}${u.inputTokens} tokens in${cached}, ${about}${u.outputTokens} out${note}`;
}

/** The whole goal in a line: `5 rounds · 12.3k tokens (8k cached) · waited 1 min 3 s`. */
export function timelineSummary(rounds: readonly GoalRoundRecord[]): string {
  if (!rounds.length) return 'no rounds yet';
  const est = rounds.some((r) => r.estimated);
  const total = rounds.reduce((n, r) => n + r.tokens.input + r.tokens.output, 0);
  const cached = rounds.reduce((n, r) => n + r.tokens.cachedInput, 0);
  const waited = rounds.reduce((n, r) => n + r.waitedMs, 0);
  const parts = [`${rounds.length} round${rounds.length === 1 ? '' : 's'}`, `${tokenWords(total, est)} tokens${cached ? ` (${tokenWords(cached, est)} cached)` : ''}`];
  if (waited > 0) parts.push(`waited for you ${durationWords(waited)}`);
  return parts.join(' · ');
}

/** Bars that fit `width` × `height` pixels, tallest round at full height. */
export function timelineLayout(rounds: readonly GoalRoundRecord[], width: number, height: number): TimelineLayout {
  const n = rounds.length;
  const gap = n > 60 ? 0 : n > 30 ? 1 : 2;
  const barWidth = n ? Math.max(1, Math.min(18, (width - gap * (n - 1)) / n)) : 0;
  const chart = height - WAIT_LANE - 1;
  const max = Math.max(1, ...rounds.map((r) => r.tokens.input + r.tokens.output));
  const bars = rounds.map((r, i) => {
    const cached = Math.min(r.tokens.cachedInput, r.tokens.input);
    const parts: [Segment['kind'], number][] = [['cached', cached], ['input', r.tokens.input - cached], ['output', r.tokens.output]];
    let y = height;
    const segments: Segment[] = [];
    for (const [kind, tokens] of parts) {
      if (tokens <= 0) continue;
      const h = Math.max(1, (tokens / max) * chart);
      y -= h;
      segments.push({ kind, y, height: h });
    }
    // A round that used nothing yet (it just started) still shows where it is.
    if (!segments.length) segments.push({ kind: 'output', y: height - 1, height: 1 });
    return {
      round: r.round, x: i * (barWidth + gap), width: barWidth, segments, waited: r.waitedMs > 0,
      outcome: outcomeClass(r.outcome), title: roundWords(r),
    };
  });
  return { width, height, bars, summary: timelineSummary(rounds), estimated: rounds.some((r) => r.estimated) };
}

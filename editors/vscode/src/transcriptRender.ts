// Markdown for the transcript view, one block per committed log event. Pure.
import type { SessionEvent } from './protocol';

const MAX_INLINE = 400;

function clip(text: string, max = MAX_INLINE): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

function quote(text: string): string {
  return text.split('\n').map((l) => `> ${l}`).join('\n');
}

const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/**
 * The markdown block for one event, or undefined for events that are bookkeeping only. `toolNames`
 * maps the call ids seen so far to their tool (a plan sent back reads as such, not as a failure).
 */
export function renderEvent(ev: SessionEvent, toolNames: ReadonlyMap<string, string> = new Map()): string | undefined {
  const d = ev.data as Record<string, any>;
  switch (ev.type) {
    case 'session/start':
      return `# Session ${str(d.title ?? d.sessionId)}${d.forkedFrom ? `\n\n_forked from ${str(d.forkedFrom.sessionId)} at seq ${str(d.forkedFrom.seq)}_` : ''}`;
    case 'turn/open':
      return `## Turn ${str(d.turn)} _(${str(d.cause)})_`;
    case 'turn/close':
      return `_turn ${str(d.turn)} ended: ${str(d.stopReason)}_`;
    case 'user/message': {
      const who = d.goalRound ? `Goal round ${str(d.goalRound.round)}` : d.source === 'plugin' ? `Plugin${d.plugin ? ` ${str(d.plugin)}` : ''}` : 'You';
      return `**${who}:**\n\n${quote(str(d.text))}`;
    }
    case 'assistant/message':
      return `**Agent:** ${str(d.text)}`;
    case 'tool/call':
      // A plan reads better as the markdown it is than as an escaped JSON string.
      if (d.name === 'exit_plan_mode' && typeof d.arguments?.plan === 'string') return `→ \`exit_plan_mode\`\n\n${quote(d.arguments.plan.trimEnd())}`;
      return `→ \`${str(d.name)}\` ${clip(JSON.stringify(d.arguments ?? {}))}`;
    case 'tool/result':
      if (toolNames.get(d.callId) === 'exit_plan_mode') return `← ${d.ok ? 'plan approved' : '**sent back with feedback**'}: ${clip(str(d.content))}`;
      return `← ${d.ok ? 'ok' : '**failed**'}: ${clip(str(d.content))}`;
    case 'plan/mode':
      return `_plan mode ${d.active ? 'on' : 'off'}_`;
    case 'goal/change':
      if (d.op === 'clear') return `_goal cleared (${str(d.cleared?.id)})_`;
      return `_goal ${str(d.op)}: "${str(d.goal?.objective)}" · ${str(d.goal?.phase)} · ${str(d.roundsStarted)}/${str(d.goal?.maxRounds)} · rev ${str(d.goal?.revision)}_`;
    case 'request/header':
      return undefined; // one per model request: noise in a transcript
    default:
      return `_${ev.type}_`;
  }
}

/** The whole transcript from events in any order, each seq once. */
export function renderTranscript(title: string, events: Iterable<SessionEvent>): string {
  const bySeq = new Map<number, SessionEvent>();
  for (const e of events) bySeq.set(e.seq, e);
  const toolNames = new Map<string, string>();
  const blocks: string[] = [];
  for (const seq of [...bySeq.keys()].sort((a, b) => a - b)) {
    const ev = bySeq.get(seq)!;
    if (ev.type === 'tool/call') toolNames.set(String((ev.data as { callId?: unknown }).callId), String((ev.data as { name?: unknown }).name));
    const block = renderEvent(ev, toolNames);
    if (block !== undefined) blocks.push(block);
  }
  return `<!-- ${title} -->\n\n${blocks.join('\n\n')}\n`;
}

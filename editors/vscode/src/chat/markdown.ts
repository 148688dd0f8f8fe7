// The conversation as a markdown document (the export command), from the daemon's chat items:
// the same words the chat view shows. Pure.
import type { ChatItem } from '../protocol';

const MAX_RESULT = 2000;

function clip(text: string, max = MAX_RESULT): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters)` : text;
}

function quote(text: string): string {
  return text.split('\n').map((l) => (l ? `> ${l}` : '>')).join('\n');
}

/** Text that must read as text inside markdown (a name, an outcome, a label). */
export function escapeInline(text: string): string {
  return text.replace(/[\\`*_{}[\]<>#|]/g, (c) => `\\${c}`);
}

function fenced(text: string): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((m) => m.length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}text\n${text}\n${fence}`;
}

/** One block of the document, or undefined for kinds it does not show. */
export function itemMarkdown(item: ChatItem): string | undefined {
  switch (item.kind) {
    case 'session': return `# ${escapeInline(item.text)}`;
    case 'user-message': return `**${escapeInline(item.label)}:**\n\n${quote(item.text)}`;
    case 'assistant-message':
      return `**Agent:**${item.discarded ? ' _(not kept: the turn ended before this reply was complete)_' : ''}\n\n${item.text}${item.partial ? ' …' : ''}`;
    case 'tool-call': {
      const head = `→ **${escapeInline(item.title)}** (${item.status === 'waiting' ? 'waiting for you' : item.status})`;
      return item.result === undefined ? head : `${head}\n\n${fenced(clip(item.result))}`;
    }
    case 'plan-review': {
      const parts = [`### Plan review: ${escapeInline(item.title)} (${escapeInline(item.outcomeText)})`, quote(item.plan.trimEnd())];
      if (item.feedback) parts.push(`Sent back with:\n\n${fenced(item.feedback)}`);
      if (item.detail) parts.push(`_${escapeInline(item.detail)}_`);
      return parts.join('\n\n');
    }
    case 'compaction': return `_${escapeInline(item.text)}_\n\n${quote(item.summary)}`;
    case 'turn-end': case 'goal': case 'plan-mode': case 'permission': case 'retry': case 'notice':
      return `_${escapeInline(item.text)}_`;
    default: return undefined;
  }
}

export function chatMarkdown(items: readonly ChatItem[]): string {
  const blocks = items.map(itemMarkdown).filter((b): b is string => b !== undefined);
  return `${blocks.join('\n\n')}\n`;
}

// A session's title from the first thing said in it, as the daemon makes it: the prompt's first
// line, a leading command stripped (`/plan Add retries` is titled "Add retries"; `/plan`,
// `/plan off` or `/compact` say nothing worth a title). Pure.

const MAX_TITLE = 60;

const firstLine = (text: string) => text.split('\n').find((l) => l.trim())?.trim();

export function titleFromPrompt(text: string | undefined): string | undefined {
  let words = text?.trim();
  if (!words) return undefined;
  const command = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(words);
  if (command) {
    const rest = (command[2] ?? '').trim();
    // Only /plan carries a message (`/plan <message>`); its on/off words are not one.
    if (command[1] !== 'plan' || rest === '' || rest === 'on' || rest === 'off') return undefined;
    words = rest;
  }
  const line = firstLine(words)!;
  return line.length > MAX_TITLE ? `${line.slice(0, MAX_TITLE - 1)}…` : line;
}

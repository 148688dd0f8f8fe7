// Words of a plan review: what a person wrote and has not sent, the plan's tab names. Pure.

/** `You left 2 comments and feedback on the plan.` */
export function unsentSummary(unsent: { comments: number; feedback: boolean }): string {
  const parts: string[] = [];
  if (unsent.comments) parts.push(`${unsent.comments} comment${unsent.comments > 1 ? 's' : ''}`);
  if (unsent.feedback) parts.push('feedback');
  return parts.length ? `You left ${parts.join(' and ')} on the plan.` : 'You left nothing unsent on the plan.';
}

/** A plan's title as a file name (a tab's label is its file name): no path separators or reserved characters. */
export function planFileName(title: string): string {
  const name = title.replace(/[\\/:*?"<>|\u0000-\u001f]+/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 60).trim();
  return name || 'Plan';
}

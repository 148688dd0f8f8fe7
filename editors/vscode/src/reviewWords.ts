// Words for what a person wrote in a plan review and has not sent. Pure.

/** `You left 2 comments and feedback on the plan.` */
export function unsentSummary(unsent: { comments: number; feedback: boolean }): string {
  const parts: string[] = [];
  if (unsent.comments) parts.push(`${unsent.comments} comment${unsent.comments > 1 ? 's' : ''}`);
  if (unsent.feedback) parts.push('feedback');
  return parts.length ? `You left ${parts.join(' and ')} on the plan.` : 'You left nothing unsent on the plan.';
}

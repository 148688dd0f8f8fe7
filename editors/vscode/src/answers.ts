// Building the reply to `dsh/questions/ask` from what the person did in the review. Pure.
import type { Answer, LineComment, QuestionsAskResult } from './protocol';

export interface DraftComment {
  /** 0-based line of the plan document, as the editor numbers it. */
  line: number;
  body: string;
}

export type ReviewOutcome =
  | { kind: 'approve' }
  | { kind: 'revise'; feedback: string; comments: DraftComment[] }
  /** Closed, withdrawn or lost: never an approval (PM-19, PM-20). */
  | { kind: 'dismissed' };

/** The wire's comments: 1-based lines in plan order, blank comments dropped. */
export function wireComments(comments: DraftComment[]): LineComment[] {
  return comments
    .map((c) => ({ line: c.line + 1, text: c.body.trim() }))
    .filter((c) => c.text !== '')
    .sort((a, b) => a.line - b.line);
}

/** One question's answer, or undefined when the person gave none (the daemon keeps plan mode). */
export function buildAnswer(questionId: string, outcome: ReviewOutcome): Answer | undefined {
  switch (outcome.kind) {
    case 'approve':
      return { id: questionId, choice: 'approve' };
    case 'revise': {
      const answer: Answer = { id: questionId, choice: 'revise' };
      const feedback = outcome.feedback.trim();
      if (feedback) answer.feedback = feedback;
      const comments = wireComments(outcome.comments);
      if (comments.length) answer.comments = comments;
      return answer;
    }
    case 'dismissed':
      return undefined;
  }
}

export function buildResult(outcomes: { questionId: string; outcome: ReviewOutcome }[]): QuestionsAskResult {
  const answers: Answer[] = [];
  for (const { questionId, outcome } of outcomes) {
    const a = buildAnswer(questionId, outcome);
    if (a) answers.push(a);
  }
  return { answers };
}

// GoalViews as the daemon sends them, for the unit tests: the words (`status`, `actions`) are
// written here by hand, on purpose unlike anything a formula of the other fields would give, so a
// test passes only when the editor shows what the daemon sent.
import type { GoalAction, GoalStatus, GoalView } from '../../src/protocol';

export const daemonStatus = (over: Partial<GoalStatus> = {}): GoalStatus => ({
  text: 'the daemon’s status line', short: 'the daemon’s state', tone: 'none', usage: 'the daemon’s usage words',
  detail: ['Goal: the daemon’s first line', 'the daemon’s second line'], ...over,
});

export const daemonAction = (id: GoalAction['id'], label = `the daemon’s ${id} label`): GoalAction => ({ id, label });

export const goalView = (over: Partial<GoalView> = {}): GoalView => ({
  id: 'g-1', revision: 3, objective: 'Ship the parser', phase: 'active', maxRounds: 256, roundsStarted: 37,
  roundsLeft: 219, tokensUsed: 0, createdAt: '2026-11-29T18:00:00.000Z', updatedAt: '2026-11-29T18:40:00.000Z', activation: 'armed',
  status: daemonStatus(), actions: [daemonAction('edit'), daemonAction('pause')], ...over,
});

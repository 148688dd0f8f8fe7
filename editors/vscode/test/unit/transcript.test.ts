import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderEvent, renderTranscript } from '../../src/transcriptRender';

const ev = (seq: number, type: string, data: Record<string, unknown>, turn?: number) => ({ seq, type, at: '2026-11-29T18:00:00.000Z', data, ...(turn ? { turn } : {}) });

test('events render as a readable transcript in seq order, each once', () => {
  const md = renderTranscript('Demo', [
    ev(3, 'user/message', { text: 'add a parser', source: 'user' }, 1),
    ev(1, 'session/start', { sessionId: 's-1', formatVersion: 1, title: 'Demo' }),
    ev(2, 'turn/open', { turn: 1, cause: 'prompt' }, 1),
    ev(4, 'request/header', { step: 1, planActive: true, sections: [], tools: [] }, 1),
    ev(5, 'tool/call', { callId: 'c1', name: 'exit_plan_mode', arguments: { plan: '# Plan' } }, 1),
    ev(6, 'tool/result', { callId: 'c1', ok: false, content: 'Keep planning: split step 2' }, 1),
    ev(3, 'user/message', { text: 'add a parser', source: 'user' }, 1),
    ev(7, 'turn/close', { turn: 1, stopReason: 'end' }, 1),
  ]);
  const order = ['# Session Demo', '## Turn 1', '**You:**', '→ `exit_plan_mode`', '← **sent back with feedback**: Keep planning', '_turn 1 ended: end_'];
  let at = -1;
  for (const s of order) { const i = md.indexOf(s); assert.ok(i > at, `${s} out of order in\n${md}`); at = i; }
  assert.equal(md.split('add a parser').length, 2);
  assert.ok(!md.includes('planActive'));
  assert.ok(!md.includes('failed'));
  assert.match(md, /→ `exit_plan_mode`\n\n> # Plan/); // the plan as markdown, not escaped JSON
});

test('goal changes, rounds and plan mode are visible', () => {
  assert.equal(renderEvent(ev(1, 'plan/mode', { active: false })), '_plan mode off_');
  assert.match(renderEvent(ev(2, 'goal/change', { version: 1, op: 'create', goal: { id: 'g', revision: 1, objective: 'x', phase: 'active', maxRounds: 40 }, roundsStarted: 0 }))!, /goal create: "x" · active · 0\/40/);
  assert.match(renderEvent(ev(3, 'goal/change', { version: 1, op: 'clear', cleared: { id: 'g', revision: 2 } }))!, /cleared/);
  assert.match(renderEvent(ev(4, 'user/message', { text: 'go on', source: 'plugin', goalRound: { goalId: 'g', round: 2, revision: 1 } }))!, /Goal round 2/);
  assert.equal(renderEvent(ev(5, 'future/thing', {})), '_future/thing_');
});

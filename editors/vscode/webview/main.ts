// The chat view's page: renders the chat items the daemon projects (kept by id: an upsert
// replaces its element in place), the header, plan review and permission cards, and the prompt
// box. It never re-derives words from raw events: every label, title and outcome is the item's.
// All text goes in as text; only model markdown goes through the sanitizer (markdown.ts).
import type { ChatItem } from '../src/protocol';
import type { AnswerableReview, ChatHeader, HostToView, PendingPermission, ViewToHost } from '../src/chat/messages';
import { turnFailed } from '../src/chat/store';
import { renderMarkdown } from './markdown';
import type { GoalRoundsResult } from '../src/contract';
import { timelineLayout, usageTitle, WAIT_LANE } from '../src/chat/timeline';

declare function acquireVsCodeApi(): { postMessage(m: ViewToHost): void };
const vscode = acquireVsCodeApi();
const post = (m: ViewToHost) => vscode.postMessage(m);

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const log = $('log');
const input = $<HTMLTextAreaElement>('prompt');
const send = $<HTMLButtonElement>('send');
const stop = $<HTMLButtonElement>('stop');

let items = new Map<string, ChatItem>();
let busy = false;
let reviews = new Map<string, AnswerableReview>();
let permissions: PendingPermission[] = [];

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(label: string, cls: string, onClick: () => void, title?: string): HTMLButtonElement {
  const b = el('button', cls, label);
  b.type = 'button';
  if (title) b.title = title;
  b.addEventListener('click', onClick);
  return b;
}

function markdown(text: string, cls = 'markdown'): HTMLDivElement {
  const d = el('div', cls);
  d.innerHTML = renderMarkdown(text);
  return d;
}

// ---- header -----------------------------------------------------------------------------

function renderHeader(h: ChatHeader): void {
  const title = $('session-title');
  title.textContent = h.session ? h.session.title : h.connection === 'running' ? 'No session' : `dshd ${h.connection === 'starting' ? 'is starting' : 'is not running'}`;
  title.title = h.session ? `Session ${h.session.sessionId}: click to open another` : 'Click to open a session';
  const goal = $('goal-status');
  goal.textContent = h.goal ? `◎ ${h.goal.text}` : '';
  goal.title = h.goal?.tooltip ?? '';
  goal.className = `goal severity-${h.goal?.severity ?? 'none'}`;
  const plan = $('plan-status');
  plan.textContent = h.plan ? h.plan.text : '';
  plan.className = h.plan?.active ? 'plan on' : 'plan';
  document.body.classList.toggle('no-session', !h.session);
  const activity = $('busy');
  activity.hidden = h.activity.kind === 'idle';
  activity.textContent = h.activity.text;
  activity.className = `activity ${h.activity.kind}`;
  const others = $('others');
  others.hidden = !h.others;
  others.textContent = h.others?.text ?? '';
  others.title = h.others?.tooltip ?? '';
  const raise = $<HTMLButtonElement>('raise');
  raise.hidden = !h.goal?.raise;
  raise.textContent = h.goal?.raise ?? '';
}

// ---- the goal's timeline ----------------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
const CHART_HEIGHT = 46;
let rounds: GoalRoundsResult | null = null;
let timelineOpen = false;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/** One bar per round (SVG: attributes, no inline style, as the page's policy wants). */
function renderTimeline(): void {
  const box = $('timeline');
  const list = rounds?.goalId ? rounds.rounds : [];
  box.hidden = list.length === 0;
  if (!list.length) return;
  const width = Math.max(120, ($('timeline').clientWidth || 300) - 4);
  const layout = timelineLayout(list, width, CHART_HEIGHT);
  const toggle = $<HTMLButtonElement>('timeline-toggle');
  toggle.textContent = `${timelineOpen ? '▾' : '▸'} Rounds: ${layout.summary}`;
  toggle.setAttribute('aria-expanded', String(timelineOpen));
  const body = $('timeline-body');
  body.hidden = !timelineOpen;
  const chart = $('timeline-chart') as unknown as SVGSVGElement;
  chart.setAttribute('viewBox', `0 0 ${width} ${CHART_HEIGHT}`);
  chart.setAttribute('width', String(width));
  chart.setAttribute('height', String(CHART_HEIGHT));
  const bars = layout.bars.map((b) => {
    const g = svg('g', { class: `round outcome-${b.outcome}`, 'data-round': b.round });
    const title = svg('title', {});
    title.textContent = b.title;
    g.append(title);
    for (const seg of b.segments) g.append(svg('rect', { class: `seg ${seg.kind}`, x: b.x, y: seg.y, width: b.width, height: seg.height }));
    if (b.waited) g.append(svg('rect', { class: 'waited', x: b.x, y: 0, width: b.width, height: WAIT_LANE - 1 }));
    return g;
  });
  chart.replaceChildren(...bars);
  $('timeline-legend').textContent = `${layout.estimated ? 'Estimated figures (~): the model server reported no usage. ' : ''}Bar height: tokens (cached input, input, output); a mark above: waited for you. Hover a bar for its round.`;
}

$('timeline-toggle').addEventListener('click', () => { timelineOpen = !timelineOpen; renderTimeline(); });
$('raise').addEventListener('click', () => post({ type: 'raise' }));
$('plans').addEventListener('click', () => post({ type: 'pickPlan' }));
window.addEventListener('resize', () => { if (timelineOpen) renderTimeline(); });

function renderBusy(): void {
  document.body.classList.toggle('busy', busy);
  send.textContent = busy ? 'Steer' : 'Send';
  send.title = busy ? 'Send this to the running turn (Enter)' : 'Send (Enter; Shift+Enter for a new line)';
  stop.hidden = !busy;
  input.placeholder = busy ? 'Steer the running turn… (Enter sends)' : 'Ask the agent… (Enter sends, Shift+Enter for a new line)';
}

// ---- items ------------------------------------------------------------------------------

const STATUS_MARK: Record<string, string> = { running: '…', waiting: '⏸', ok: '✓', failed: '✗' };

/** "Rewind to here": on items that carry a checkpoint (the files as they were before that step). */
function rewindButton(seq: number): HTMLButtonElement {
  const b = button('Rewind to here', 'link rewind', () => post({ type: 'rewind', seq }),
    'Put the files back as they were at this point (the diff is shown first), and if you choose, the conversation too');
  // Inside a tool card's summary: a click rewinds, it does not fold the card.
  b.addEventListener('click', (e) => { e.preventDefault(); e.stopPropagation(); });
  return b;
}

function renderItem(item: ChatItem): HTMLElement | undefined {
  switch (item.kind) {
    case 'session':
      return el('div', 'item session', item.text);
    case 'user-message': {
      const e = el('div', `item user sender-${item.sender}`);
      const label = el('div', 'label', item.label);
      if (item.checkpoint !== undefined) label.append(rewindButton(item.checkpoint));
      e.append(label, el('div', 'text', item.text));
      return e;
    }
    case 'assistant-message': {
      const e = el('div', `item assistant${item.partial ? ' streaming' : ''}${item.discarded ? ' discarded' : ''}`);
      e.append(el('div', 'label', 'Agent'), markdown(item.text));
      if (item.discarded) e.append(el('div', 'note', 'Not kept: the turn ended before this reply was complete.'));
      if (item.usage) e.title = usageTitle(item.usage);
      return e;
    }
    case 'tool-call': {
      const e = el('details', `item tool status-${item.status}${item.discarded ? ' discarded' : ''}`);
      const summary = el('summary');
      summary.append(el('span', 'mark', STATUS_MARK[item.status] ?? '•'), el('span', 'title', item.title));
      // Its approval is open: nothing runs until the person decides.
      if (item.status === 'waiting') summary.append(el('span', 'waiting', ' waiting for you'));
      if (item.checkpoint !== undefined) summary.append(rewindButton(item.checkpoint));
      e.append(summary);
      const args = item.arguments !== undefined ? JSON.stringify(item.arguments, null, 2) : item.argumentsText;
      if (args) { e.append(el('div', 'section-label', 'Arguments'), el('pre', 'args', args)); }
      if (item.result !== undefined) { e.append(el('div', 'section-label', item.status === 'failed' ? 'Result (failed)' : 'Result'), el('pre', 'result', item.result)); }
      return e;
    }
    case 'plan-review':
      return renderPlanReview(item);
    case 'permission':
      return el('div', `item permission outcome-${item.outcome}`, item.text);
    case 'goal':
      return el('div', 'item goal-change', `◎ ${item.text}`);
    case 'plan-mode':
      return el('div', 'item plan-mode', item.text);
    case 'turn-end':
      return el('div', `item turn-end${turnFailed(item) ? ' error' : ''}`, item.text);
    case 'compaction': {
      const e = el('details', 'item compaction');
      e.append(el('summary', undefined, item.text), markdown(item.summary));
      return e;
    }
    case 'retry':
      return el('div', 'item retry', item.text);
    case 'notice': // dshd's word about the item before it (a tool call written as text)
      return el('div', 'item notice', `⚠ ${item.text}`);
    default:
      return undefined; // a kind this extension does not know yet
  }
}

function renderPlanReview(item: Extract<ChatItem, { kind: 'plan-review' }>): HTMLElement {
  const e = el('div', `item plan-review outcome-${item.outcome}${item.partial ? ' streaming' : ''}`);
  const head = el('div', 'card-head');
  // A plan still arriving is not waiting for anyone yet: it says so until the question is asked.
  const badge = item.partial ? 'the plan is arriving…' : item.outcomeText;
  head.append(el('span', 'card-title', `Plan review: ${item.title}`), el('span', `badge outcome-${item.partial ? 'arriving' : item.outcome}`, badge));
  // The card's title is the plan's heading: the body starts after it rather than saying it twice.
  const lines = item.plan.split('\n');
  const first = lines.findIndex((l) => l.trim() !== '');
  const body = first >= 0 && lines[first].trim() === `# ${item.title}` ? lines.slice(first + 1).join('\n') : item.plan;
  e.append(head, markdown(body, 'markdown plan'));
  if (item.feedback) e.append(el('div', 'section-label', 'Sent back with'), el('pre', 'feedback', item.feedback));
  if (item.detail) e.append(el('div', 'note', item.detail));
  const review = reviews.get(item.questionId);
  if (item.outcome === 'pending' && review?.asked && !item.partial) e.append(renderAsked(review.asked));
  if (item.outcome === 'pending' && review && !item.partial) {
    const box = el('textarea', 'feedback-box') as HTMLTextAreaElement;
    box.rows = 2;
    box.placeholder = 'What should change?';
    box.value = review.draftFeedback;
    box.setAttribute('aria-label', `Feedback on ${item.title}`);
    box.addEventListener('input', () => post({ type: 'draft', questionId: item.questionId, feedback: box.value }));
    const actions = el('div', 'actions');
    actions.append(
      button('Approve', 'primary approve', () => post({ type: 'approve', questionId: item.questionId }), 'Approve the plan: plan mode ends and the agent goes on (Ctrl+Alt+Enter)'),
      button('Approve and start a goal…', 'secondary approve-goal', () => post({ type: 'approveAndStartGoal', questionId: item.questionId }), 'Approve the plan, then start a goal that carries it out (you choose its round and token budgets)'),
      button('Keep planning', 'secondary keep-planning', () => post({ type: 'keepPlanning', questionId: item.questionId, feedback: box.value }), 'Send the feedback and your line comments; the agent keeps planning (Ctrl+Alt+K)'),
      button('Comment on lines…', 'link open-plan', () => post({ type: 'openPlan', questionId: item.questionId }), 'Open the plan in the editor to comment on its lines'),
    );
    if (review.canCompare) actions.append(button('Compare with the previous plan', 'link compare', () => post({ type: 'compare', questionId: item.questionId }), 'The plan before on the left (with what you asked of it), this one on the right'));
    const comments = review.comments ? `, with your ${review.comments} line comment${review.comments > 1 ? 's' : ''}` : '';
    e.append(box, el('div', 'note feedback-note', `Keep planning sends this${comments}.`), actions);
  }
  return e;
}

/** What the person asked of the plan before, set beside the revised one: was it addressed? */
function renderAsked(asked: NonNullable<AnswerableReview['asked']>): HTMLElement {
  const box = el('div', 'asked');
  box.append(el('div', 'section-label', `Last round you asked (of "${asked.title}")`));
  if (asked.feedback) box.append(el('pre', 'feedback asked-feedback', asked.feedback));
  if (asked.comments.length) {
    const list = el('ul', 'asked-comments');
    for (const c of asked.comments) {
      const li = el('li');
      li.append(el('span', 'line', `line ${c.line}`));
      if (c.quote) li.append(el('span', 'quote', ` “${c.quote}”`));
      li.append(el('span', 'text', `: ${c.text}`));
      list.append(li);
    }
    box.append(list);
  }
  return box;
}

/** The permission cards on the page, by request: a card stays the same element while its request is open. */
const permissionCards = new Map<string, HTMLElement>();

function renderPermissions(): void {
  const host = $('permissions');
  const open = new Set(permissions.map((p) => p.requestId));
  for (const id of [...permissionCards.keys()]) if (!open.has(id)) permissionCards.delete(id);
  // A card already shown is kept as it is and where it is (a reason being typed in it, and the
  // focus, stay): only cards that came or went move the page.
  const wanted = permissions.map((p) => {
    const shown = permissionCards.get(p.requestId);
    if (shown && shown.dataset.hasDiff === String(p.hasDiff)) return shown;
    const e = el('div', 'item permission-request');
    e.dataset.hasDiff = String(p.hasDiff);
    permissionCards.set(p.requestId, e);
    e.append(el('div', 'card-title', `The agent asks: ${p.title}`));
    if (p.command !== undefined) e.append(el('pre', 'command', p.command), el('div', 'note', `in ${p.cwd ?? 'the workspace folder'}`));
    else if (p.hasDiff) e.append(el('div', 'note', 'The change is open in the diff editor.'));
    const feedback = el('textarea', 'feedback-box') as HTMLTextAreaElement;
    feedback.rows = 2;
    feedback.placeholder = 'Why not? (optional)';
    feedback.setAttribute('aria-label', 'Reason for rejecting');
    const actions = el('div', 'actions');
    actions.append(
      button('Allow', 'primary allow', () => post({ type: 'permission', requestId: p.requestId, outcome: 'allow-once' })),
      button('Allow for this session', 'secondary allow-session', () => post({ type: 'permission', requestId: p.requestId, outcome: 'allow-session' })),
      button('Reject', 'secondary reject', () => post({ type: 'permission', requestId: p.requestId, outcome: 'reject', feedback: feedback.value })),
    );
    if (p.hasDiff) actions.append(button('Show the diff', 'link show-diff', () => post({ type: 'showPermission', requestId: p.requestId })));
    e.append(feedback, el('div', 'note', 'Reject sends your reason to the agent.'), actions);
    return e;
  });
  for (const child of [...host.children]) if (!wanted.includes(child as HTMLElement)) child.remove();
  wanted.forEach((e, i) => { if (host.children[i] !== e) host.insertBefore(e, host.children[i] ?? null); });
}

// ---- earlier messages ----------------------------------------------------------------------

/** The first child of the log while earlier items are left to load (the host reads them on a click). */
const earlier = button('Show earlier messages', 'link earlier', () => {
  earlier.disabled = true;
  earlier.textContent = 'Loading earlier messages…';
  post({ type: 'showEarlier' });
}, 'Load the messages before these');
earlier.id = 'earlier';

function renderEarlier(hasEarlier: boolean): void {
  earlier.hidden = !hasEarlier;
  earlier.disabled = false;
  earlier.textContent = 'Show earlier messages';
}

/** Puts earlier items in front of those shown; what the person looks at stays where it is. */
function showEarlier(list: ChatItem[], hasEarlier: boolean): void {
  const fromEnd = log.scrollHeight - log.scrollTop;
  const elements: HTMLElement[] = [];
  for (const item of list) {
    if (items.has(item.id)) continue;
    items.set(item.id, item);
    const e = itemElement(item);
    if (e) elements.push(e);
  }
  earlier.after(...elements);
  renderEarlier(hasEarlier);
  log.scrollTop = log.scrollHeight - fromEnd;
}

function nearBottom(): boolean { return log.scrollHeight - log.scrollTop - log.clientHeight < 60; }

function itemElement(item: ChatItem): HTMLElement | undefined {
  const e = renderItem(item);
  if (!e) return undefined;
  e.dataset.id = item.id;
  e.dataset.kind = item.kind;
  return e;
}

/** Puts one item on the page: replaced in place when shown, else appended (following the end). */
function show(item: ChatItem): void {
  const follow = nearBottom();
  items.set(item.id, item);
  const e = itemElement(item);
  const old = log.querySelector(`[data-id="${CSS.escape(item.id)}"]`);
  if (!e) { old?.remove(); return; }
  // A tool card the person opened stays open while its result arrives.
  if (old instanceof HTMLDetailsElement && e instanceof HTMLDetailsElement) e.open = old.open;
  if (old) old.replaceWith(e); else log.append(e);
  if (follow) log.scrollTop = log.scrollHeight;
}

function showAll(list: ChatItem[], hasEarlier: boolean): void {
  items = new Map();
  log.replaceChildren(earlier);
  renderEarlier(hasEarlier);
  for (const item of list) show(item);
  log.scrollTop = log.scrollHeight;
}

/** Re-renders the plan cards (which ones this window can answer changed). */
function refreshPlanCards(): void {
  for (const item of items.values()) if (item.kind === 'plan-review') show(item);
}

// ---- prompt box -------------------------------------------------------------------------

function submit(): void {
  const text = input.value;
  if (!text.trim()) return;
  post({ type: 'send', text });
  input.value = '';
}

input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
});
send.addEventListener('click', submit);
stop.addEventListener('click', () => post({ type: 'stop' }));
$('session-title').addEventListener('click', () => post({ type: 'pickSession' }));
$('new-session').addEventListener('click', () => post({ type: 'newSession' }));
$('export').addEventListener('click', () => post({ type: 'export' }));

window.addEventListener('message', (event: MessageEvent<HostToView>) => {
  const m = event.data;
  switch (m.type) {
    case 'state':
      busy = m.busy;
      reviews = new Map(m.reviews.map((r) => [r.questionId, r]));
      permissions = m.permissions;
      renderHeader(m.header);
      renderBusy();
      renderPermissions();
      showAll(m.items, m.hasEarlier);
      rounds = m.rounds ?? null;
      renderTimeline();
      break;
    case 'rounds': rounds = m.rounds; renderTimeline(); break;
    case 'timeline': timelineOpen = m.open; renderTimeline(); break;
    case 'item': show(m.item); break;
    case 'earlier': showEarlier(m.items, m.hasEarlier); break;
    case 'header': renderHeader(m.header); break;
    case 'busy': busy = m.busy; renderBusy(); break;
    case 'reviews': {
      const next = new Map(m.reviews.map((r) => [r.questionId, r]));
      // Keep the person's typing: re-render the cards only when which reviews are open, or how
      // many line comments they have, changed (the drafts themselves live in the host).
      const changed = next.size !== reviews.size || [...next].some(([id, r]) => reviews.get(id)?.comments !== r.comments);
      reviews = next;
      if (changed) refreshPlanCards();
      break;
    }
    case 'permissions': permissions = m.permissions; renderPermissions(); break;
    case 'focus': input.focus(); break;
  }
});

renderBusy();
post({ type: 'ready' });

// A long session's chat in a real VS Code against the real dshd: the chat view opens on the newest
// page (dsh/chat/get beforeSeq, 200 items) with "Show earlier messages" above it; each click puts
// the page before in front, in order, until the first item; live upserts of a new turn still land
// at the end. The workspace holds a session of 800 turns (4,001 events) written by the Python test.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { Controller } from '../../src/controller';
import { chat, driver, runAll, screenshot, started, test, waitFor } from './harness';

let c: Controller;
const TURNS = 800;
const questions = async () => (await chat.texts('#log [data-kind="user-message"] .text'))
  .filter((t) => t.startsWith('question ')).map((t) => Number(t.slice('question '.length)));

test('the long session opens on its newest page, with a button for the earlier ones', async () => {
  c = (await started({ showChat: true })).controller;
  const { sessions } = await c.daemon.request('dsh/session/list', {});
  const long = sessions.find((s) => s.title === 'long');
  assert.ok(long, `no long session in ${JSON.stringify(sessions)}`);
  await vscode.commands.executeCommand('dsh.session.open', { sessionId: long.sessionId });
  await waitFor('the newest page in the chat', async () => (await questions()).includes(TURNS), 30000);
  assert.equal(c.feed.store?.items.length, 200);
  const shown = await questions();
  assert.ok(shown[0] > TURNS - 70, `the page starts at question ${shown[0]}`);
  assert.deepEqual(shown, Array.from({ length: shown.length }, (_, i) => shown[0] + i));
  assert.equal(await chat.count('#log [data-kind="session"]'), 0);
  assert.deepEqual(await chat.texts('#earlier:visible'), ['Show earlier messages']);
  await screenshot('chat-newest-page');
  await driver({ action: 'hover', selector: '#earlier', frame: 'chat' }); // scrolls up to it, as a person would
  await screenshot('chat-show-earlier-button');
});

test('"Show earlier messages" puts the page before in front, in order, until the first item', async () => {
  const newest = [...c.feed.store!.items.map((i) => i.id)];
  await chat.click('#earlier');
  await waitFor('the page before the newest', () => c.feed.store?.items.length === 400);
  assert.deepEqual(c.feed.store!.items.slice(200).map((i) => i.id), newest);
  await waitFor('400 items on the page', async () => (await chat.count('#log [data-id]')) === 400);
  await screenshot('chat-earlier-page');
  for (let page = 0; page < 20 && (await chat.count('#earlier:visible')) === 1; page++) {
    const before = c.feed.store!.items.length;
    await chat.click('#earlier');
    await waitFor('one more page', () => c.feed.store!.items.length > before);
  }
  assert.equal(c.feed.store!.items.length, 2401);
  await waitFor('no button left', async () => (await chat.count('#earlier:visible')) === 0);
  assert.deepEqual(await questions(), Array.from({ length: TURNS }, (_, i) => i + 1));
  assert.equal(await chat.count('#log [data-kind="session"]'), 1);
  assert.equal(await chat.count('#log [data-id]'), 2401);
});

test('live upserts of a new turn land at the end', async () => {
  await chat.type('#prompt', 'one more');
  await driver({ action: 'press', key: 'Enter' });
  await waitFor('the live reply at the end', async () => (await chat.texts('#log [data-kind="assistant-message"] .markdown')).at(-1) === 'a live reply', 30000);
  await waitFor('its turn end', async () => (await chat.texts('#log [data-kind="turn-end"]')).at(-1) === `Turn ${TURNS + 1} finished`, 30000);
  assert.equal((await questions()).length, TURNS);
  assert.deepEqual((await chat.texts('#log [data-kind="user-message"] .text')).at(-1), 'one more');
  await screenshot('chat-pages-live');
});

export async function run(): Promise<void> { await runAll(); }

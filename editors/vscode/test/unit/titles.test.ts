import assert from 'node:assert/strict';
import { test } from 'node:test';
import { titleFromPrompt } from '../../src/titles';

test('a session is titled after the first prompt\'s words, a leading command stripped', () => {
  assert.equal(titleFromPrompt('Where does the client send requests?\nKeep it short.'), 'Where does the client send requests?');
  assert.equal(titleFromPrompt('/plan Add retries to the client'), 'Add retries to the client');
  assert.equal(titleFromPrompt('/plan\n\nAdd retries\nand tests'), 'Add retries');
  assert.equal(titleFromPrompt('/plan'), undefined);
  assert.equal(titleFromPrompt('/plan off'), undefined);
  assert.equal(titleFromPrompt('/compact keep the API notes'), undefined);
  assert.equal(titleFromPrompt('   '), undefined);
  assert.equal(titleFromPrompt(undefined), undefined);
  const long = titleFromPrompt(`/plan ${'x'.repeat(100)}`)!;
  assert.equal(long.length, 60);
  assert.ok(long.endsWith('…'));
});

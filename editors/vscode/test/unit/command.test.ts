import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { resolveCommand } from '../../src/command';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dshd-command-'));
const exe = path.join(dir, 'bin', 'dshd');
fs.mkdirSync(path.dirname(exe));
fs.writeFileSync(exe, '#!/bin/sh\n', { mode: 0o755 });
const plain = path.join(dir, 'bin', 'notes');
fs.writeFileSync(plain, 'not a program', { mode: 0o644 });

test('a name is looked up on PATH', () => {
  assert.equal(resolveCommand('dshd', '/', `/nonexistent${path.delimiter}${path.dirname(exe)}`), exe);
  assert.equal(resolveCommand('dshd', '/', '/nonexistent'), undefined);
});

test('a path is taken as is, relative to the workspace folder', () => {
  assert.equal(resolveCommand(exe, '/'), exe);
  assert.equal(resolveCommand('bin/dshd', dir), exe);
  assert.equal(resolveCommand('./bin/dshd', dir, ''), exe);
  assert.equal(resolveCommand('/nonexistent/dshd', dir), undefined);
});

test('files that cannot be run, directories and blanks are not found', () => {
  assert.equal(resolveCommand(plain, '/'), undefined);
  assert.equal(resolveCommand('notes', '/', path.dirname(plain)), undefined);
  assert.equal(resolveCommand('bin', dir, dir), undefined);
  assert.equal(resolveCommand('  ', dir), undefined);
});

test('~/ names the home folder (a virtualenv\'s dshd, say)', () => {
  assert.equal(resolveCommand('~/bin/dshd', '/', '', dir), exe);
  assert.equal(resolveCommand('~/bin/missing', '/', '', dir), undefined);
});

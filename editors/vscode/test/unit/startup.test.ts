import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configOverrides, describeExit, locateTomlKey, serverArgs, settingsNotInForce } from '../../src/startup';

test('dshd is reached through the shared daemon by default, or served for this window alone', () => {
  assert.deepEqual(serverArgs(undefined, [], '/w/proj'), ['connect', '--workspace', '/w/proj']);
  assert.deepEqual(serverArgs('connect', ['--log-level', 'debug'], '/w/proj'), ['connect', '--workspace', '/w/proj', '--log-level', 'debug']);
  assert.deepEqual(serverArgs('serve', [], '/w/proj'), ['serve']);
  assert.deepEqual(serverArgs('serve', ['--verbose'], '/w/proj'), ['serve', '--verbose']);
  // Arguments written before the mode existed (["serve"]) still say the whole command line.
  assert.deepEqual(serverArgs('connect', ['serve'], '/w/proj'), ['serve']);
  assert.deepEqual(serverArgs('serve', ['connect', '--workspace', '/elsewhere'], '/w/proj'), ['connect', '--workspace', '/elsewhere']);
});

test('model settings lie over dsh.config\'s [model] table; empty ones change nothing', () => {
  assert.equal(configOverrides({}, {}), undefined);
  assert.equal(configOverrides({}, { provider: '', model: '  ' }), undefined);
  assert.deepEqual(configOverrides({ goals: { maxRounds: 9 } }, {}), { goals: { maxRounds: 9 } });
  assert.deepEqual(configOverrides({ model: { provider: 'scripted', timeoutS: 30 } }, { provider: 'openai', model: 'gpt-4.1-mini', baseUrl: 'http://127.0.0.1:11434/v1', apiKeyEnv: '' }),
    { model: { provider: 'openai', timeoutS: 30, model: 'gpt-4.1-mini', baseUrl: 'http://127.0.0.1:11434/v1' } });
});

test('how the daemon ended reads as a person would say it', () => {
  assert.equal(describeExit(1, null), 'exit status 1');
  assert.equal(describeExit(null, 'SIGKILL'), 'killed by SIGKILL');
  assert.equal(describeExit(null, null), 'exit status unknown');
});

test('a config key is found under its table, as a dotted key, or at its table header', () => {
  const toml = [
    'plugins = ["plan", "goals"]', // 0
    '', // 1
    '[goals]', // 2
    '  maxRounds = 0  # bad', // 3
    '', // 4
    '[model]', // 5
    'provider = "scripted"', // 6
    '"apiKeyEnv" = "X"', // 7
    'tools.sandbox = "nope"', // 8
  ].join('\n');
  assert.deepEqual(locateTomlKey(toml, 'goals.maxRounds'), { line: 3, column: 2 });
  assert.deepEqual(locateTomlKey(toml, 'plugins'), { line: 0, column: 0 });
  assert.deepEqual(locateTomlKey(toml, 'model.provider'), { line: 6, column: 0 });
  assert.deepEqual(locateTomlKey(toml, 'model.apiKeyEnv'), { line: 7, column: 0 });
  assert.deepEqual(locateTomlKey(toml, 'model.tools.sandbox'), { line: 8, column: 0 });
  assert.deepEqual(locateTomlKey(toml, 'goals.maxTokens'), { line: 2, column: 0 }); // absent: its table
  assert.deepEqual(locateTomlKey('tools.sandbox = "x"\n', 'tools.sandbox'), { line: 0, column: 0 });
  assert.equal(locateTomlKey(toml, 'context.compactAt'), undefined);
});

test('settings a shared daemon does not use (another client started it) are named, with what is in force', () => {
  const effective = { model: { provider: 'scripted', script: 'script.json' }, goals: { maxRounds: 20 }, tools: { approve: ['write', 'exec'] } };
  assert.deepEqual(settingsNotInForce(undefined, effective, true, true), []);
  assert.deepEqual(settingsNotInForce({ goals: { maxRounds: 20 }, tools: { approve: ['write', 'exec'] } }, effective, true, true), []);
  assert.deepEqual(settingsNotInForce({ model: { provider: 'openai', model: 'gpt-4.1-mini' } }, effective, true, true),
    ['model.provider is "scripted" there, not "openai"', 'model.model is not set there, not "gpt-4.1-mini"']);
  assert.deepEqual(settingsNotInForce({ tools: { approve: ['exec'] } }, effective, true, true), ['tools.approve is ["write","exec"] there, not ["exec"]']);
  assert.match(settingsNotInForce(undefined, effective, true, false)[0], /^the folder is not trusted there/);
  assert.match(settingsNotInForce(undefined, effective, false, true)[0], /^the folder is trusted there/);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidRequestError } from '../common/index.js';
import { parseStrictFlags } from './cli_common.js';

test('parseStrictFlags: a negative number is the flag value; a flag followed by another flag says the value is missing', () => {
  const opts = { greedy: { type: 'string' as const }, positions: { type: 'string' as const }, verbose: { type: 'boolean' as const } };
  assert.deepEqual({ ...parseStrictFlags(['--greedy', '-3', '--positions', '-1.5'], opts) }, { greedy: '-3', positions: '-1.5' });
  assert.deepEqual({ ...parseStrictFlags(['--greedy=-2', '--verbose'], opts) }, { greedy: '-2', verbose: true });
  assert.throws(() => parseStrictFlags(['--greedy', '--positions', 'all'], opts),
    (e: unknown) => e instanceof InvalidRequestError && e.message === 'argument --greedy: expected one argument');
  assert.throws(() => parseStrictFlags(['--nope'], opts), (e: unknown) => e instanceof InvalidRequestError && /Unknown option '--nope'/.test(e.message));
  // a boolean switch never swallows a following negative number
  assert.throws(() => parseStrictFlags(['--verbose', '-3'], opts), InvalidRequestError);
});

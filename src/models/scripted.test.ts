import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelLoadError } from '../common/index.js';
import { parseModelScript, scriptedNextToken } from './scripted.js';
import type { ModelScript } from './scripted.js';

const script: ModelScript = {
  after: [[90, 91], [80]],
  scripts: [
    { when: [7, 7], output: [1, 2] },
    { when: [], output: [5, 6, 5] },
  ],
  eosTokenId: 99,
};

test('scripted model: turn starts after the last generation tail; k-th token of the chosen script, then EOS', () => {
  assert.deepEqual([[3, 90, 91], [3, 90, 91, 5], [3, 90, 91, 5, 6], [3, 90, 91, 5, 6, 5]].map((c) => scriptedNextToken(c, script)), [5, 6, 5, 99]);
  // `when` selects the script; the last (latest-ending) tail wins, whichever alternative it is.
  assert.equal(scriptedNextToken([7, 7, 90, 91], script), 1);
  assert.equal(scriptedNextToken([7, 7, 90, 91, 1, 2, 80], script), 1);
  assert.equal(scriptedNextToken([7, 7, 90, 91, 1], script), 2);
  // No tail in the context: EOS.
  assert.equal(scriptedNextToken([1, 2, 3], script), 99);
});

test('scripted model config: after as one list or alternatives; malformed scripts name config.json', () => {
  const cfg = (raw: Record<string, unknown>) => ({ raw, source: '/m/config.json' });
  assert.deepEqual(parseModelScript(cfg({ eos_token_id: [4, 5], tsglang_script: { after: [1, 2], scripts: [{ output: [3] }] } })), {
    after: [[1, 2]],
    scripts: [{ when: [], output: [3] }],
    eosTokenId: 4,
  });
  assert.deepEqual(parseModelScript(cfg({ eos_token_id: 4, tsglang_script: { after: [[1], [2, 3]], scripts: [] } })).after, [[1], [2, 3]]);
  assert.throws(() => parseModelScript(cfg({ eos_token_id: 4 })), (e: unknown) => e instanceof ModelLoadError && /config\.json.*tsglang_script/.test(e.message));
  assert.throws(() => parseModelScript(cfg({ eos_token_id: 4, tsglang_script: { after: [1], scripts: [{ output: ['x'] }] } })), /scripts\[0\]\.output/);
});

// Structured outputs under tensor parallelism (issue 20 with issue 16's ranks): the grammar masks apply on rank 0's
// full logits, so constrained requests on `--tp 2` give tp 1's greedy output token for token and every sampled output
// validates; a constrained and a free request in one batch. The same under --tp 2 --dp 2 --enable-dp-attention: each
// attention-DP group's engine core has its own grammar backend, and the requests alternate between the groups.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { CASES } from './so_cases.js';
import { embeddedModelDir, post, serve, type Served } from './so_helpers.js';

let tp1: Served;
let tp2: Served;
let dpa: Served;

before(async () => {
  tp1 = await serve(embeddedModelDir(), ['--constrained-json-disable-any-whitespace']);
  tp2 = await serve(embeddedModelDir(), ['--constrained-json-disable-any-whitespace', '--tp', '2']);
  dpa = await serve(embeddedModelDir(), ['--constrained-json-disable-any-whitespace', '--tp', '2', '--dp', '2', '--enable-dp-attention']);
});
after(async () => {
  await tp1?.close();
  await tp2?.close();
  await dpa?.close();
});

const gen = (s: Served, text: string, sp: Record<string, unknown>) => post(s.base, '/generate', { text, sampling_params: sp });

test('--tp 2: greedy constrained outputs equal tp 1 for every constraint kind; sampled ones validate', async () => {
  for (const [i, c] of CASES.entries()) {
    const sp = { temperature: 0, max_new_tokens: 120, ...c.params };
    const [a, b] = [await gen(tp1, `Case ${i}:`, sp), await gen(tp2, `Case ${i}:`, sp)];
    assert.equal(b.status, 200, b.text);
    assert.deepEqual(b.json.output_ids, a.json.output_ids, `${c.name}: tp 2 greedy differs from tp 1`);
    assert.equal(c.validate(b.json.text), null, `${c.name}: ${b.json.text}`);
  }
  const sampled = await Promise.all(CASES.map((c, i) => gen(tp2, `Sampled ${i}:`, { temperature: 1, sampling_seed: 7 + i, max_new_tokens: 120, ...c.params })));
  for (const [i, c] of CASES.entries()) assert.equal(c.validate(sampled[i].json.text), null, `${c.name}: ${sampled[i].json.text}`);
});

test('--tp 2 --dp 2 --enable-dp-attention: greedy constrained outputs equal tp 1 on both groups; sampled ones validate', async () => {
  // each case twice in a row: round robin sends the two to different groups
  for (const [i, c] of CASES.entries()) {
    const sp = { temperature: 0, max_new_tokens: 120, ...c.params };
    const a = await gen(tp1, `Case ${i}:`, sp);
    for (const b of [await gen(dpa, `Case ${i}:`, sp), await gen(dpa, `Case ${i}:`, sp)]) {
      assert.equal(b.status, 200, b.text);
      assert.deepEqual(b.json.output_ids, a.json.output_ids, `${c.name}: dp-attention greedy differs from tp 1`);
    }
  }
  const sampled = await Promise.all(CASES.map((c, i) => gen(dpa, `Sampled ${i}:`, { temperature: 1, sampling_seed: 7 + i, max_new_tokens: 120, ...c.params })));
  for (const [i, c] of CASES.entries()) assert.equal(c.validate(sampled[i].json.text), null, `${c.name}: ${sampled[i].json.text}`);
  const info = (await (await fetch(`${dpa.base}/get_server_info`)).json()) as { internal_states: { num_running_reqs: number }[] };
  assert.equal(info.internal_states.length, 2);
});

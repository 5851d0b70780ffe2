// The embedded default model's EOS shaping (src/cli/embedded_model.ts): the weight edits themselves, and the
// behaviour they exist for — temperature-1 answers end with EOS well before the context is full, while greedy
// requests with max_tokens still run to their length on most prompts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { SILENT_LOGGER } from '../src/common/index.js';
import { EMBEDDED_EOS_SHAPING, EMBEDDED_MODEL_NAME, ensureEmbeddedModel, shapeEosWeights } from '../src/cli/embedded_model.js';
import { Engine, type GenerateOutput } from '../src/engine/index.js';
import type { TensorSpec } from '../src/models/index.js';

function spec(name: string, shape: number[]): TensorSpec {
  return { name, shape, storedAs: 'bf16', init: 'linear' };
}

function filled(n: number, start: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => start + i);
}

test('shapeEosWeights: constant channel in the embedding, residual writers zeroed there, lm_head EOS row on the channel', () => {
  const shaping = { eosTokenId: 2, channel: 1, channelValue: 8, logitScale: 4.5, eosWeight: 2.75 };
  const hook = shapeEosWeights(shaping);
  const V = 5;
  const H = 3;
  const emb = filled(V * H, 1);
  hook(spec('model.embed_tokens.weight', [V, H]), emb);
  for (let r = 0; r < V; r++) assert.deepEqual([...emb.subarray(r * H, (r + 1) * H)], [1 + r * H, 8, 3 + r * H]);
  const oProj = filled(H * 4, 1);
  hook(spec('model.layers.0.self_attn.o_proj.weight', [H, 4]), oProj);
  assert.deepEqual([...oProj], [1, 2, 3, 4, 0, 0, 0, 0, 9, 10, 11, 12]);
  const w2 = filled(H * 2, 1);
  hook(spec('model.layers.1.block_sparse_moe.experts.7.w2.weight', [H, 2]), w2);
  assert.deepEqual([...w2], [1, 2, 0, 0, 5, 6]);
  const qProj = filled(4 * H, 1);
  hook(spec('model.layers.0.self_attn.q_proj.weight', [4, H]), qProj);
  assert.deepEqual([...qProj], [...filled(4 * H, 1)], 'readers of the residual stream are left alone');
  const norm = Float32Array.from([1.1, 0.9, 1.05]);
  hook(spec('model.norm.weight', [H]), norm);
  assert.deepEqual([...norm], [Math.fround(1.1), 1, Math.fround(1.05)]);
  const lm = filled(V * H, 1);
  hook(spec('lm_head.weight', [V, H]), lm);
  for (let r = 0; r < V; r++) {
    const row = [...lm.subarray(r * H, (r + 1) * H)];
    if (r === 2) assert.deepEqual(row, [0, 2.75, 0]);
    else assert.deepEqual(row, [(1 + r * H) * 4.5, 0, (3 + r * H) * 4.5]);
  }
  assert.throws(() => shapeEosWeights({ ...shaping, eosTokenId: V })(spec('lm_head.weight', [V, H]), filled(V * H, 0)), /eos id 5 is outside the vocabulary/);
  assert.throws(() => shapeEosWeights({ ...shaping, channel: H })(spec('model.embed_tokens.weight', [V, H]), filled(V * H, 0)), /channel 3 is outside hidden_size 3/);
});

let engine: Engine;
let eosId: number;

before(async () => {
  const dir = ensureEmbeddedModel(join(homedir(), '.cache', 'tsglang'), SILENT_LOGGER);
  assert.ok(dir.endsWith(EMBEDDED_MODEL_NAME));
  engine = await Engine.create({ modelPath: dir, maxTotalTokens: 8192, contextLength: 4096, logLevel: 'error', numThreads: 1, randomSeed: 7 });
  eosId = engine.tokenizer!.eosTokenIds[0];
  assert.equal(eosId, EMBEDDED_EOS_SHAPING.eosTokenId);
});

after(async () => {
  await engine?.shutdown();
});

async function last(it: AsyncIterable<GenerateOutput>): Promise<GenerateOutput> {
  let out: GenerateOutput | undefined;
  for await (const o of it) out = o;
  return out!;
}

const PROMPTS = ['Who won the world series in 2020?', 'What is 15% of 240?', 'Write a haiku about autumn.', 'hello', 'Name three rivers in Africa.', 'Why is the sky blue?'];

test('embedded default at temperature 1: every answer ends with EOS long before the context is full', async () => {
  const outs = await Promise.all(PROMPTS.map((text, i) => last(engine.generate({ rid: `t1-${i}`, text, samplingParams: { temperature: 1, maxNewTokens: 3000, seed: 1000 + i } }))));
  for (const o of outs) {
    assert.deepEqual(o.finishReason, { type: 'stop', matched: eosId });
    assert.ok(o.completionTokens < 3000);
  }
  const mean = outs.reduce((s, o) => s + o.completionTokens, 0) / outs.length;
  assert.ok(mean >= 10 && mean <= 1000, `mean answer length ${mean} tokens`);
});

test('embedded default, greedy with max_tokens: most prompts run to their length (EOS is rarely the argmax)', async () => {
  const outs = await Promise.all(PROMPTS.map((text, i) => last(engine.generate({ rid: `g-${i}`, text, samplingParams: { temperature: 0, maxNewTokens: 64 } }))));
  const byLength = outs.filter((o) => o.finishReason?.type === 'length' && o.completionTokens === 64).length;
  assert.ok(byLength >= PROMPTS.length - 1, `${byLength} of ${PROMPTS.length} greedy requests reached max_tokens`);
});

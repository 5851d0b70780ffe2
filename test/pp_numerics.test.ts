// Pipeline parallelism on rank threads (executor/pp_runner.ts): SGLang's split of the decoder layers over stages
// (get_pp_indices, SGLANG_PP_LAYER_PARTITION) and, for both golden fixtures and make-tiny checkpoints of other shapes
// (more layers, layer counts that do not split evenly, a stage without layers), logits under pp 2 / 3 / 4 and
// pp 2 × tp 2 that agree with tp = 1 within 1e-4 relative (bit-identical without TP), greedy continuations identical
// (and equal to the goldens for the fixtures); within a layout a row's logits are bit-identical alone, batched,
// chunked and decoded from the cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchPpRanks, planStages, writeTinyCheckpoint, type ForwardModel } from '../src/executor/index.js';
import { createOps } from '../src/kernels/index.js';
import { ppLayerRange, SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { loadModel } from '../src/models/index.js';
import { FIXTURES_DIR, NEEDS_SHARED } from './helpers/paths.js';
import { argmaxAt as argmax, relDiff } from './helpers/golden.js';

interface Prompt { tokens: number[]; greedy?: { tokens: number[] } }

/** Prefills every prompt in one batch, then decodes `steps` greedy tokens for all of them in batched decodes. */
function runBatched(m: ForwardModel, prompts: readonly number[][], steps: number): { last: Float32Array[]; greedy: number[][] } {
  const ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 8192), prompts.length, 512);
  const reqs = prompts.map(() => ctx.addReq());
  let out = m.forward(ctx.makeBatch(prompts.map((p, i) => ({ req: reqs[i], inputIds: p }))));
  const vocab = out.logits.length / prompts.length;
  const last = prompts.map((_, i) => out.logits.slice(i * vocab, (i + 1) * vocab));
  const greedy: number[][] = prompts.map(() => []);
  for (let s = 0; s < steps; s++) {
    const next = prompts.map((_, i) => argmax(out.logits.subarray(i * vocab, (i + 1) * vocab)));
    next.forEach((t, i) => greedy[i].push(t));
    if (s + 1 < steps) out = m.forward(ctx.makeBatch(next.map((t, i) => ({ req: reqs[i], inputIds: [t] }))));
  }
  return { last, greedy };
}

const launch = (dir: string, pp: number, tp: number, cp = 1, ep = 1): ForwardModel =>
  launchPpRanks({ modelPath: dir, tpSize: tp, epSize: ep, ppSize: pp, threadsPerRank: 1, attnCpSize: cp }).model;

/** [pp, tp, prefill CP size, ep] layouts checked against tp = 1. */
type Layout = readonly [number, number, number?, number?];

function checkLayouts(name: string, dir: string, prompts: Prompt[], steps: number, layouts: readonly Layout[]): void {
  const tokens = prompts.map((p) => p.tokens);
  const ref = runBatched(loadModel(dir, { ops: createOps({ threads: 1 }) }).model, tokens, steps);
  prompts.forEach((p, i) => {
    if (p.greedy) assert.deepEqual(ref.greedy[i], p.greedy.tokens.slice(0, steps), `${name} tp 1 prompt ${i} greedy vs golden`);
  });
  for (const [pp, tp, cp = 1, ep = 1] of layouts) {
    const m = launch(dir, pp, tp, cp, ep);
    try {
      const got = runBatched(m, tokens, steps);
      got.last.forEach((l, i) => {
        const r = relDiff(l, ref.last[i]);
        assert.ok(r < 1e-4, `${name} pp ${pp} tp ${tp} cp ${cp} ep ${ep} prompt ${i}: logits differ from tp 1 by ${r} relative`);
        if (tp === 1) assert.deepEqual(l, ref.last[i], `${name} pp ${pp}: stages without TP compute the same bits`);
      });
      assert.deepEqual(got.greedy, ref.greedy, `${name} pp ${pp} tp ${tp}: greedy continuations`);
    } finally {
      m.close?.();
    }
  }
}

test('SGLang get_pp_indices: even split, the last stages take the remainder, SGLANG_PP_LAYER_PARTITION and its errors', () => {
  const ranges = (n: number, pp: number, part: string | null = null) => Array.from({ length: pp }, (_, r) => ppLayerRange(n, r, pp, part)).map((x) => [x.start, x.end]);
  assert.deepEqual(ranges(20, 4), [[0, 5], [5, 10], [10, 15], [15, 20]]);
  assert.deepEqual(ranges(7, 3), [[0, 2], [2, 4], [4, 7]]);
  assert.deepEqual(ranges(61, 2), [[0, 30], [30, 61]]);
  assert.deepEqual(ranges(3, 4), [[0, 0], [0, 1], [1, 2], [2, 3]]);
  assert.deepEqual(ranges(20, 4, '4,6,6,4'), [[0, 4], [4, 10], [10, 16], [16, 20]]);
  assert.throws(() => ranges(20, 4, '5,5,5'), /len\(partitions\)=3 does not match pp_size=4\./);
  assert.throws(() => ranges(20, 4, '5,5,5,6'), /sum\(partitions\)=21 does not match num_hidden_layers=20\./);
  assert.throws(() => ranges(20, 4, '5,x,5,5'), /Invalid partition string: 5,x,5,5/);
});

for (const fixture of ['tiny-minimax-m2', 'tiny-deepseek-v32']) {
  test(`${fixture}: pp 2, pp 3, pp 2 × tp 2 logits agree with tp 1 (1e-4 relative), greedy identical and equal to the goldens`, NEEDS_SHARED, () => {
    const dir = join(FIXTURES_DIR, fixture);
    const golden = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as { prompts: Prompt[] };
    checkLayouts(fixture, dir, golden.prompts, 16, [[2, 1], [3, 1], [2, 2]]);
  });
}

test('tiny-deepseek-v32: pp 2 × tp 4 with prefill CP 4 and EP 4 in each stage (the seed\'s PP + CP + EP) agrees with tp 1', NEEDS_SHARED, () => {
  const dir = join(FIXTURES_DIR, 'tiny-deepseek-v32');
  const golden = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as { prompts: Prompt[] };
  // 1 + 7 + 45 + 100 + 3 = 156 prompt tokens: a multiple of 4, so the prefill is split over the CP ranks
  checkLayouts('pp + cp', dir, [...golden.prompts, { tokens: [1, 2, 3] }], 6, [[2, 4, 4, 4]]);
});

/** Checkpoints of other shapes: more layers, layer counts pp does not divide, a stage with no layer at all. */
const OTHER_SHAPES: [string, Record<string, unknown>, readonly Layout[]][] = [
  ['minimax-m2', { hidden_size: 128, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 24, rotary_dim: 12, num_local_experts: 8, num_experts_per_tok: 2, intermediate_size: 48, vocab_size: 300, num_hidden_layers: 5, attn_type_list: [1, 1, 1, 1, 1] }, [[2, 1], [4, 1], [2, 2]]],
  ['deepseek-v32', { hidden_size: 160, num_attention_heads: 4, n_routed_experts: 8, n_group: 2, topk_group: 1, num_experts_per_tok: 2, moe_intermediate_size: 32, intermediate_size: 96, vocab_size: 333, index_topk: 8, index_n_heads: 4, num_hidden_layers: 5, first_k_dense_replace: 2 }, [[3, 1], [4, 1]]],
  ['minimax-m2', { hidden_size: 96, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 24, rotary_dim: 12, num_local_experts: 4, num_experts_per_tok: 2, intermediate_size: 32, vocab_size: 200, num_hidden_layers: 2, attn_type_list: [1, 1] }, [[3, 1]]],
];

for (const [arch, sizes, layouts] of OTHER_SHAPES) {
  test(`make-tiny ${arch} with ${String(sizes.num_hidden_layers)} layers: ${layouts.map(([p, t]) => `pp ${p}${t > 1 ? ` × tp ${t}` : ''}`).join(', ')} agree with tp 1`, () => {
    const dir = mkdtempSync(join(tmpdir(), `tsglang-pp-${arch}-`));
    writeTinyCheckpoint(arch, dir, { seed: 11, configOverrides: sizes });
    const V = sizes.vocab_size as number;
    const prompts: Prompt[] = [[3, 17, 150, 199 % V, 5], Array.from({ length: 23 }, (_, i) => (i * 37 + 11) % V), [V - 1]].map((tokens) => ({ tokens }));
    checkLayouts(arch, dir, prompts, 6, layouts);
  });
}

test('SGLANG_PP_LAYER_PARTITION moves layers between stages (1,4 on 5 layers) and the logits stay those of tp 1', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-pp-part-'));
  writeTinyCheckpoint('minimax-m2', dir, { seed: 5, configOverrides: OTHER_SHAPES[0][1] });
  process.env.SGLANG_PP_LAYER_PARTITION = '1,4';
  try {
    assert.deepEqual(planStages(dir, {}, 2).map((s) => [s.startLayer, s.endLayer]), [[0, 1], [1, 5]]);
    checkLayouts('partition 1,4', dir, [{ tokens: [1, 2, 3, 4, 5, 6, 7] }, { tokens: [9, 8] }], 4, [[2, 1]]);
    process.env.SGLANG_PP_LAYER_PARTITION = '2,2';
    assert.throws(() => planStages(dir, {}, 2), /sum\(partitions\)=4 does not match num_hidden_layers=5\./);
  } finally {
    delete process.env.SGLANG_PP_LAYER_PARTITION;
  }
});

test('within one layout (pp 2 × tp 2) a row is bit-identical alone, batched, chunked and decoded from the cache', NEEDS_SHARED, () => {
  const m = launch(join(FIXTURES_DIR, 'tiny-deepseek-v32'), 2, 2);
  try {
    const prompt = Array.from({ length: 30 }, (_, i) => (i * 29 + 3) % 512);
    const other = Array.from({ length: 11 }, (_, i) => (i * 13 + 1) % 512);
    const fresh = () => new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 4096), 4, 256);
    let ctx = fresh();
    let r = ctx.addReq();
    const alone = m.forward(ctx.makeBatch([{ req: r, inputIds: prompt }])).logits;
    ctx = fresh();
    const o = ctx.addReq();
    r = ctx.addReq();
    const batched = m.forward(ctx.makeBatch([{ req: o, inputIds: other }, { req: r, inputIds: prompt }])).logits.slice(alone.length);
    ctx = fresh();
    r = ctx.addReq();
    m.forward(ctx.makeBatch([{ req: r, inputIds: prompt.slice(0, 19) }]));
    const chunked = m.forward(ctx.makeBatch([{ req: r, inputIds: prompt.slice(19) }])).logits;
    ctx = fresh();
    r = ctx.addReq();
    const o2 = ctx.addReq();
    m.forward(ctx.makeBatch([{ req: r, inputIds: prompt.slice(0, 29) }, { req: o2, inputIds: other }]));
    const decoded = m.forward(ctx.makeBatch([{ req: r, inputIds: prompt.slice(29) }, { req: o2, inputIds: [7] }])).logits.slice(0, alone.length);
    assert.deepEqual(batched, alone, 'batched');
    assert.deepEqual(chunked, alone, 'chunked');
    assert.deepEqual(decoded, alone, 'decoded from the cache');
  } finally {
    m.close?.();
  }
});

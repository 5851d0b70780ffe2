// Tensor/expert parallelism on rank threads (executor/tp_runner.ts): for both golden fixtures and make-tiny
// checkpoints of other shapes (odd vocabulary, replicated KV heads), the logits under tp ∈ {2, 4} × ep ∈ {1, 2} agree
// with tp = 1 within 1e-4 relative and the greedy continuations are identical (and equal the goldens' for the
// fixtures); within one layout a row's logits are bit-identical alone, batched, chunked and decoded from the cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchTpRanks, writeTinyCheckpoint, type ForwardModel } from '../src/executor/index.js';
import { createOps } from '../src/kernels/index.js';
import { SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { loadModel } from '../src/models/index.js';
import { FIXTURES_DIR, NEEDS_SHARED } from './helpers/paths.js';
import { argmaxAt as argmax, relDiff } from './helpers/golden.js';
import { tempDir } from './helpers/tmp.js';

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

function launch(dir: string, tp: number, ep: number, overrides: Record<string, unknown> = {}): ForwardModel {
  return launchTpRanks({ modelPath: dir, tpSize: tp, epSize: ep, threadsPerRank: 1, overrides }).model;
}

const LAYOUTS: readonly [number, number][] = [[2, 1], [2, 2], [4, 1], [4, 2]];

function checkLayouts(name: string, dir: string, prompts: Prompt[], steps: number, layouts = LAYOUTS, overrides: Record<string, unknown> = {}): void {
  const tokens = prompts.map((p) => p.tokens);
  const ref = runBatched(loadModel(dir, { ops: createOps({ threads: 1 }), overrides }).model, tokens, steps);
  prompts.forEach((p, i) => {
    if (p.greedy) assert.deepEqual(ref.greedy[i], p.greedy.tokens.slice(0, steps), `${name} tp 1 prompt ${i} greedy vs golden`);
  });
  for (const [tp, ep] of layouts) {
    const m = launch(dir, tp, ep, overrides);
    try {
      const got = runBatched(m, tokens, steps);
      got.last.forEach((l, i) => {
        const r = relDiff(l, ref.last[i]);
        assert.ok(r < 1e-4, `${name} tp ${tp} ep ${ep} prompt ${i}: logits differ from tp 1 by ${r} relative`);
      });
      assert.deepEqual(got.greedy, ref.greedy, `${name} tp ${tp} ep ${ep}: greedy continuations`);
    } finally {
      m.close?.();
    }
  }
}

for (const fixture of ['tiny-minimax-m2', 'tiny-deepseek-v32']) {
  test(`${fixture}: tp 2/4 × ep 1/2 logits agree with tp 1 (1e-4 relative), greedy identical and equal to the goldens`, NEEDS_SHARED, () => {
    const dir = join(FIXTURES_DIR, fixture);
    const golden = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as { prompts: Prompt[] };
    checkLayouts(fixture, dir, golden.prompts, 16);
  });
}

test('tiny-deepseek-v32 with an Index Cache pattern (layers 1-2 reuse layer 0\'s top-k): tp 2 × ep 2 agrees with tp 1', NEEDS_SHARED, () => {
  const dir = join(FIXTURES_DIR, 'tiny-deepseek-v32');
  const golden = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as { prompts: Prompt[] };
  checkLayouts('index cache', dir, golden.prompts.map((p) => ({ tokens: p.tokens })), 8, [[2, 2]], { index_topk_pattern: 'FSS' });
});

/** Checkpoints of other shapes: vocabulary not a multiple of 64 (padded shards), KV heads replicated at tp 4. */
const OTHER_SHAPES: [string, Record<string, unknown>][] = [
  ['minimax-m2', { hidden_size: 128, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 24, rotary_dim: 12, num_local_experts: 8, num_experts_per_tok: 2, intermediate_size: 48, vocab_size: 300, num_hidden_layers: 2, attn_type_list: [1, 1] }],
  ['deepseek-v32', { hidden_size: 160, num_attention_heads: 4, n_routed_experts: 8, n_group: 2, topk_group: 1, num_experts_per_tok: 2, moe_intermediate_size: 32, intermediate_size: 96, vocab_size: 333, index_topk: 8, index_n_heads: 4 }],
];

for (const [arch, sizes] of OTHER_SHAPES) {
  test(`make-tiny ${arch} of another shape (vocab ${String(sizes.vocab_size)}): tp 2/4 × ep 1/2 agree with tp 1`, () => {
    const dir = tempDir(`tsglang-tp-${arch}-`);
    writeTinyCheckpoint(arch, dir, { seed: 7, configOverrides: sizes });
    const V = sizes.vocab_size as number;
    const prompts: Prompt[] = [[3, 17, 250, 299 % V, 5], Array.from({ length: 23 }, (_, i) => (i * 37 + 11) % V), [V - 1]].map((tokens) => ({ tokens }));
    checkLayouts(arch, dir, prompts, 6);
  });
}

test('within one layout (tp 2, ep 2) a row is bit-identical alone, batched, chunked and decoded from the cache', NEEDS_SHARED, () => {
  const dir = join(FIXTURES_DIR, 'tiny-minimax-m2');
  const m = launch(dir, 2, 2);
  try {
    const prompt = Array.from({ length: 30 }, (_, i) => (i * 29 + 3) % 512);
    const other = Array.from({ length: 11 }, (_, i) => (i * 13 + 1) % 512);
    const fresh = () => new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 4096), 4, 256);
    // alone
    let ctx = fresh();
    let r = ctx.addReq();
    const alone = m.forward(ctx.makeBatch([{ req: r, inputIds: prompt }])).logits;
    // batched with another request (before it)
    ctx = fresh();
    const o = ctx.addReq();
    r = ctx.addReq();
    const batched = m.forward(ctx.makeBatch([{ req: o, inputIds: other }, { req: r, inputIds: prompt }])).logits.slice(alone.length);
    // chunked: 19 tokens, then the last 11 on top of the cached prefix
    ctx = fresh();
    r = ctx.addReq();
    m.forward(ctx.makeBatch([{ req: r, inputIds: prompt.slice(0, 19) }]));
    const chunked = m.forward(ctx.makeBatch([{ req: r, inputIds: prompt.slice(19) }])).logits;
    // token by token from the cache (decode steps), the last one batched with another request's decode
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

test('a step that throws on the ranks fails with an error (no hang); the broken ranks then refuse every step at once', NEEDS_SHARED, () => {
  const m = launch(join(FIXTURES_DIR, 'tiny-minimax-m2'), 2, 1);
  try {
    const ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 4096), 2, 64);
    assert.throws(() => m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: [3, 100000] }])), /outside the vocabulary|TP rank/);
    const t0 = Date.now();
    assert.throws(() => m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: [3] }])), { name: 'DistributedError' });
    assert.ok(Date.now() - t0 < 5000, 'the broken group fails fast, not after --dist-timeout');
  } finally {
    m.close?.();
  }
});

test('every KV pool of rank 0 gets its own pool on the other ranks (a small pool first, then a large one with high locs)', NEEDS_SHARED, () => {
  const m = launch(join(FIXTURES_DIR, 'tiny-deepseek-v32'), 2, 1);
  try {
    const prompt = Array.from({ length: 30 }, (_, i) => (i * 31 + 5) % 512);
    let ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 40), 1, 32);
    m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: prompt.slice(0, 10) }]));
    ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 4096), 1, 64, (n) => Int32Array.from({ length: n }, (_, i) => 4000 - i));
    const high = m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: prompt }])).logits;
    ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 4096), 1, 64);
    const low = m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: prompt }])).logits;
    assert.deepEqual(high, low);
  } finally {
    m.close?.();
  }
});

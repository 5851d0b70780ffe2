// Tiny DeepSeek-V3.2 fixture vs the float64 goldens (../shared/fixtures/tiny-deepseek-v32/golden.json): logits,
// argmax, greedy decode, MTP logits, routed experts and indexer selections of the last position, weight checks.
// Plus: absorbed vs expanded MLA, one prefill == chunks == token by token past several index_topk windows,
// batched == alone, KV bytes per token, and a generated DeepseekV3ForCausalLM checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES_DIR, NEEDS_SHARED, whenShared } from '../helpers/paths.js';
import { argmaxAt, maxAbsDiff, readGolden } from '../helpers/golden.js';
import type { GoldenPrompt } from '../helpers/golden.js';
import { loadModelConfig, parseModelConfig } from '../../src/config/index.js';
import { createCpuOps } from '../../src/kernels/index.js';
import { SimpleBatchContext } from '../../src/layers/index.js';
import type { ForwardBatch, ForwardOutput } from '../../src/layers/index.js';
import { KVPool } from '../../src/mem_cache/index.js';
import {
  Checkpoint, DeepseekV32ForCausalLM, createDeepseekModel, deepseekExpectedTensors, deepseekKvBytesPerTokenPerLayer,
  loadModel, loadWeights, mtpLayerOf, parseDeepseekConfig,
} from '../../src/models/index.js';
import type { WeightStore } from '../../src/models/index.js';
import { writeTinyCheckpoint } from '../../src/executor/index.js';
import { Rng } from '../../src/common/index.js';

const DIR = join(FIXTURES_DIR, 'tiny-deepseek-v32');
const TOL = 2e-3;

interface DeepseekGoldenPrompt extends GoldenPrompt {
  mtp: { next_tokens: number[]; logits_at: { position: number; next_token: number; logits: number[] }[]; argmax: number[] };
}

const golden = readGolden<DeepseekGoldenPrompt>(DIR);
const ops = createCpuOps();
const config = whenShared(() => loadModelConfig(DIR));
const weights: WeightStore = whenShared(() => {
  const ckpt = Checkpoint.open(DIR);
  try {
    return loadWeights(ckpt, deepseekExpectedTensors(config), config, { ops });
  } finally {
    ckpt.close();
  }
});
const model = whenShared(() => createDeepseekModel(config, weights, { ops }));
const V = whenShared(() => config.vocabSize);
const H = whenShared(() => config.hiddenSize);

function newContext(m: DeepseekV32ForCausalLM, maxReqs = 4, maxSeqLen = 256, allocate?: (n: number) => Int32Array): SimpleBatchContext {
  return new SimpleBatchContext(new KVPool(m.kvPoolLayout(), maxReqs * maxSeqLen + 1), maxReqs, maxSeqLen, allocate);
}

/** Shuffled distinct locs, so no test relies on locs being sequential. */
function shuffledAllocator(seed: number, maxLocs: number): (n: number) => Int32Array {
  const rng = new Rng(seed);
  const free = Array.from({ length: maxLocs - 1 }, (_, i) => i + 1);
  for (let i = free.length - 1; i > 0; i--) {
    const j = Math.floor(rng.nextFloat() * (i + 1));
    [free[i], free[j]] = [free[j], free[i]];
  }
  return (n) => Int32Array.from(free.splice(0, n));
}

const results: string[] = [];

for (const p of golden.prompts) {
  test(`golden ${p.name}: logits, argmax, routed experts and indexer picks of the last position, greedy, MTP`, NEEDS_SHARED, () => {
    const ctx = newContext(model);
    const req = ctx.addReq();
    const selections = new Map<number, number[]>();
    model.observer = { indexer: (layer, row, keys) => { if (row === p.length - 1) selections.set(layer, [...keys]); } };
    let out: ForwardOutput;
    try {
      out = model.forward(ctx.makeBatch([{ req, inputIds: p.tokens }], { logits: 'all', captureHiddenStates: true, captureRoutedExperts: true }));
    } finally {
      model.observer = null;
    }
    // logits
    const errLast = maxAbsDiff(out.logits.subarray((p.length - 1) * V, p.length * V), p.logits_last);
    let errMain = errLast;
    for (const la of p.logits_at) errMain = Math.max(errMain, maxAbsDiff(out.logits.subarray(la.position * V, (la.position + 1) * V), la.logits));
    assert.ok(errMain <= TOL, `${p.name}: max |logits − golden| = ${errMain}`);
    for (const [pos, id] of Object.entries(p.argmax_at)) assert.equal(argmaxAt(out.logits, Number(pos) * V, V), id, `argmax at ${pos}`);
    assert.ok(maxAbsDiff(out.hiddenStates!.subarray((p.length - 1) * H, p.length * H), p.hidden_last) <= 1e-4, 'hidden_last');
    // discrete decisions of the last position
    for (const [key, expected] of Object.entries(p.debug_last_position)) {
      const mExp = /^main_experts_(\d+)$/.exec(key);
      const mIdx = /^main_indexer_(\d+)$/.exec(key);
      if (mExp) {
        const ids = out.routedExperts![Number(mExp[1])]!;
        const k = ids.length / p.length;
        assert.deepEqual([...ids.subarray((p.length - 1) * k, p.length * k)], expected, key);
      } else if (mIdx) {
        assert.deepEqual(selections.get(Number(mIdx[1])), expected, key);
      }
    }
    // MTP: pairs (h_i, next_tokens[i]) at positions 0..len-1 with the MTP layer's own KV cache
    const mtp = mtpLayerOf(model);
    assert.ok(mtp !== null);
    const mctx = new SimpleBatchContext(new KVPool(mtp.kvPoolLayout(), 257), 1, 256);
    const mout = mtp.forward(mctx.makeBatch([{ req: mctx.addReq(), inputIds: p.mtp.next_tokens }], { logits: 'all' }), out.hiddenStates!);
    let errMtp = 0;
    for (const la of p.mtp.logits_at) errMtp = Math.max(errMtp, maxAbsDiff(mout.logits.subarray(la.position * V, (la.position + 1) * V), la.logits));
    assert.ok(errMtp <= TOL, `${p.name}: max |MTP logits − golden| = ${errMtp}`);
    assert.deepEqual(p.mtp.argmax.map((_, t) => argmaxAt(mout.logits, t * V, V)), p.mtp.argmax, 'MTP argmax');
    // greedy: prefill logits → token, then KV-cache decode
    const greedy: number[] = [argmaxAt(out.logits, (p.length - 1) * V, V)];
    while (greedy.length < p.greedy.num_tokens) {
      const step = model.forward(ctx.makeBatch([{ req, inputIds: [greedy[greedy.length - 1]] }]));
      greedy.push(argmaxAt(step.logits, 0, V));
    }
    assert.deepEqual(greedy, p.greedy.tokens, 'greedy tokens');
    results.push(`${p.name}: main ${errMain.toExponential(2)}, mtp ${errMtp.toExponential(2)}`);
  });
}

test('weight checks: dequantized FP8 (fp8·scale_inv) within 1 f32 ulp, BF16 bits exact, F32 exact', NEEDS_SHARED, () => {
  for (const wc of golden.weight_checks) {
    const w = weights.get(wc.tensor);
    const cols = w.shape.length === 2 ? w.shape[1] : 1;
    const idx = w.shape.length === 2 ? wc.index[0] * cols + wc.index[1] : wc.index[0];
    const v = weights.f32(wc.tensor)[idx];
    const ulp = Math.abs(Math.fround(wc.dequantized) * 2 ** -23) + 1e-45;
    assert.ok(Math.abs(v - wc.dequantized) <= 2 * ulp, `${wc.tensor}[${wc.index}] = ${v}, expected ${wc.dequantized}`);
    if (wc.raw_bf16_bits !== undefined) {
      const u = new Uint32Array(Float32Array.of(v).buffer)[0];
      assert.equal(u >>> 16, wc.raw_bf16_bits);
      assert.equal(u & 0xffff, 0);
    }
  }
});

test('absorbed and expanded MLA extend agree (1e-5) on a prompt longer than index_topk', NEEDS_SHARED, () => {
  const expanded = createDeepseekModel(config, weights, { ops, mlaExtendForm: 'expanded' });
  const p = golden.prompts[golden.prompts.length - 1];
  const run = (m: DeepseekV32ForCausalLM): Float32Array => {
    const ctx = newContext(m);
    return m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: p.tokens }], { logits: 'all' })).logits;
  };
  const a = run(model);
  const e = run(expanded);
  const diff = maxAbsDiff(a, e);
  assert.ok(diff <= 1e-5, `absorbed vs expanded: ${diff}`);
  assert.ok(maxAbsDiff(e.subarray((p.length - 1) * V), p.logits_last) <= TOL);
});

/** A deterministic prompt of `n` ids in [2, V). */
function promptOf(n: number, seed: number): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => 2 + Math.floor(rng.nextFloat() * (V - 2)));
}

test('a prompt of several index_topk windows: one prefill == chunks == token by token (bit-identical)', NEEDS_SHARED, () => {
  const topK = parseDeepseekConfig(config).indexTopK;
  const tokens = promptOf(5 * topK + 3, 7);
  const n = tokens.length;
  const oneShot = (() => {
    const ctx = newContext(model);
    return model.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: tokens }], { logits: 'all' })).logits;
  })();
  const collect = (bounds: number[]): Float32Array => {
    const ctx = newContext(model, 1, 256, shuffledAllocator(bounds.length, 257));
    const req = ctx.addReq();
    const out = new Float32Array(n * V);
    for (let i = 0; i + 1 < bounds.length; i++) {
      const b = ctx.makeBatch([{ req, inputIds: tokens.slice(bounds[i], bounds[i + 1]) }], { logits: 'all' });
      out.set(model.forward(b).logits, bounds[i] * V);
    }
    return out;
  };
  const chunked = collect([0, 13, 2 * topK + 1, 4 * topK, n]);
  const stepwise = collect(Array.from({ length: n + 1 }, (_, i) => i));
  assert.deepEqual(chunked, oneShot);
  assert.deepEqual(stepwise, oneShot);
});

test('Index Cache (index_topk_pattern "FSF"): layer 1 attends layer 0\'s keys on every row, runs no indexer, and one prefill == chunks == token by token', NEEDS_SHARED, () => {
  const topK = parseDeepseekConfig(config).indexTopK;
  const shared = createDeepseekModel(loadModelConfig(DIR, { index_topk_pattern: 'FSF' }), weights, { ops });
  const tokens = promptOf(4 * topK + 5, 11);
  const n = tokens.length;
  const run = (m: DeepseekV32ForCausalLM, sel?: Map<string, number[]>): Float32Array => {
    const ctx = newContext(m);
    m.observer = sel ? { indexer: (layer, row, keys) => { sel.set(`${layer}:${row}`, [...keys]); } } : null;
    try {
      return m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: tokens }], { logits: 'all' })).logits;
    } finally {
      m.observer = null;
    }
  };
  const selShared = new Map<string, number[]>();
  const selFull = new Map<string, number[]>();
  const logitsShared = run(shared, selShared);
  const logitsFull = run(model, selFull);
  let layer1DiffersInFullMode = false;
  for (let row = 0; row < n; row++) {
    assert.deepEqual(selShared.get(`1:${row}`), selShared.get(`0:${row}`), `row ${row}: layer 1 reuses layer 0`);
    assert.deepEqual(selShared.get(`0:${row}`), selFull.get(`0:${row}`), `row ${row}: layer 0 unchanged`);
    assert.equal(selShared.get(`0:${row}`)!.length, Math.min(row + 1, topK));
    if (JSON.stringify(selFull.get(`1:${row}`)) !== JSON.stringify(selFull.get(`0:${row}`))) layer1DiffersInFullMode = true;
  }
  assert.ok(layer1DiffersInFullMode, 'the fixture\'s layer 1 indexer picks other keys than layer 0 somewhere (else this test shows nothing)');
  assert.ok(maxAbsDiff(logitsShared.subarray((n - 1) * V), logitsFull.subarray((n - 1) * V)) > 1e-4, 'sharing changes the logits');
  // the same sharing in chunks and token by token (each step's layer 0 selection feeds its layer 1)
  const collect = (bounds: number[]): Float32Array => {
    const ctx = newContext(shared, 1, 256, shuffledAllocator(bounds.length + 40, 257));
    const req = ctx.addReq();
    const out = new Float32Array(n * V);
    for (let i = 0; i + 1 < bounds.length; i++) out.set(shared.forward(ctx.makeBatch([{ req, inputIds: tokens.slice(bounds[i], bounds[i + 1]) }], { logits: 'all' })).logits, bounds[i] * V);
    return out;
  };
  assert.deepEqual(collect([0, 9, 2 * topK + 3, n]), logitsShared);
  assert.deepEqual(collect(Array.from({ length: n + 1 }, (_, i) => i)), logitsShared);
});

test('decode reads the indexer keys of earlier tokens from the KVPool buffer index_k', NEEDS_SHARED, () => {
  const topK = parseDeepseekConfig(config).indexTopK;
  const tokens = promptOf(3 * topK, 8);
  const runDecode = (corrupt: boolean): Float32Array => {
    const ctx = newContext(model, 1);
    const req = ctx.addReq();
    model.forward(ctx.makeBatch([{ req, inputIds: tokens }]));
    if (corrupt) {
      // scramble the cached index keys of the prefix in every layer: only the DSA selection can change
      for (let l = 0; l < config.numHiddenLayers; l++) {
        const buf = ctx.kvPool.buffer(l, 'index_k');
        const w = ctx.kvPool.width('index_k');
        for (let i = 0; i < tokens.length; i++) {
          const loc = ctx.reqToToken[req * ctx.maxSeqLen + i];
          for (let d = 0; d < w; d++) buf[loc * w + d] = Math.sin(loc * 31 + d * 7 + l);
        }
      }
    }
    return model.forward(ctx.makeBatch([{ req, inputIds: [5] }])).logits;
  };
  const clean = runDecode(false);
  const corrupted = runDecode(true);
  assert.ok(maxAbsDiff(clean, corrupted) > 1e-3, 'decode logits must depend on the cached index keys');
  // and the clean decode equals a one-shot prefill over prompt + token
  const ctx = newContext(model, 1);
  const ref = model.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: [...tokens, 5] }])).logits;
  assert.deepEqual(clean, ref);
});

test('batched == alone, bit-identical: multi-request extend, decode and mixed (extend + decode) batches', NEEDS_SHARED, () => {
  const prompts = [promptOf(40, 1), promptOf(9, 2), promptOf(23, 3)];
  // third step: req 0 and 2 decode one token, req 1 extends by 5 (a mixed batch when batched)
  const third = [[7], promptOf(5, 4), [11]];
  const alone = prompts.map((toks, i) => {
    const ctx = newContext(model, 1);
    const req = ctx.addReq();
    const pre = model.forward(ctx.makeBatch([{ req, inputIds: toks }], { logits: 'all' })).logits;
    const dec = model.forward(ctx.makeBatch([{ req, inputIds: [toks[0]] }])).logits;
    const mix = model.forward(ctx.makeBatch([{ req, inputIds: third[i] }], { logits: 'all' })).logits;
    return { pre, dec, mix };
  });
  const ctx = newContext(model, 3, 256, shuffledAllocator(99, 3 * 256 + 1));
  const reqs = prompts.map(() => ctx.addReq());
  const pre = model.forward(ctx.makeBatch(prompts.map((toks, i) => ({ req: reqs[i], inputIds: toks })), { logits: 'all' })).logits;
  let row = 0;
  prompts.forEach((toks, i) => {
    assert.deepEqual(pre.subarray(row * V, (row + toks.length) * V), alone[i].pre, `prefill of req ${i}`);
    row += toks.length;
  });
  const batch: ForwardBatch = ctx.makeBatch(prompts.map((toks, i) => ({ req: reqs[i], inputIds: [toks[0]] })));
  assert.equal(batch.forwardMode, 'decode');
  const dec = model.forward(batch).logits;
  prompts.forEach((_, i) => assert.deepEqual(dec.subarray(i * V, (i + 1) * V), alone[i].dec, `decode of req ${i}`));
  const mixed = ctx.makeBatch(third.map((ids, i) => ({ req: reqs[i], inputIds: ids })), { logits: 'all' });
  assert.equal(mixed.forwardMode, 'mixed');
  const mix = model.forward(mixed).logits;
  row = 0;
  third.forEach((ids, i) => {
    assert.deepEqual(mix.subarray(row * V, (row + ids.length) * V), alone[i].mix, `mixed step of req ${i}`);
    row += ids.length;
  });
});

test('KV bytes per token per layer: the pool matches 4·(kv_lora_rank + qk_rope_head_dim + index_head_dim)', NEEDS_SHARED, () => {
  const cfg = parseDeepseekConfig(config);
  const pool = new KVPool(model.kvPoolLayout(), 8);
  const perLayer = pool.bytesPerToken / cfg.numLayers;
  assert.equal(perLayer, deepseekKvBytesPerTokenPerLayer(cfg));
  assert.equal(perLayer, 4 * (64 + 16 + 64));
  // the released DeepSeek-V3.2 config (model-spec.md §3.1)
  const real = parseDeepseekConfig(parseModelConfig({
    architectures: ['DeepseekV32ForCausalLM'], hidden_size: 7168, num_hidden_layers: 61, num_attention_heads: 128, vocab_size: 129280,
    q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128, index_n_heads: 64,
    index_head_dim: 128, index_topk: 2048, intermediate_size: 18432, moe_intermediate_size: 2048, n_routed_experts: 256,
    n_shared_experts: 1, num_experts_per_tok: 8, n_group: 8, topk_group: 4, first_k_dense_replace: 3,
  }));
  assert.equal(deepseekKvBytesPerTokenPerLayer(real), 2816);
  const realLayout = new KVPool({ numLayers: 61, buffers: [{ name: 'kv', width: 576 }, { name: 'index_k', width: 128 }] }, 2, 1);
  assert.equal(realLayout.bytesPerToken, 61 * 2816);
});

for (const variant of [{ name: 'q_lora', over: {} }, { name: 'q_proj (q_lora_rank null)', over: { q_lora_rank: null } }]) test(`a generated DeepseekV3ForCausalLM checkpoint (no indexer, ${variant.name}) loads and runs; prefill == token-by-token decode`, NEEDS_SHARED, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-dsv3-'));
  try {
    writeTinyCheckpoint('deepseek-v3', dir, { seed: 3, configOverrides: variant.over });
    const loaded = loadModel(dir, { ops });
    assert.ok(loaded.model instanceof DeepseekV32ForCausalLM);
    const m = loaded.model as DeepseekV32ForCausalLM;
    assert.equal(m.deepseek.isDsa, false);
    assert.deepEqual(m.kvPoolLayout().buffers.map((b) => b.name), ['kv']);
    assert.ok(mtpLayerOf(m) !== null);
    const tokens = promptOf(30, 4);
    const ctxA = newContext(m, 1);
    const oneShot = m.forward(ctxA.makeBatch([{ req: ctxA.addReq(), inputIds: tokens }], { logits: 'all' })).logits;
    assert.ok(oneShot.every(Number.isFinite));
    const ctxB = newContext(m, 1);
    const req = ctxB.addReq();
    const steps = new Float32Array(tokens.length * V);
    tokens.forEach((t, i) => steps.set(m.forward(ctxB.makeBatch([{ req, inputIds: [t] }])).logits, i * V));
    assert.deepEqual(steps, oneShot);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('report: max error per golden prompt', NEEDS_SHARED, () => {
  assert.equal(results.length, golden.prompts.length);
  for (const r of results) process.stderr.write(`[deepseek golden] ${r}\n`);
});

// Golden tests of MiniMaxM2ForCausalLM against ../shared/fixtures/tiny-minimax-m2/golden.json (float64 reference;
// tolerances from the fixtures README: logits 2e-3 abs, discrete decisions exact), plus prefill == extend-in-pieces
// == decode and batch invariance on the same checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Rng } from '../../src/common/index.js';
import { createCpuOps } from '../../src/kernels/index.js';
import { SimpleBatchContext } from '../../src/layers/index.js';
import type { ForwardOutput } from '../../src/layers/index.js';
import { KVPool } from '../../src/mem_cache/index.js';
import { loadModelConfig } from '../../src/config/index.js';
import { Checkpoint, loadModel, loadWeights } from '../../src/models/index.js';
import { argmaxAt, maxAbsDiff, readGolden } from '../helpers/golden.js';
import { FIXTURES_DIR, NEEDS_SHARED, whenShared } from '../helpers/paths.js';

const DIR = join(FIXTURES_DIR, 'tiny-minimax-m2');

const golden = readGolden(DIR);
const TOL = golden.recommended_tolerances_float32!.logits_max_abs;
const ops = createCpuOps();
const loaded = whenShared(() => loadModel(DIR, { ops, progress: false }));
const { model, config } = loaded ?? ({} as typeof loaded);
const V = whenShared(() => config.vocabSize);

function newContext(maxReqs: number, maxLen: number, allocate?: (n: number) => Int32Array): SimpleBatchContext {
  const pool = new KVPool(model.kvPoolLayout(), maxReqs * maxLen + 1);
  return new SimpleBatchContext(pool, maxReqs, maxLen, allocate);
}

const prefillCache = new Map<string, ForwardOutput>();
/** Logits (and hidden states, routed experts) of every prompt position from one prefill, memoized per prompt. */
function prefillAll(tokens: number[]): ForwardOutput {
  const key = tokens.join(',');
  let out = prefillCache.get(key);
  if (!out) {
    const ctx = newContext(1, tokens.length + 1);
    out = model.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: tokens }], { logits: 'all', captureRoutedExperts: true, captureHiddenStates: true }));
    prefillCache.set(key, out);
  }
  return out;
}

for (const p of golden.prompts) {
  test(`golden ${p.name}: logits_last / logits_at within ${TOL}, argmax_at exact, hidden_last close`, NEEDS_SHARED, () => {
    const out = prefillAll(p.tokens);
    const row = (pos: number): Float32Array => out.logits.subarray(pos * V, (pos + 1) * V);
    const errLast = maxAbsDiff(row(p.length - 1), p.logits_last);
    assert.ok(errLast <= TOL, `logits_last max err ${errLast}`);
    for (const at of p.logits_at) {
      const err = maxAbsDiff(row(at.position), at.logits);
      assert.ok(err <= TOL, `logits_at ${at.position}: max err ${err}`);
    }
    for (const [pos, id] of Object.entries(p.argmax_at)) assert.equal(argmaxAt(row(Number(pos))), id, `argmax at ${pos}`);
    const hidden = out.hiddenStates!.subarray((p.length - 1) * config.hiddenSize, p.length * config.hiddenSize);
    assert.ok(maxAbsDiff(hidden, p.hidden_last) <= TOL, 'hidden_last');
  });

  test(`golden ${p.name}: routed experts at the last position, exact and in selection order`, NEEDS_SHARED, () => {
    const out = prefillAll(p.tokens);
    const topK = (config.raw.num_experts_per_tok as number);
    for (let l = 0; l < config.numHiddenLayers; l++) {
      const ids = out.routedExperts![l]!;
      assert.deepEqual(Array.from(ids.subarray((p.length - 1) * topK, p.length * topK)), p.debug_last_position[`experts_${l}`], `layer ${l}`);
    }
  });

  test(`golden ${p.name}: ${p.greedy.num_tokens} greedy tokens through the KV cache, exact`, NEEDS_SHARED, () => {
    const ctx = newContext(1, p.length + p.greedy.num_tokens);
    const req = ctx.addReq();
    let logits = model.forward(ctx.makeBatch([{ req, inputIds: p.tokens }])).logits;
    const tokens: number[] = [];
    for (let i = 0; i < p.greedy.num_tokens; i++) {
      tokens.push(argmaxAt(logits));
      if (i + 1 < p.greedy.num_tokens) logits = model.forward(ctx.makeBatch([{ req, inputIds: [tokens[i]] }])).logits;
    }
    assert.deepEqual(tokens, p.greedy.tokens);
  });
}

test('golden weight_checks: loader values exact (FP8 · scale_inv as f32, BF16 bits)', NEEDS_SHARED, () => {
  const ckpt = Checkpoint.open(DIR);
  const cfg = loadModelConfig(DIR);
  const names = new Set(golden.weight_checks.map((c) => c.tensor));
  const specs = [...names].map((name) => ({ name, shape: ckpt.info(name)!.shape, storedAs: 'bf16' as const, init: 'linear' as const }));
  const weights = loadWeights(ckpt, specs, cfg, { ops, progress: false });
  ckpt.close();
  assert.ok(golden.weight_checks.length > 0);
  for (const c of golden.weight_checks) {
    const w = weights.f32(c.tensor);
    const shape = specs.find((s) => s.name === c.tensor)!.shape;
    const flat = c.index.reduce((acc, ix, d) => acc * shape[d] + ix, 0);
    const got = w[flat];
    assert.equal(got, Math.fround(c.dequantized), `${c.tensor}[${c.index.join(',')}] (${c.stored_dtype})`);
    if (c.raw_bf16_bits !== undefined) assert.equal(got, new Float32Array(new Uint32Array([c.raw_bf16_bits << 16]).buffer)[0]);
  }
});

test('prefill == extend in pieces == token-by-token decode (every position, within 1e-5)', NEEDS_SHARED, () => {
  const tokens = golden.prompts.reduce((a, b) => (b.length > a.length && b.length <= 64 ? b : a)).tokens;
  const n = tokens.length;
  const full = prefillAll(tokens).logits;
  // extend in 3 uneven pieces, logits of every row
  const ctxA = newContext(1, n);
  const ra = ctxA.addReq();
  const pieces: Float32Array[] = [];
  for (const [s, e] of [[0, 5], [5, 6], [6, n]]) pieces.push(model.forward(ctxA.makeBatch([{ req: ra, inputIds: tokens.slice(s, e) }], { logits: 'all' })).logits);
  const extended = Float32Array.from(pieces.flatMap((x) => Array.from(x)));
  assert.ok(maxAbsDiff(extended, full) <= 1e-5, `extend pieces vs prefill ${maxAbsDiff(extended, full)}`);
  // decode one token at a time
  const ctxB = newContext(1, n);
  const rb = ctxB.addReq();
  const decoded = new Float32Array(n * V);
  for (let i = 0; i < n; i++) decoded.set(model.forward(ctxB.makeBatch([{ req: rb, inputIds: [tokens[i]] }])).logits, i * V);
  assert.ok(maxAbsDiff(decoded, full) <= 1e-5, `decode vs prefill ${maxAbsDiff(decoded, full)}`);
});

test('batch invariance: three requests of different lengths (extend, then mixed decode+extend) bit-identical to alone', NEEDS_SHARED, () => {
  const prompts = [golden.prompts[1].tokens, golden.prompts[2].tokens.slice(0, 30), golden.prompts[3].tokens.slice(0, 13)];
  const follow = [[5], [7, 8, 9], [11]];
  // alone: prompt, then the follow-up chunk
  const alone = prompts.map((toks, i) => {
    const ctx = newContext(1, 64);
    const r = ctx.addReq();
    const a = model.forward(ctx.makeBatch([{ req: r, inputIds: toks }], { logits: 'all' })).logits;
    const b = model.forward(ctx.makeBatch([{ req: r, inputIds: follow[i] }], { logits: 'all' })).logits;
    return { a, b };
  });
  // together, with locs handed out in a scrambled order (paging must not matter)
  const rng = new Rng(7);
  const free = Array.from({ length: 3 * 64 }, (_, i) => i + 1);
  for (let i = free.length - 1; i > 0; i--) {
    const j = rng.nextInt(i + 1);
    [free[i], free[j]] = [free[j], free[i]];
  }
  const ctx = newContext(3, 64, (n) => Int32Array.from(free.splice(0, n)));
  const reqs = prompts.map(() => ctx.addReq());
  const first = model.forward(ctx.makeBatch(prompts.map((t, i) => ({ req: reqs[i], inputIds: t })), { logits: 'all' })).logits;
  let off = 0;
  prompts.forEach((t, i) => {
    assert.deepEqual(first.subarray(off * V, (off + t.length) * V), alone[i].a, `req ${i} extend`);
    off += t.length;
  });
  // mixed step: order differs from creation order, decode rows next to an extend chunk
  const order = [2, 1, 0];
  const mixed = ctx.makeBatch(order.map((i) => ({ req: reqs[i], inputIds: follow[i] })), { logits: 'all' });
  assert.equal(mixed.forwardMode, 'mixed');
  const second = model.forward(mixed).logits;
  off = 0;
  for (const i of order) {
    assert.deepEqual(second.subarray(off * V, (off + follow[i].length) * V), alone[i].b, `req ${i} mixed step`);
    off += follow[i].length;
  }
});

// Prefill context parallelism, interleave (layers/context_parallel.ts, attention/mla_cp.ts): on the DeepSeek-V3.2
// golden fixture, the logits of every prompt position under cp 2 (tp 2), cp 4 (tp 4) and cp 2 with attn_tp 2 (tp 4)
// agree with tp 1 within 1e-4 relative and the greedy continuations equal the goldens; the split ran for the extend
// batches whose token count is a multiple of cp and fell back for the others (and for decodes); the KV cache after a
// split prefill lets later decodes attend every token (the continuations depend on it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchTpRanks, type ForwardModel } from '../src/executor/index.js';
import { createOps } from '../src/kernels/index.js';
import { ContextParallel, contextParallelGroups, cpStats, SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { loadModel } from '../src/models/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, SHARED_MISSING } from './helpers/paths.js';
import { argmaxAt as argmax, relDiff } from './helpers/golden.js';

const MODEL = join(FIXTURES_DIR, 'tiny-deepseek-v32');
interface Golden { prompts: { tokens: number[]; greedy: { tokens: number[] } }[] }
const golden: Golden = SHARED_MISSING !== null ? { prompts: [] } : JSON.parse(readFileSync(join(MODEL, 'golden.json'), 'utf8')) as Golden;

/** Each prompt prefilled alone (all positions' logits), then `steps` greedy tokens decoded in one batch. */
function run(m: ForwardModel, prompts: readonly number[][], steps: number): { all: Float32Array[]; greedy: number[][] } {
  const ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), 8192), prompts.length, 512);
  const reqs = prompts.map(() => ctx.addReq());
  const all: Float32Array[] = [];
  const next: number[] = [];
  prompts.forEach((p, i) => {
    const out = m.forward(ctx.makeBatch([{ req: reqs[i], inputIds: p }], { logits: 'all' }));
    all.push(out.logits);
    const V = out.logits.length / p.length;
    next.push(argmax(out.logits.subarray((p.length - 1) * V)));
  });
  const greedy: number[][] = prompts.map((_, i) => [next[i]]);
  for (let s = 1; s < steps; s++) {
    const out = m.forward(ctx.makeBatch(greedy.map((g, i) => ({ req: reqs[i], inputIds: [g[g.length - 1]] }))));
    const V = out.logits.length / prompts.length;
    greedy.forEach((g, i) => g.push(argmax(out.logits.subarray(i * V, (i + 1) * V))));
  }
  return { all, greedy };
}

test('prefill CP interleave (cp 2, cp 4, cp 2 × attn_tp 2): every position\'s logits equal tp 1 (1e-4), greedy = goldens; non-multiples fall back', NEEDS_SHARED, () => {
  // lengths 4·k split under cp 2 and 4; 45 and 7 do not (they run without CP); decodes never split
  const prompts = golden.prompts.map((p) => p.tokens);
  const ref = run(loadModel(MODEL, { ops: createOps({ threads: 1 }) }).model, prompts, 16);
  ref.greedy.forEach((g, i) => assert.deepEqual(g, golden.prompts[i].greedy.tokens, `tp 1 prompt ${i}`));
  for (const [tp, cp] of [[2, 2], [4, 4], [4, 2]] as const) {
    const m = launchTpRanks({ modelPath: MODEL, tpSize: tp, epSize: 1, threadsPerRank: 1, attnCpSize: cp }).model;
    const before = { ...cpStats };
    try {
      const got = run(m, prompts, 16);
      got.all.forEach((l, i) => {
        const r = relDiff(l, ref.all[i]);
        assert.ok(r < 1e-4, `tp ${tp} cp ${cp} prompt ${i} (${prompts[i].length} tokens): logits differ from tp 1 by ${r} relative`);
      });
      assert.deepEqual(got.greedy, ref.greedy, `tp ${tp} cp ${cp} greedy`);
      const layers = 3;
      const splits = prompts.filter((p) => p.length >= cp && p.length % cp === 0).length;
      assert.ok(splits >= 1, 'a prompt splits');
      assert.equal(cpStats.splitForwards - before.splitForwards, splits * layers, `tp ${tp} cp ${cp}: split prefills × layers on rank 0`);
      assert.ok(cpStats.fallbackForwards - before.fallbackForwards >= (prompts.length - splits + 15) * layers, 'the others and the decodes ran without CP');
    } finally {
      m.close?.();
    }
  }
});

test('ContextParallel: rank r owns rows r, r+cp, …; gathered rows come back in batch order; row views sit at their sequence index', () => {
  const cp = new ContextParallel(4, 1, null);
  assert.deepEqual([...cp.ownRows(12)], [1, 5, 9]);
  assert.deepEqual([...ContextParallel.takeRows(Float32Array.from({ length: 12 }, (_, i) => i), 2, Int32Array.of(1, 4))], [2, 3, 8, 9]);
  const p = contextParallelGroups(5, 8, 2, 4, null, null, null);
  assert.deepEqual([p.attn!.tpSize, p.attn!.tpRank, p.cp!.size, p.cp!.rank, p.moeEpRank], [2, 1, 4, 2, 1]);
  assert.throws(() => contextParallelGroups(0, 6, 1, 4, null, null, null), /--attn-cp-size \(4\) must divide --tp-size \(6\)/);
  const view = ContextParallel.rowBatch({
    forwardMode: 'extend', numReqs: 2, numTokens: 6, inputIds: new Int32Array(6), positions: new Int32Array(6), outCacheLoc: new Int32Array(6),
    extendPrefixLens: Int32Array.of(3, 0), extendSeqLens: Int32Array.of(4, 2), seqLens: Int32Array.of(7, 2), extendStartLoc: Int32Array.of(0, 4),
    reqPoolIndices: Int32Array.of(5, 2), reqToToken: new Int32Array(80), reqToTokenStride: 10, logitRows: Int32Array.of(3, 5), kvPool: null as never,
  }, Int32Array.of(1, 4, 5));
  assert.deepEqual([...view.extendPrefixLens], [4, 0, 1]);
  assert.deepEqual([...view.reqPoolIndices], [5, 2, 2]);
  assert.deepEqual([...view.extendSeqLens], [1, 1, 1]);
});

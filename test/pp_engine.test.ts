// The engine under pipeline parallelism (scheduler/pp_loop.ts over executor/pp_runner.ts): served requests on the
// DeepSeek fixture with pp 2 (and pp 2 × tp 2) give the tp 1 engine's tokens and logprobs — prompt logprobs and a
// seeded sampled run included (the last stage samples with the request's RNG state) — under continuous batching with
// several micro-batches in flight, chunked prefill whose chunks are in the pipeline at once, the radix cache,
// retraction, n > 1 and abort; /flush_cache frees the pool; a stage that cannot load stops start-up naming it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, SHARED_MISSING } from './helpers/paths.js';

const MODEL = join(FIXTURES_DIR, 'tiny-deepseek-v32');
const golden = SHARED_MISSING !== null ? { prompts: [] } : (JSON.parse(readFileSync(join(MODEL, 'golden.json'), 'utf8')) as { prompts: { tokens: number[]; greedy: { tokens: number[] } }[] });

function makeEngine(o: Partial<EngineOptions> = {}): Promise<Engine> {
  return Engine.create({ modelPath: MODEL, skipTokenizerInit: true, useWorkerThread: false, recordStepStats: true, numThreads: 1, maxTotalTokens: 4096, contextLength: 512, ...o });
}

interface Run { ids: number[]; last: GenerateOutput; logprobs: number[]; promptLogprobs: (number | null)[] }

async function collect(it: AsyncIterable<GenerateOutput>, onFirst?: () => void): Promise<Run> {
  const ids: number[] = [];
  const logprobs: number[] = [];
  const promptLogprobs: (number | null)[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of it) {
    if (last === null) onFirst?.();
    ids.push(...o.outputIds);
    for (const lp of o.logprobs?.outputTokenLogprobs ?? []) logprobs.push(lp[0]);
    for (const lp of o.logprobs?.inputTokenLogprobs ?? []) promptLogprobs.push(lp[0]);
    last = o;
  }
  return { ids, last: last!, logprobs, promptLogprobs };
}

/** A streamed greedy (or `sampling`) run with output logprobs, and prompt logprobs from position `logprobStartLen` (−1: none). */
const gen = (e: Engine, rid: string, inputIds: number[], n: number, onFirst?: () => void, sampling: Record<string, unknown> = { temperature: 0 }, logprobStartLen = 0) =>
  collect(e.generate({ rid, inputIds, stream: true, returnLogprob: true, logprobStartLen, samplingParams: { maxNewTokens: n, ignoreEos: true, ...sampling } }), onFirst);

const PROMPTS = (): number[][] => {
  const [p1, p7, p45, p100] = golden.prompts.map((p) => p.tokens);
  return [p7, p45, p100.slice(0, 30), p45.slice(0, 20).concat([5, 6, 7]), p100.slice(50, 60), p1, p100];
};

const close = (a: readonly (number | null)[], b: readonly (number | null)[], what: string): void => {
  assert.equal(a.length, b.length, `${what}: count`);
  a.forEach((x, j) => assert.ok(x === b[j] || Math.abs((x ?? NaN) - (b[j] ?? NaN)) < 1e-4, `${what} ${j}: ${x} vs ${b[j]}`));
};

// pp 2 × tp 2 repeats the run with TP inside each stage (about 2× the time): opt-in with TSGLANG_TEST_PP_SLOW=1
const SLOW = process.env.TSGLANG_TEST_PP_SLOW === '1' ? {} : { skip: 'pp 2 × tp 2 engine run: set TSGLANG_TEST_PP_SLOW=1' };

for (const tp of [1, 2]) {
  test(`engine pp 2${tp > 1 ? ' × tp 2' : ''}: tp 1's tokens, logprobs and seeded samples with micro-batches in flight, chunks in the pipeline at once, radix hits, retraction, n > 1, abort; flush frees the pool`, tp > 1 ? { ...NEEDS_SHARED, ...SLOW } : NEEDS_SHARED, async () => {
    const prompts = PROMPTS();
    const ref = await makeEngine();
    const alone: Run[] = [];
    for (let i = 0; i < prompts.length; i++) alone.push(await gen(ref, `r${i}`, prompts[i], 24));
    const sampledRef = await gen(ref, 's', prompts[1], 16, undefined, { temperature: 0.9, topP: 0.9, seed: 1234 });
    await ref.shutdown();

    const e = await makeEngine({ ppSize: 2, tpSize: tp, ppMaxMicroBatchSize: 3, chunkedPrefillSize: 16, pageSize: 4, maxTotalTokens: 200, scheduleConservativeness: 0.3 });
    try {
      let t0Decoding!: () => void;
      const started = new Promise<void>((resolve) => { t0Decoding = resolve; });
      const first = gen(e, 't0', prompts[0], 24, t0Decoding);
      await started;
      const rs = [await first, ...(await Promise.all(prompts.slice(1).map((p, i) => gen(e, `t${i + 1}`, p, 24))))];
      rs.forEach((r, i) => {
        assert.deepEqual(r.ids, alone[i].ids, `t${i} tokens`);
        close(r.logprobs, alone[i].logprobs, `t${i} logprob`);
        close(r.promptLogprobs, alone[i].promptLogprobs, `t${i} prompt logprob`);
      });
      golden.prompts.forEach((p) => {
        const i = prompts.findIndex((q) => q === p.tokens);
        if (i >= 0) assert.deepEqual(rs[i].ids.slice(0, 16), p.greedy.tokens.slice(0, 16));
      });
      const core = e.inProcessCore!;
      const stats = core.scheduler.statsHistory;
      const loop = core.scheduler.pipeline!;
      assert.ok(loop.peakInFlight >= 2, `micro-batches overlapped in the pipeline (peak ${loop.peakInFlight})`);
      assert.ok(loop.peakReqInFlight >= 2, 'two chunks of one prompt were in the pipeline at once');
      assert.ok(stats.some((s) => s.hasUnfinishedChunk), 'a chunked prefill ran');
      assert.ok(stats.every((s) => s.numReqs <= 3), 'no micro-batch above --pp-max-micro-batch-size');
      assert.ok(stats.some((s) => s.numRetracted > 0), 'the small pool retracted');
      // the same seed samples the same tokens: the last stage drew with the request's RNG, its state came back
      const sampled = await gen(e, 's', prompts[1], 16, undefined, { temperature: 0.9, topP: 0.9, seed: 1234 });
      assert.deepEqual(sampled.ids, sampledRef.ids, 'seeded sampling');
      await gen(e, 'warm', prompts[1], 24, undefined, undefined, -1);
      const hit = await gen(e, 'hit', prompts[1], 24, undefined, undefined, -1);
      assert.deepEqual(hit.ids, alone[1].ids);
      assert.ok(hit.last.cachedTokens > 0, 'cached tokens');
      const outs: GenerateOutput[] = [];
      for await (const o of e.generate({ rid: 'n2', inputIds: prompts[0], stream: false, samplingParams: { temperature: 0, maxNewTokens: 6, ignoreEos: true, n: 2 } })) outs.push(o);
      const byIndex = new Map<number, number[]>();
      for (const o of outs) byIndex.set(o.index, [...(byIndex.get(o.index) ?? []), ...o.outputIds]);
      assert.equal(byIndex.size, 2);
      for (const ids of byIndex.values()) assert.deepEqual(ids, alone[0].ids.slice(0, 6));
      // abort mid-stream, with another request decoding in the other micro-batch: abort for one, the other unaffected
      const other = gen(e, 'other', prompts[4], 24);
      const ac = e.generate({ rid: 'ab', inputIds: prompts[2], stream: true, samplingParams: { temperature: 0, maxNewTokens: 200, ignoreEos: true } });
      let last: GenerateOutput | null = null;
      let n = 0;
      for await (const o of ac) {
        last = o;
        if (++n === 2) e.abort('ab');
      }
      assert.equal(last!.finishReason?.type, 'abort');
      assert.deepEqual((await other).ids, alone[4].ids);
      assert.equal(await e.flushCache(), true);
      const a = core.scheduler.mem.allocator;
      assert.equal(a.availableSize(), a.size, 'KV pool 100% free after flush');
    } finally {
      await e.shutdown();
    }
  });
}

test('engine pp 2: a stage that cannot load its layers stops start-up with an error naming the stage and rank', NEEDS_SHARED, async () => {
  // A copy of the fixture whose index drops a tensor of layer 2, which only stage 1 loads.
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-pp-bad-'));
  for (const f of readdirSync(MODEL)) if (f !== 'model.safetensors.index.json') copyFileSync(join(MODEL, f), join(dir, f));
  const index = JSON.parse(readFileSync(join(MODEL, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> };
  const victim = 'model.layers.2.post_attention_layernorm.weight';
  assert.ok(victim in index.weight_map);
  delete index.weight_map[victim];
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
  await assert.rejects(makeEngine({ modelPath: dir, ppSize: 2 }), /pipeline-parallel start-up failed: PP stage 1 TP rank 0 \(rank 1\): checkpoint .* is missing tensor 'model\.layers\.2\.post_attention_layernorm\.weight'/);
});

// The engine under TP/EP (ranks as worker threads of the core, executor/tp_runner.ts): served requests on the MiniMax
// fixture with tp 2 × ep 2 give the tp 1 engine's tokens and logprobs, under continuous batching, chunked prefill +
// mixed chunks, the radix cache, retraction, n > 1, abort and /flush_cache; shutdown stops every rank; a rank that
// cannot load stops start-up with an error naming it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, SHARED_MISSING } from './helpers/paths.js';
import { tempDir } from './helpers/tmp.js';

const MODEL = join(FIXTURES_DIR, 'tiny-minimax-m2');
const golden = SHARED_MISSING !== null ? { prompts: [] } : (JSON.parse(readFileSync(join(MODEL, 'golden.json'), 'utf8')) as { prompts: { tokens: number[]; greedy: { tokens: number[] } }[] });

function makeEngine(o: Partial<EngineOptions> = {}): Promise<Engine> {
  return Engine.create({ modelPath: MODEL, skipTokenizerInit: true, useWorkerThread: false, recordStepStats: true, numThreads: 1, maxTotalTokens: 4096, contextLength: 512, ...o });
}

async function collect(it: AsyncIterable<GenerateOutput>, onFirst?: () => void): Promise<{ ids: number[]; last: GenerateOutput; logprobs: number[] }> {
  const ids: number[] = [];
  const logprobs: number[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of it) {
    if (last === null) onFirst?.();
    ids.push(...o.outputIds);
    for (const lp of o.logprobs?.outputTokenLogprobs ?? []) logprobs.push(lp[0]);
    last = o;
  }
  return { ids, last: last!, logprobs };
}

const gen = (e: Engine, rid: string, inputIds: number[], n: number, onFirst?: () => void) =>
  collect(e.generate({ rid, inputIds, stream: true, returnLogprob: true, samplingParams: { temperature: 0, maxNewTokens: n, ignoreEos: true } }), onFirst);

const PROMPTS = (): number[][] => {
  const [p1, p7, p45, p100] = golden.prompts.map((p) => p.tokens);
  return [p7, p45, p100.slice(0, 30), p45.slice(0, 20).concat([5, 6, 7]), p100.slice(50, 60), p1, p100];
};

test('engine tp 2 × ep 2: the tp 1 outputs and logprobs under batching, chunked + mixed prefill, radix hits, retraction, n > 1; flush frees the pool', NEEDS_SHARED, async () => {
  const prompts = PROMPTS();
  const ref = await makeEngine();
  const alone: { ids: number[]; logprobs: number[] }[] = [];
  for (let i = 0; i < prompts.length; i++) alone.push(await gen(ref, `r${i}`, prompts[i], 24));
  await ref.shutdown();

  const e = await makeEngine({ tpSize: 2, epSize: 2, chunkedPrefillSize: 16, enableMixedChunk: true, pageSize: 4, maxTotalTokens: 160, scheduleConservativeness: 0.3 });
  try {
    // the others arrive once t0 decodes (a mixed step; the small pool then retracts), however slow the machine
    let t0Decoding!: () => void;
    const started = new Promise<void>((resolve) => { t0Decoding = resolve; });
    const first = gen(e, 't0', prompts[0], 24, t0Decoding);
    await started;
    const rs = [await first, ...(await Promise.all(prompts.slice(1).map((p, i) => gen(e, `t${i + 1}`, p, 24))))];
    rs.forEach((r, i) => {
      assert.deepEqual(r.ids, alone[i].ids, `t${i} tokens`);
      r.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - alone[i].logprobs[j]) < 1e-4, `t${i} logprob ${j}: ${lp} vs ${alone[i].logprobs[j]}`));
    });
    // the golden greedy continuations (first 12)
    golden.prompts.forEach((p) => {
      const i = prompts.findIndex((q) => q === p.tokens);
      if (i >= 0) assert.deepEqual(rs[i].ids.slice(0, 16), p.greedy.tokens.slice(0, 16));
    });
    const stats = e.inProcessCore!.scheduler.statsHistory;
    assert.ok(stats.some((s) => s.hasUnfinishedChunk), 'a chunked prefill ran');
    assert.ok(stats.some((s) => s.forwardMode === 'decode' && s.numDecodeReqs >= 3), 'batched decodes ran');
    assert.ok(stats.some((s) => s.numRetracted > 0), 'the small pool retracted');
    // radix cache hit: the same prompt again reuses its cached prefix
    await gen(e, 'warm', prompts[1], 24);
    const hit = await gen(e, 'hit', prompts[1], 24);
    assert.deepEqual(hit.ids, alone[1].ids);
    assert.ok(hit.last.cachedTokens > 0, 'cached tokens');
    // n > 1: every greedy sample is the same continuation
    const outs: GenerateOutput[] = [];
    for await (const o of e.generate({ rid: 'n2', inputIds: prompts[0], stream: false, samplingParams: { temperature: 0, maxNewTokens: 6, ignoreEos: true, n: 2 } })) outs.push(o);
    const byIndex = new Map<number, number[]>();
    for (const o of outs) byIndex.set(o.index, [...(byIndex.get(o.index) ?? []), ...o.outputIds]);
    assert.equal(byIndex.size, 2);
    for (const ids of byIndex.values()) assert.deepEqual(ids, alone[0].ids.slice(0, 6));
    // abort mid-stream: the request finishes with abort, the others are unaffected
    const ac = e.generate({ rid: 'ab', inputIds: prompts[2], stream: true, samplingParams: { temperature: 0, maxNewTokens: 200, ignoreEos: true } });
    let last: GenerateOutput | null = null;
    let n = 0;
    for await (const o of ac) {
      last = o;
      if (++n === 2) e.abort('ab');
    }
    assert.equal(last!.finishReason?.type, 'abort');
    assert.equal(await e.flushCache(), true);
    const a = e.inProcessCore!.scheduler.mem.allocator;
    assert.equal(a.availableSize(), a.size, 'KV pool 100% free after flush');
    const again = await gen(e, 'again', prompts[3], 24);
    assert.deepEqual(again.ids, alone[3].ids);
  } finally {
    await e.shutdown();
  }
});

test('engine tp 2 × ep 2: a rank that cannot load its shard stops start-up with an error naming that rank', NEEDS_SHARED, async () => {
  // A copy of the fixture whose index drops expert 15's w1 — held by EP rank 1 only at ep 2 — so only rank 1 fails.
  const dir = tempDir('tsglang-tp-bad-');
  for (const f of readdirSync(MODEL)) if (f !== 'model.safetensors.index.json') copyFileSync(join(MODEL, f), join(dir, f));
  const index = JSON.parse(readFileSync(join(MODEL, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> };
  const victim = 'model.layers.0.block_sparse_moe.experts.15.w1.weight';
  assert.ok(victim in index.weight_map);
  delete index.weight_map[victim];
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify(index));
  await assert.rejects(makeEngine({ modelPath: dir, tpSize: 2, epSize: 2 }), /tensor-parallel start-up failed: TP rank 1: checkpoint .* is missing tensor 'model\.layers\.0\.block_sparse_moe\.experts\.15\.w1\.weight'/);
});

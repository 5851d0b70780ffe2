// Data parallelism (engine/dp_controller.ts, executor/dp_attention_runner.ts): on both golden fixtures the engine under
// --enable-dp-attention (tp 2 × dp 2: attn_tp 1; tp 4 × dp 2: attn_tp 2 with a 2-way MoE; tp 4 × dp 4) and under plain
// DP replicas gives the golden greedy continuations and the tp 1 engine's logprobs (1e-4) for concurrent requests
// spread over the groups; a group left idle while another decodes keeps stepping (idle batches), an abort in one group
// leaves the others alone; the load balancer's methods; per-group load in getLoad().dpLoads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DpLoadBalancer } from '../src/engine/dp_controller.js';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, SHARED_MISSING } from './helpers/paths.js';

interface Golden { prompts: { tokens: number[]; greedy: { tokens: number[] } }[] }
const goldenOf = (fixture: string): Golden => (SHARED_MISSING !== null ? { prompts: [] } : JSON.parse(readFileSync(join(FIXTURES_DIR, fixture, 'golden.json'), 'utf8')) as Golden);

const engine = (fixture: string, o: Partial<EngineOptions> = {}): Promise<Engine> =>
  Engine.create({ modelPath: join(FIXTURES_DIR, fixture), skipTokenizerInit: true, numThreads: 1, maxTotalTokens: 2048, contextLength: 512, logLevel: 'error', ...o });

async function gen(e: Engine, rid: string, inputIds: number[], n: number, onFirst?: () => void): Promise<{ ids: number[]; logprobs: number[]; last: GenerateOutput }> {
  const ids: number[] = [];
  const logprobs: number[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of e.generate({ rid, inputIds, stream: true, returnLogprob: true, samplingParams: { temperature: 0, maxNewTokens: n, ignoreEos: true } })) {
    if (last === null) onFirst?.();
    ids.push(...o.outputIds);
    for (const lp of o.logprobs?.outputTokenLogprobs ?? []) logprobs.push(lp[0]);
    last = o;
  }
  return { ids, logprobs, last: last! };
}

const LAYOUTS: readonly [string, Partial<EngineOptions>][] = [
  ['tiny-deepseek-v32', { tpSize: 2, dpSize: 2, enableDpAttention: true }],
  ['tiny-deepseek-v32', { tpSize: 4, dpSize: 2, enableDpAttention: true, epSize: 2 }],
  ['tiny-minimax-m2', { tpSize: 4, dpSize: 2, enableDpAttention: true }],
  ['tiny-minimax-m2', { tpSize: 4, dpSize: 4, enableDpAttention: true, epSize: 4 }],
  ['tiny-minimax-m2', { tpSize: 1, dpSize: 2 }],
];

for (const fixture of ['tiny-deepseek-v32', 'tiny-minimax-m2']) {
  test(`${fixture}: DP-attention and DP replicas give the golden greedy tokens and the tp 1 logprobs, requests on every group`, NEEDS_SHARED, async () => {
    const golden = goldenOf(fixture);
    const prompts = golden.prompts.map((p) => p.tokens);
    const ref = await engine(fixture, { useWorkerThread: false });
    const want: { ids: number[]; logprobs: number[] }[] = [];
    try {
      for (let i = 0; i < prompts.length; i++) want.push(await gen(ref, `ref${i}`, prompts[i], 16));
    } finally {
      await ref.shutdown();
    }
    want.forEach((w, i) => assert.deepEqual(w.ids, golden.prompts[i].greedy.tokens, `tp 1 prompt ${i} vs golden`));
    for (const [fx, layout] of LAYOUTS.filter(([f]) => f === fixture)) {
      const name = `${fx} tp ${layout.tpSize} dp ${layout.dpSize}${layout.enableDpAttention ? ' dp-attention' : ''} ep ${layout.epSize ?? 1}`;
      const e = await engine(fx, layout);
      try {
        const got = await Promise.all(prompts.map((p, i) => gen(e, `r${i}`, p, 16)));
        got.forEach((g, i) => {
          assert.deepEqual(g.ids, want[i].ids, `${name} prompt ${i} tokens`);
          g.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - want[i].logprobs[j]) < 1e-4, `${name} prompt ${i} logprob ${j}: ${lp} vs ${want[i].logprobs[j]}`));
        });
        const load = await e.getLoad();
        assert.equal(load.dpLoads?.length, layout.dpSize, `${name}: one load per DP rank`);
        // round robin put the prompts on every group: each group's prefix cache now holds tokens
        assert.ok(load.dpLoads!.every((l) => l.evictableTokens > 0), `${name}: every group served a request (${load.dpLoads!.map((l) => l.evictableTokens).join(', ')})`);
      } finally {
        await e.shutdown();
      }
    }
  });
}

test('DP-attention: an idle group steps with idle batches while another decodes; an abort in one group leaves the others alone', NEEDS_SHARED, async () => {
  const golden = goldenOf('tiny-minimax-m2');
  const [p0, p1] = golden.prompts.map((p) => p.tokens);
  const ref = await engine('tiny-minimax-m2', { useWorkerThread: false });
  const long = await gen(ref, 'l', p0, 48);
  const short = await gen(ref, 's', p1, 4);
  await ref.shutdown();
  const e = await engine('tiny-minimax-m2', { tpSize: 2, dpSize: 2, enableDpAttention: true });
  try {
    // group 0 decodes 48 tokens; group 1 runs 4 and then idles (its idle batches keep group 0's MoE collectives fed)
    const [a, b] = await Promise.all([gen(e, 'a', p0, 48), gen(e, 'b', p1, 4)]);
    assert.deepEqual(a.ids, long.ids);
    assert.deepEqual(b.ids, short.ids);
    // an abort in group 0 mid-decode; group 1's request is unaffected, and both groups serve afterwards
    let started!: () => void;
    const first = new Promise<void>((r) => { started = r; });
    const victim = gen(e, 'victim', p0, 400, started);
    await first;
    const other = gen(e, 'other', p1, 4);
    e.abort('victim');
    const [v, o] = await Promise.all([victim, other]);
    assert.equal(v.last.finishReason?.type, 'abort');
    assert.ok(v.ids.length < 400);
    assert.deepEqual(o.ids, short.ids);
    const after = await Promise.all([gen(e, 'x', p0, 48), gen(e, 'y', p1, 4)]);
    assert.deepEqual(after.map((r) => r.ids), [long.ids, short.ids]);
    const load = await e.getLoad();
    assert.deepEqual(load.dpLoads!.map((l) => l.numRunningReqs), [0, 0]);
  } finally {
    await e.shutdown();
  }
});

test('DP replicas: a request naming data_parallel_rank runs on that rank (the router\'s --dp-aware), the others by the balancer', NEEDS_SHARED, async () => {
  const e = await engine('tiny-minimax-m2', { tpSize: 1, dpSize: 2 });
  try {
    const prompt = goldenOf('tiny-minimax-m2').prompts[0].tokens;
    for (let i = 0; i < 3; i++) {
      for await (const o of e.generate({ rid: `pin${i}`, inputIds: prompt, dataParallelRank: 1, samplingParams: { temperature: 0, maxNewTokens: 2 } })) void o;
    }
    const load = await e.getLoad();
    assert.equal(load.dpLoads![0].evictableTokens, 0, 'rank 0 served nothing');
    assert.ok(load.dpLoads![1].evictableTokens > 0, 'rank 1 served the pinned requests');
  } finally {
    await e.shutdown();
  }
});

test('DP load balancer: round_robin / auto cycle, shortest_queue takes the fewest requests, minimum_tokens the fewest tokens', () => {
  const rr = new DpLoadBalancer(3, 'round_robin');
  assert.deepEqual([rr.pick(), rr.pick(), rr.pick(), rr.pick()], [0, 1, 2, 0]);
  const auto = new DpLoadBalancer(2);
  assert.deepEqual([auto.pick(), auto.pick(), auto.pick()], [0, 1, 0]);
  const sq = new DpLoadBalancer(3, 'shortest_queue');
  sq.reqs.splice(0, 3, 2, 0, 1);
  assert.equal(sq.pick(), 1);
  sq.reqs.splice(0, 3, 1, 1, 1);
  assert.equal(sq.pick(), 2); // a tie goes to the next rank after the last pick
  const mt = new DpLoadBalancer(2, 'minimum_tokens');
  mt.tokens.splice(0, 2, 500, 20);
  assert.equal(mt.pick(), 1);
  assert.throws(() => new DpLoadBalancer(2, 'random'), /invalid choice: 'random'/);
});

test('DP-attention tp 2 × dp 2 (DeepSeek): chunked + mixed prefill, pages, retraction in a small pool, radix hits, n > 1, flush: the tp 1 tokens', NEEDS_SHARED, async () => {
  const golden = goldenOf('tiny-deepseek-v32');
  const base = golden.prompts.map((p) => p.tokens);
  const prompts = [...base, base[2].slice(0, 30), base[1].concat([5, 6, 7])];
  const ref = await engine('tiny-deepseek-v32', { useWorkerThread: false });
  const want: number[][] = [];
  for (let i = 0; i < prompts.length; i++) want.push((await gen(ref, `ref${i}`, prompts[i], 20)).ids);
  await ref.shutdown();
  const e = await engine('tiny-deepseek-v32', { tpSize: 2, dpSize: 2, enableDpAttention: true, chunkedPrefillSize: 16, enableMixedChunk: true, pageSize: 4, maxTotalTokens: 136, scheduleConservativeness: 0.3 });
  try {
    const got = await Promise.all(prompts.map((p, i) => gen(e, `c${i}`, p, 20)));
    got.forEach((g, i) => assert.deepEqual(g.ids, want[i], `prompt ${i} (${JSON.stringify(g.last.finishReason)})`));
    const hit = await gen(e, 'hit', prompts[1], 20); // round robin: the group that served c1 served nothing since? either way cached on one
    const hit2 = await gen(e, 'hit2', prompts[1], 20);
    assert.deepEqual([hit.ids, hit2.ids], [want[1], want[1]]);
    assert.ok(hit.last.cachedTokens > 0 || hit2.last.cachedTokens > 0, 'a radix hit in one group');
    const outs: GenerateOutput[] = [];
    for await (const o of e.generate({ rid: 'n2', inputIds: prompts[0], stream: false, samplingParams: { temperature: 0, maxNewTokens: 6, ignoreEos: true, n: 2 } })) outs.push(o);
    assert.deepEqual(outs.map((o) => o.outputIds), [want[0].slice(0, 6), want[0].slice(0, 6)]);
    const load = await e.getLoad();
    assert.ok(load.numRetractedReqs > 0, `the small pools retracted (${load.dpLoads!.map((l) => l.numRetractedReqs).join(', ')})`);
    assert.equal(await e.flushCache(), true);
    const after = await e.getLoad();
    assert.deepEqual(after.dpLoads!.map((l) => l.numUsedTokens + l.evictableTokens), [0, 0], 'every group\'s pool is free after flush');
  } finally {
    await e.shutdown();
  }
});

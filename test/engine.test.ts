// Engine tests on the real tiny MiniMax-M2 fixture (in-process core, token ids in/out): golden greedy tokens,
// batch invariance (alone / batch of 8 / chunked prefill / prefix-cache hit / retraction), per-step statistics,
// KV pool fully free after flush, abort.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import type { ForwardBatch } from '../src/layers/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, readSharedJson, SHARED_MISSING } from './helpers/paths.js';

const MODEL = join(FIXTURES_DIR, 'tiny-minimax-m2');
const golden = readSharedJson<unknown>(join(MODEL, 'golden.json'), { prompts: [] }) as {
  prompts: { name: string; tokens: number[]; greedy: { tokens: number[] } }[];
};

async function makeEngine(o: Partial<EngineOptions> = {}): Promise<Engine> {
  return Engine.create({
    modelPath: MODEL,
    skipTokenizerInit: true,
    useWorkerThread: false,
    recordStepStats: true,
    numThreads: 1,
    maxTotalTokens: 4096,
    contextLength: 512,
    ...o,
  });
}

/** Concatenates a request's outputs; `onFirst` runs when the first output arrives. */
async function collect(it: AsyncIterable<GenerateOutput>, onFirst?: () => void): Promise<{ ids: number[]; last: GenerateOutput; n: number }> {
  const ids: number[] = [];
  let last: GenerateOutput | null = null;
  let n = 0;
  for await (const o of it) {
    ids.push(...o.outputIds);
    last = o;
    if (n++ === 0) onFirst?.();
  }
  return { ids, last: last!, n };
}

function gen(e: Engine, rid: string, inputIds: number[], maxNewTokens: number, stream = false, onFirst?: () => void) {
  return collect(e.generate({ rid, inputIds, stream, samplingParams: { temperature: 0, maxNewTokens, ignoreEos: true } }), onFirst);
}

// Prompts: the golden ones plus variants (shared prefixes for the cache, lengths for chunking).
const P7 = golden.prompts.find((p) => p.name === 'len7')!;
const P45 = golden.prompts.find((p) => p.name === 'len45')!;
const P100 = golden.prompts.find((p) => p.name === 'len100')!;
const PROMPTS: number[][] = SHARED_MISSING !== null ? [] : [
  P7.tokens,
  P45.tokens,
  P100.tokens.slice(0, 30),
  P100.tokens.slice(10, 22),
  P45.tokens.slice(0, 20).concat([5, 6, 7]),
  P100.tokens.slice(50, 60),
  P45.tokens.slice(5, 40),
  [1, 2, 3, 4, 5, 6, 7, 8, 9],
];
const N_NEW = 8;

test('engine greedy output equals the fixture goldens (prefill + KV-cache decode)', NEEDS_SHARED, async () => {
  const e = await makeEngine();
  for (const p of [P7, P45, P100]) {
    const r = await gen(e, `g-${p.name}`, p.tokens, 16);
    assert.deepEqual(r.ids, p.greedy.tokens, p.name);
    assert.deepEqual(r.last.finishReason, { type: 'length', length: 16 });
    assert.equal(r.last.promptTokens, p.tokens.length);
    assert.equal(r.last.completionTokens, 16);
  }
  await e.shutdown();
});

test('batch invariance: alone = batch of 8 (a decode step with 8 running) = chunked = after a prefix hit; pool 100% free after flush', NEEDS_SHARED, async () => {
  const alone: number[][] = [];
  {
    const e = await makeEngine();
    for (let i = 0; i < PROMPTS.length; i++) alone.push((await gen(e, `a${i}`, PROMPTS[i], N_NEW)).ids);
    await e.shutdown();
  }
  // Batch of 8, streaming (deltas concatenate to the same ids).
  {
    const e = await makeEngine();
    const rs = await Promise.all(PROMPTS.map((p, i) => gen(e, `b${i}`, p, N_NEW, true)));
    rs.forEach((r, i) => assert.deepEqual(r.ids, alone[i], `batch b${i}`));
    assert.ok(rs.every((r) => r.n > 1), 'streaming emitted several outputs');
    const stats = e.inProcessCore!.scheduler.statsHistory;
    assert.ok(stats.some((s) => s.forwardMode === 'decode' && s.numDecodeReqs >= 8), 'decode step with ≥ 8 running requests');
    // Prefix-cache hit: re-run two prompts whose prefixes are now cached.
    const hit = await gen(e, 'hit', PROMPTS[1], N_NEW);
    assert.deepEqual(hit.ids, alone[1]);
    assert.equal(hit.last.cachedTokens, PROMPTS[1].length - 1);
    const part = await gen(e, 'part', PROMPTS[4], N_NEW);
    assert.deepEqual(part.ids, alone[4]);
    assert.ok(part.last.cachedTokens >= 20);
    assert.equal(await e.flushCache(), true);
    const a = e.inProcessCore!.scheduler.mem.allocator;
    assert.equal(a.availableSize(), a.size, 'KV pool 100% free');
    await e.shutdown();
  }
  // Chunked prefill (chunk 8) + mixed chunk; page size 4.
  {
    const e = await makeEngine({ chunkedPrefillSize: 8, enableMixedChunk: true, pageSize: 4 });
    const rs = await Promise.all(PROMPTS.map((p, i) => gen(e, `c${i}`, p, N_NEW)));
    rs.forEach((r, i) => assert.deepEqual(r.ids, alone[i], `chunked c${i}`));
    const stats = e.inProcessCore!.scheduler.statsHistory;
    assert.ok(stats.some((s) => s.hasUnfinishedChunk));
    assert.ok(stats.every((s) => s.numExtendTokens <= 8));
    assert.equal(await e.flushCache(), true);
    const a = e.inProcessCore!.scheduler.mem.allocator;
    assert.equal(a.availableSize(), a.size);
    await e.shutdown();
  }
});

test('mixed extend+decode step and retraction under a tiny --max-total-tokens keep outputs identical', NEEDS_SHARED, async () => {
  const alone: number[][] = [];
  {
    const e = await makeEngine();
    for (let i = 0; i < 6; i++) alone.push((await gen(e, `a${i}`, PROMPTS[i], 24)).ids);
    await e.shutdown();
  }
  const e = await makeEngine({ maxTotalTokens: 160, scheduleConservativeness: 0.3, enableMixedChunk: true });
  // the others arrive once m0 has streamed its first token, so m0 is decoding then (a mixed step, and the tiny pool
  // retracts), however late a timer would fire on a loaded machine
  let m0Decoding!: () => void;
  const m0Started = new Promise<void>((resolve) => { m0Decoding = resolve; });
  const first = gen(e, 'm0', PROMPTS[0], 24, true, m0Decoding);
  await m0Started;
  const rest = await Promise.all(PROMPTS.slice(1, 6).map((p, i) => gen(e, `m${i + 1}`, p, 24)));
  const all = [await first, ...rest];
  all.forEach((r, i) => assert.deepEqual(r.ids, alone[i], `m${i}`));
  const stats = e.inProcessCore!.scheduler.statsHistory;
  assert.ok(stats.some((s) => s.forwardMode === 'mixed' && s.numExtendReqs >= 1 && s.numDecodeReqs >= 1), 'a mixed step');
  assert.ok(stats.reduce((n, s) => n + s.numRetracted, 0) > 0, 'retractions happened');
  assert.ok(all.some((r) => r.last.numRetractions > 0));
  assert.equal(await e.flushCache(), true);
  const a = e.inProcessCore!.scheduler.mem.allocator;
  assert.equal(a.availableSize(), a.size);
  await e.shutdown();
});

test('abort (signal) ends the request with finish_reason abort and frees its KV; validation errors reject first next()', NEEDS_SHARED, async () => {
  const e = await makeEngine();
  const ac = new AbortController();
  const it = e.generate({ rid: 'ab', inputIds: P45.tokens, stream: true, samplingParams: { temperature: 0, maxNewTokens: 200, ignoreEos: true } }, ac.signal);
  let last: GenerateOutput | null = null;
  for await (const o of it) {
    last = o;
    if (o.completionTokens >= 2) ac.abort();
  }
  assert.equal(last!.finishReason!.type, 'abort');
  assert.equal(await e.flushCache(), true);
  const a = e.inProcessCore!.scheduler.mem.allocator;
  assert.equal(a.availableSize(), a.size);
  await assert.rejects(collect(e.generate({ rid: 'bad', inputIds: [1, 2], samplingParams: { topP: 2 } })), /top_p must be in \(0, 1\], got 2\./);
  await assert.rejects(
    collect(e.generate({ rid: 'long', inputIds: new Array(600).fill(3) })),
    /The input \(600 tokens\) is longer than the model's context length \(512 tokens\)\./,
  );
  await assert.rejects(
    collect(e.generate({ rid: 'sum', inputIds: new Array(500).fill(3), samplingParams: { maxNewTokens: 20 } })),
    /Requested token count exceeds the model's maximum context length of 512 tokens\. You requested a total of 520 tokens: 500 tokens from the input messages and 20 tokens for the completion\./,
  );
  await e.shutdown();
});

test('n > 1 with a seed: choices are reproducible and carry their index; logprobs returned', NEEDS_SHARED, async () => {
  const e = await makeEngine();
  let nRuns = 0;
  const run = async () => {
    const outs: GenerateOutput[] = [];
    for await (const o of e.generate({ rid: `n${++nRuns}`, inputIds: P7.tokens, returnLogprob: true, topLogprobsNum: 2, logprobStartLen: 0, samplingParams: { n: 3, seed: 11, maxNewTokens: 6, ignoreEos: true, temperature: 1 } })) outs.push(o);
    return outs.sort((x, y) => x.index - y.index);
  };
  const a = await run();
  const b = await run();
  assert.deepEqual(a.map((o) => o.index), [0, 1, 2]);
  assert.deepEqual(a.map((o) => o.outputIds), b.map((o) => o.outputIds));
  assert.notDeepEqual(a[0].outputIds, a[1].outputIds, 'choices sample independently');
  const plain: GenerateOutput[] = [];
  for await (const o of e.generate({ rid: 'plain', inputIds: P45.tokens, samplingParams: { n: 2, seed: 3, maxNewTokens: 2 } })) plain.push(o);
  assert.ok(plain.every((o) => o.cachedTokens === P45.tokens.length - 1), 'choices reuse the prefilled prompt');
  const lp = a[0].logprobs!;
  assert.equal(lp.outputTokenLogprobs.length, 6);
  assert.equal(lp.outputTopLogprobs[0].length, 2);
  assert.equal(lp.inputTokenLogprobs!.length, P7.tokens.length);
  assert.deepEqual(lp.inputTokenLogprobs![0], [null, P7.tokens[0]]);
  assert.ok(lp.outputTokenLogprobs.every(([v, id], i) => v <= 0 && id === a[0].outputIds[i]));
  await e.shutdown();
});

test('DeepSeek-V3.2 fixture (MLA + DSA KV layout): all golden prompts batched with chunked prefill give the golden greedy tokens', NEEDS_SHARED, async () => {
  const dir = join(FIXTURES_DIR, 'tiny-deepseek-v32');
  const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as typeof golden;
  const e = await makeEngine({ modelPath: dir, chunkedPrefillSize: 8, pageSize: 2 });
  const rs = await Promise.all(g.prompts.map((p) => gen(e, p.name, p.tokens, 16)));
  rs.forEach((r, i) => assert.deepEqual(r.ids, g.prompts[i].greedy.tokens, g.prompts[i].name));
  assert.ok(e.inProcessCore!.scheduler.statsHistory.some((s) => s.hasUnfinishedChunk));
  assert.equal(await e.flushCache(), true);
  const a = e.inProcessCore!.scheduler.mem.allocator;
  assert.equal(a.availableSize(), a.size);
  await e.shutdown();
});

test('KV pool sized from memory commits storage only for the pages used', NEEDS_SHARED, async () => {
  const e = await makeEngine({ maxTotalTokens: null, contextLength: null });
  const cap = e.info.maxTotalNumTokens;
  assert.ok(cap > 100_000, `capacity from RAM: ${cap}`);
  const r = await gen(e, 'm', P45.tokens, 4);
  assert.equal(r.ids.length, 4);
  const pool = e.inProcessCore!.scheduler.runner.kvPool;
  assert.ok(pool.committedLocs <= 256, `committed ${pool.committedLocs} locs of ${pool.maxLocs}`);
  await e.shutdown();
});

test('an input id ≥ the model\'s vocabulary is refused up front with SGLang\'s message; a running request is undisturbed', NEEDS_SHARED, async () => {
  const e = await makeEngine();
  let refused: Promise<unknown> | null = null;
  const ok = await gen(e, 'ok', P45.tokens, 16, true, () => {
    refused = collect(e.generate({ rid: 'oov', inputIds: [1, 600, 2], samplingParams: { maxNewTokens: 2 } })).then(() => null, (err: unknown) => err);
  });
  const err = (await refused!) as Error;
  assert.equal(err?.name, 'InvalidRequestError');
  assert.equal(err.message, 'The input_ids [1, 600, 2] contains values greater than the vocab size (512).');
  assert.deepEqual(ok.ids, P45.greedy.tokens);
  assert.deepEqual(ok.last.finishReason, { type: 'length', length: 16 });
  await e.shutdown();
});

test('a step that throws fails only the request it is pinned on, with an error its client receives; the running request finishes unchanged', { timeout: 60_000 }, async () => {
  const { FakeModel } = await import('../src/scheduler/fake_model.case.js');
  const POISON = 63;
  class PoisonModel extends FakeModel {
    override forward(b: ForwardBatch) {
      for (let t = 0; t < b.numTokens; t++) if (b.positions[t] === 0 && b.inputIds[t] === POISON) throw new Error('poisoned');
      return super.forward(b);
    }
  }
  const make = (enableMixedChunk: boolean) => Engine.create(
    { modelPath: '/nonexistent-fake-model', skipTokenizerInit: true, useWorkerThread: false, maxTotalTokens: 1024, contextLength: 256, enableMixedChunk },
    undefined,
    { model: new PoisonModel(64), architecture: 'FakeForCausalLM', vocabSize: 64, maxPositionEmbeddings: 256, eosTokenIds: [0] },
  );
  const okPrompt = [5, 9, 14, 2, 33];
  const sp = { temperature: 0, maxNewTokens: 40, ignoreEos: true };
  let want: number[];
  {
    const e = await make(false);
    want = (await collect(e.generate({ rid: 'alone', inputIds: okPrompt, samplingParams: sp }))).ids;
    await e.shutdown();
  }
  assert.equal(want.length, 40);
  for (const mixed of [false, true]) {
    const e = await make(mixed);
    let bad: Promise<{ ids: number[]; last: GenerateOutput }> | null = null;
    const ok = await collect(e.generate({ rid: 'ok', inputIds: okPrompt, stream: true, samplingParams: sp }), () => {
      bad = collect(e.generate({ rid: 'bad', inputIds: [POISON, 1, 2, 3], stream: true, samplingParams: sp }));
    });
    const b = await bad!;
    assert.deepEqual(b.ids, []);
    assert.deepEqual(b.last.finishReason, { type: 'abort', message: 'The engine failed to run this request: poisoned', statusCode: 500 }, `mixed ${mixed}`);
    assert.deepEqual(ok.ids, want, `mixed ${mixed}`);
    assert.deepEqual(ok.last.finishReason, { type: 'length', length: 40 });
    assert.equal(e.numInFlight, 0);
    assert.equal(await e.flushCache(), true);
    const a = e.inProcessCore!.scheduler.mem.allocator;
    assert.equal(a.availableSize(), a.size);
    await e.shutdown();
  }
});

// Speculative decoding on the tiny DeepSeek-V3.2 fixture (in-process engine, token ids in/out): greedy output equals
// the golden greedy tokens for EAGLE (the checkpoint's MTP layer as the draft) at (1,1,2), (2,1,3), (3,1,4) and the
// tree (3,4,8), alone and in a batch, chunked, paged, after prefix hits and with the Index Cache; the first draft is
// the MTP golden's prediction; a STANDALONE self-draft accepts every draft token; sampling with a seed reproduces;
// the KV pool is 100 % free after every flush (also after an abort mid-run).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, readSharedJson, SHARED_MISSING } from './helpers/paths.js';

const MODEL = join(FIXTURES_DIR, 'tiny-deepseek-v32');
interface GoldenPrompt { name: string; tokens: number[]; greedy: { tokens: number[] }; mtp: { argmax: number[] } }
const golden = readSharedJson<{ prompts: GoldenPrompt[] }>(join(MODEL, 'golden.json'), { prompts: [] });
const N_NEW = 16;

async function makeEngine(o: Partial<EngineOptions>): Promise<Engine> {
  return Engine.create({
    modelPath: MODEL, skipTokenizerInit: true, useWorkerThread: false, recordStepStats: true, numThreads: 1, maxTotalTokens: 4096,
    contextLength: 512, speculativeAlgorithm: 'EAGLE', ...o,
  });
}

async function collect(it: AsyncIterable<GenerateOutput>): Promise<{ ids: number[]; last: GenerateOutput }> {
  const ids: number[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of it) {
    ids.push(...o.outputIds);
    last = o;
  }
  return { ids, last: last! };
}

function gen(e: Engine, rid: string, inputIds: number[], maxNewTokens = N_NEW, extra: Record<string, unknown> = {}) {
  return collect(e.generate({ rid, inputIds, samplingParams: { temperature: 0, maxNewTokens, ignoreEos: true, ...extra } }));
}

async function assertPoolFree(e: Engine): Promise<void> {
  assert.equal(await e.flushCache(), true);
  const a = e.inProcessCore!.scheduler.mem.allocator;
  assert.equal(a.availableSize(), a.size, 'KV pool 100% free after flush');
}

const PROMPTS = SHARED_MISSING !== null ? [] : golden.prompts;

test('EAGLE (MTP draft) greedy == golden for (1,1,2), (2,1,3), (3,1,4), tree (3,4,8): alone, batched, chunked + paged, prefix hits', NEEDS_SHARED, async () => {
  for (const [steps, topk, draft] of [[1, 1, 2], [2, 1, 3], [3, 1, 4], [3, 4, 8]]) {
    const tag = `(${steps},${topk},${draft})`;
    const e = await makeEngine({ speculativeNumSteps: steps, speculativeEagleTopk: topk, speculativeNumDraftTokens: draft });
    assert.deepEqual(e.info.speculative, { algorithm: 'EAGLE', numSteps: steps, topk, numDraftTokens: draft });
    for (const p of PROMPTS) {
      const r = await gen(e, `${tag}-${p.name}`, p.tokens);
      assert.deepEqual(r.ids, p.greedy.tokens, `${tag} ${p.name} alone`);
      const s = r.last.spec!;
      assert.ok(s.verifyCt >= Math.ceil((N_NEW - 1) / draft) && s.verifyCt <= N_NEW - 1, `${tag} verify count ${s.verifyCt}`);
    }
    // all prompts in one batch (requests at different accept lengths), then again: prefix hits
    for (const round of ['batch', 'hit']) {
      const rs = await Promise.all(PROMPTS.map((p) => gen(e, `${tag}-${round}-${p.name}`, p.tokens)));
      rs.forEach((r, i) => assert.deepEqual(r.ids, PROMPTS[i].greedy.tokens, `${tag} ${round} ${PROMPTS[i].name}`));
      if (round === 'hit') assert.ok(rs.some((r) => r.last.cachedTokens > 0), 'prefix hits');
    }
    const stats = e.inProcessCore!.scheduler.statsHistory;
    assert.ok(stats.some((st) => st.forwardMode === 'decode' && st.numDecodeReqs >= PROMPTS.length), `${tag}: a verify step with every request`);
    await assertPoolFree(e);
    await e.shutdown();
  }
  // chunked prefill (chunk 8) on pages of 4 (chains only: trees need page 1)
  const e = await makeEngine({ chunkedPrefillSize: 8, pageSize: 4 });
  const rs = await Promise.all(PROMPTS.map((p) => gen(e, `c-${p.name}`, p.tokens)));
  rs.forEach((r, i) => assert.deepEqual(r.ids, PROMPTS[i].greedy.tokens, `chunked paged ${PROMPTS[i].name}`));
  assert.ok(e.inProcessCore!.scheduler.statsHistory.some((st) => st.hasUnfinishedChunk));
  await assertPoolFree(e);
  await e.shutdown();
});

test('EAGLE: the first draft token after prefill is the MTP golden argmax (draft extend pairs (t_{i+1}, h_i))', NEEDS_SHARED, async () => {
  const e = await makeEngine({ speculativeNumSteps: 1, speculativeEagleTopk: 1, speculativeNumDraftTokens: 2 });
  const sched = e.inProcessCore!.scheduler;
  for (const p of PROMPTS) {
    // one new token: the request finishes at prefill, so catch its draft state on the way
    let first: number | null = null;
    const orig = sched.spec!.afterExtend.bind(sched.spec!);
    sched.spec!.afterExtend = (items, hidden, mem) => {
      orig(items, hidden, mem);
      for (const it of items) if (it.req.rid === `m-${p.name}` && it.req.specTopIds) first = it.req.specTopIds[0];
    };
    await gen(e, `m-${p.name}`, p.tokens, 2);
    sched.spec!.afterExtend = orig;
    assert.equal(first, p.mtp.argmax[p.tokens.length - 1], `${p.name}: MTP draft of the first decode position`);
  }
  await e.shutdown();
});

test('STANDALONE self-draft (the target as its own draft): every greedy verify accepts all drafts; Index Cache; seeded sampling reproduces', NEEDS_SHARED, async () => {
  for (const [steps, draft, pageSize] of [[3, 4, 1], [2, 3, 4]]) {
    const e = await makeEngine({ speculativeAlgorithm: 'STANDALONE', speculativeDraftModelPath: MODEL, speculativeNumSteps: steps, speculativeEagleTopk: 1, speculativeNumDraftTokens: draft, pageSize });
    for (const round of ['cold', 'hit']) {
      const rs = await Promise.all(PROMPTS.map((p) => gen(e, `s-${round}-${p.name}`, p.tokens)));
      rs.forEach((r, i) => {
        assert.deepEqual(r.ids, PROMPTS[i].greedy.tokens, `${round} ${PROMPTS[i].name}`);
        const s = r.last.spec!;
        // 15 tokens after the prefill's first: full verifies of `draft` tokens, the last cut by max_new_tokens
        assert.equal(s.verifyCt, Math.ceil((N_NEW - 1) / draft), `${round} ${PROMPTS[i].name} verify count`);
        assert.equal(s.acceptedTokens, N_NEW - 1 - s.verifyCt, `${round} ${PROMPTS[i].name}: every draft accepted`);
      });
    }
    assert.equal((await e.getLoad()).avgSpecAcceptLength, (PROMPTS.length * 2 * (N_NEW - 1)) / (PROMPTS.length * 2 * Math.ceil((N_NEW - 1) / draft)));
    // an abort mid-run leaves nothing behind
    const it = e.generate({ rid: 'ab', inputIds: PROMPTS[0].tokens, stream: true, samplingParams: { temperature: 0, maxNewTokens: 200, ignoreEos: true } });
    for await (const o of it) if (o.completionTokens > 5) e.abort('ab');
    await assertPoolFree(e);
    await e.shutdown();
  }
  // Index Cache pattern: speculative output == plain output (no golden for this layout)
  const ov = { index_topk_pattern: 'FSS' };
  const plain = await Engine.create({ modelPath: MODEL, skipTokenizerInit: true, useWorkerThread: false, numThreads: 1, maxTotalTokens: 4096, contextLength: 512, jsonModelOverrideArgs: ov });
  const want = await Promise.all(PROMPTS.map((p) => gen(plain, `p-${p.name}`, p.tokens)));
  await plain.shutdown();
  const e = await makeEngine({ jsonModelOverrideArgs: ov, speculativeAlgorithm: 'STANDALONE', speculativeNumSteps: 3, speculativeEagleTopk: 4, speculativeNumDraftTokens: 6 });
  const got = await Promise.all(PROMPTS.map((p) => gen(e, `i-${p.name}`, p.tokens)));
  got.forEach((r, i) => assert.deepEqual(r.ids, want[i].ids, `Index Cache ${PROMPTS[i].name}`));
  // seeded sampling: the same seed reproduces under speculation
  const samp = { temperature: 0.8, topP: 0.9, seed: 42 };
  const a = await gen(e, 'seed-a', PROMPTS[1].tokens, 24, samp);
  const b = await gen(e, 'seed-b', PROMPTS[1].tokens, 24, samp);
  assert.deepEqual(a.ids, b.ids);
  assert.equal(a.ids.length, 24);
  await assertPoolFree(e);
  await e.shutdown();
});

test('speculative under --tp 2 (EAGLE MTP draft unsharded on rank 0, STANDALONE) and under KV pressure (retraction): golden tokens, tp 1 counters', NEEDS_SHARED, async () => {
  const counters = async (o: Partial<EngineOptions>): Promise<{ ids: number[][]; spec: unknown[]; retracted: number }> => {
    const e = await makeEngine(o);
    try {
      const rs = await Promise.all(PROMPTS.map((p) => gen(e, `t-${p.name}`, p.tokens, 24)));
      rs.forEach((r, i) => assert.deepEqual(r.ids.slice(0, N_NEW), PROMPTS[i].greedy.tokens, `${JSON.stringify(o)} ${PROMPTS[i].name}`));
      await assertPoolFree(e);
      return { ids: rs.map((r) => r.ids), spec: rs.map((r) => r.last.spec), retracted: (await e.getLoad()).numRetractedReqs };
    } finally {
      await e.shutdown();
    }
  };
  for (const algo of ['EAGLE', 'STANDALONE']) {
    const base = { speculativeAlgorithm: algo, speculativeNumSteps: 3, speculativeEagleTopk: 1, speculativeNumDraftTokens: 4 };
    const one = await counters(base);
    const two = await counters({ ...base, tpSize: 2, epSize: 2 });
    assert.deepEqual(two.ids, one.ids, `${algo}: tp 2 tokens = tp 1`);
    assert.deepEqual(two.spec, one.spec, `${algo}: tp 2 verify / accept counts = tp 1`);
  }
  // a pool too small for every request at once: retractions, same tokens
  const tight = await counters({ speculativeAlgorithm: 'STANDALONE', speculativeNumSteps: 2, speculativeEagleTopk: 1, speculativeNumDraftTokens: 3, maxTotalTokens: 200, scheduleConservativeness: 0.3 });
  assert.ok(tight.retracted > 0, 'retraction happened');
});

// PD disaggregation with both roles in this process (in-process engines over a fake model whose logits hash the KV of
// every position, so a wrong or missing KV row changes the output), over the tcp backend on loopback:
//   - a prompt longer than --chunked-prefill-size goes out chunk by chunk (the decode side writes each as it arrives),
//     the decode answer equals a plain engine's, and the KV digests of both sides match;
//   - the fake backend answers without a transfer;
//   - the decode engine's fatal error (a model that breaks) fails the request still waiting for its KV and frees the
//     KV it had allocated: the pool is 100 % free;
//   - a request waiting for its KV that its client leaves or /abort_request ends frees its KV (both sides).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import type { ForwardBatch } from '../src/layers/index.js';
import { freePort } from '../bench/serve_child.js';

const { FakeModel } = await import('../src/scheduler/fake_model.case.js');
const V = 64;
const injected = (model: InstanceType<typeof FakeModel>) => ({ model, architecture: 'FakeForCausalLM', vocabSize: V, maxPositionEmbeddings: 512, eosTokenIds: [0] });
const base: EngineOptions = { modelPath: '/nonexistent-fake-model', skipTokenizerInit: true, useWorkerThread: false, maxTotalTokens: 1024, contextLength: 512 };
const sp = { temperature: 0, maxNewTokens: 12, ignoreEos: true };

async function collect(it: AsyncIterable<GenerateOutput>): Promise<{ ids: number[]; last: GenerateOutput }> {
  const ids: number[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of it) {
    ids.push(...o.outputIds);
    last = o;
  }
  return { ids, last: last! };
}

/** A prefill engine (bootstrap server on a free port) and a decode engine. */
async function pdEngines(backend: string, prefillExtra: Partial<EngineOptions> = {}, decodeModel = new FakeModel(V)): Promise<{ p: Engine; d: Engine; bp: number }> {
  const bp = await freePort();
  const pd = { host: '127.0.0.1', bootstrapPort: bp, transferBackend: backend, decodeEnableRadixCache: false };
  const p = await Engine.create({ ...base, ...prefillExtra, disaggregation: { ...pd, mode: 'prefill' } }, undefined, injected(new FakeModel(V)));
  const d = await Engine.create({ ...base, disaggregation: { ...pd, mode: 'decode' } }, undefined, injected(decodeModel));
  return { p, d, bp };
}

let room = 7_000_000;
function both(p: Engine, d: Engine, bp: number, rid: string, inputIds: number[]): Promise<[{ ids: number[]; last: GenerateOutput }, { ids: number[]; last: GenerateOutput }]> {
  const bootstrap = [{ host: '127.0.0.1', port: bp, room: room++ }];
  return Promise.all([collect(p.generate({ rid: `${rid}-p`, inputIds, samplingParams: sp, bootstrap })), collect(d.generate({ rid: `${rid}-d`, inputIds, samplingParams: sp, bootstrap }))]);
}

test('PD in-process (tcp): an 18-token prompt with --chunked-prefill-size 4 goes out in 5 chunks; the decode answer equals a plain engine; KV digests match', async (t) => {
  process.env['TSGLANG_PD_KV_DIGEST'] = '1';
  t.after(() => { delete process.env['TSGLANG_PD_KV_DIGEST']; });
  const prompt = Array.from({ length: 18 }, (_, i) => 1 + ((i * 5) % 60));
  const plain = await Engine.create({ ...base }, undefined, injected(new FakeModel(V)));
  const want = await collect(plain.generate({ rid: 'plain', inputIds: prompt, samplingParams: sp }));
  await plain.shutdown();
  const { p, d, bp } = await pdEngines('tcp', { chunkedPrefillSize: 4 });
  t.after(async () => { await p.shutdown(); await d.shutdown(); });
  const [, dec] = await both(p, d, bp, 'c', prompt);
  assert.deepEqual(dec.ids, want.ids, 'the PD answer differs from the plain engine\'s');
  assert.equal(dec.last.finishReason?.type, 'length');
  const [pl, dl] = await Promise.all([p.getLoad(), d.getLoad()]);
  assert.equal(dl.disaggregation?.kvChunks, 5, JSON.stringify(dl.disaggregation));
  assert.equal(pl.disaggregation?.kvChunks, 5);
  assert.equal(dl.disaggregation?.kvTokens, 18);
  assert.equal(dl.disaggregation?.numPrefillSteps, 0);
  const rm = String(room - 1);
  assert.ok(pl.disaggregation?.kvDigests?.[rm]);
  assert.equal(dl.disaggregation?.kvDigests?.[rm], pl.disaggregation?.kvDigests?.[rm]);
  assert.equal(dl.numUsedTokens, 0);
});

test('PD in-process: the fake backend answers with no transfer (SGLang\'s warm-up backend)', async (t) => {
  const { p, d, bp } = await pdEngines('fake');
  t.after(async () => { await p.shutdown(); await d.shutdown(); });
  const [pr, dr] = await both(p, d, bp, 'f', [3, 4, 5, 6, 7]);
  assert.equal(pr.last.finishReason?.type, 'length');
  assert.equal(dr.ids.length, sp.maxNewTokens);
  assert.equal(dr.ids[0], 0, 'the first token of a fake transfer is 0 (SGLang reads its zeroed metadata buffer)');
  const dl = await d.getLoad();
  assert.equal(dl.disaggregation?.transferBackend, 'fake');
  assert.equal(dl.disaggregation?.kvBytes, 0);
  assert.equal(dl.numUsedTokens, 0);
});

test('PD in-process: the decode engine\'s fatal error fails the request waiting for its KV and frees the KV it allocated', async (t) => {
  let broken: string | null = null;
  class Breaking extends FakeModel {
    override forward(b: ForwardBatch) {
      if (b.numTokens > 0 && broken === 'armed') {
        broken = 'the model broke (test)';
        throw new Error(broken);
      }
      return super.forward(b);
    }
    brokenReason(): string | null {
      return broken === 'armed' ? null : broken;
    }
  }
  const { p, d, bp } = await pdEngines('tcp', {}, new Breaking(V));
  t.after(async () => { await p.shutdown().catch(() => undefined); await d.shutdown().catch(() => undefined); });
  const core = (d as unknown as { transport: { core: { scheduler: { mem: { allocator: { availableSize(): number; size: number } } } } } }).transport.core;
  const alloc = core.scheduler.mem.allocator;
  // a request that runs (its decode steps will break the model) and one whose prefill side never sends: it waits
  // in the transfer queue with its prompt's KV allocated
  const bootstrap = [{ host: '127.0.0.1', port: bp, room: room++ }];
  const orphan = collect(d.generate({ rid: 'orphan', inputIds: [9, 8, 7, 6, 5, 4, 3, 2], samplingParams: sp, bootstrap: [{ host: '127.0.0.1', port: bp, room: room++ }] }));
  const running = collect(d.generate({ rid: 'run', inputIds: [1, 2, 3], samplingParams: { ...sp, maxNewTokens: 400 }, stream: true, bootstrap }));
  void collect(p.generate({ rid: 'run-p', inputIds: [1, 2, 3], samplingParams: sp, bootstrap }));
  for (let i = 0; i < 500 && alloc.availableSize() > alloc.size - 8 - 3; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(alloc.availableSize() <= alloc.size - 8, 'the waiting request holds its prompt\'s KV');
  broken = 'armed';
  const [o, r] = await Promise.all([orphan, running]);
  assert.equal(o.last.finishReason?.type, 'abort');
  assert.match((o.last.finishReason as { message: string }).message, /The engine failed to run this request: the model broke \(test\)/);
  assert.equal(r.last.finishReason?.type, 'abort');
  assert.equal(alloc.availableSize(), alloc.size, 'KV leaked by the fatal path');
});

test('PD in-process: a request waiting for its KV that its client leaves (signal) or /abort_request ends frees the KV it allocated; the prefill side\'s waiting request too', async (t) => {
  const { p, d, bp } = await pdEngines('tcp');
  t.after(async () => { await p.shutdown(); await d.shutdown(); });
  type Core = { transport: { core: { scheduler: { mem: { allocator: { availableSize(): number; size: number } } } } } };
  const dAlloc = (d as unknown as Core).transport.core.scheduler.mem.allocator;
  const pAlloc = (p as unknown as Core).transport.core.scheduler.mem.allocator;
  const prompt = [9, 8, 7, 6, 5, 4, 3, 2, 1, 2, 3, 4];
  const holding = async (what: string): Promise<void> => {
    for (let i = 0; i < 500 && dAlloc.availableSize() > dAlloc.size - prompt.length; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(dAlloc.availableSize() <= dAlloc.size - prompt.length, `${what}: the waiting request holds its prompt's KV`);
  };
  const freed = async (what: string): Promise<void> => {
    for (let i = 0; i < 500 && (dAlloc.availableSize() !== dAlloc.size || pAlloc.availableSize() !== pAlloc.size); i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(dAlloc.availableSize(), dAlloc.size, `${what}: decode KV leaked`);
    assert.equal(pAlloc.availableSize(), pAlloc.size, `${what}: prefill KV leaked`);
  };
  // the client leaves (its connection closes: the signal): the prefill side never got this room
  const ac = new AbortController();
  const left = collect(d.generate({ rid: 'left', inputIds: prompt, samplingParams: sp, bootstrap: [{ host: '127.0.0.1', port: bp, room: room++ }] }, ac.signal)).then((r) => r.ids.length, () => 0);
  await holding('client disconnect');
  ac.abort();
  assert.equal(await left, 0, 'the abandoned request produced tokens');
  await freed('client disconnect');
  // /abort_request: SGLang's answer to an abort in the waiting queue
  const aborted = collect(d.generate({ rid: 'abt', inputIds: prompt, samplingParams: sp, bootstrap: [{ host: '127.0.0.1', port: bp, room: room++ }] }));
  await holding('/abort_request');
  d.abort('abt');
  const a = await aborted;
  assert.equal(a.last.finishReason?.type, 'abort');
  assert.deepEqual(a.ids, []);
  await freed('/abort_request');
  // the prefill side: a request waiting for its decode side's destination, its client leaving
  const pac = new AbortController();
  const pLeft = collect(p.generate({ rid: 'p-left', inputIds: prompt, samplingParams: sp, bootstrap: [{ host: '127.0.0.1', port: bp, room: room++ }] }, pac.signal)).then((r) => r.ids.length, () => 0);
  await new Promise((r) => setTimeout(r, 100));
  pac.abort();
  assert.equal(await pLeft, 0);
  await freed('prefill client disconnect');
  // both still serve
  const [, ok] = await both(p, d, bp, 'after', prompt);
  assert.equal(ok.ids.length, sp.maxNewTokens);
  // (the prefill side's radix cache now holds this prompt: only the decode side is back to 100 % free)
  for (let i = 0; i < 500 && dAlloc.availableSize() !== dAlloc.size; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(dAlloc.availableSize(), dAlloc.size, 'after: decode KV leaked');
});

test('PD with EAGLE (2,1,3) on both sides (demo DeepSeek-V3.2, trained MTP): the draft KV and state travel with the KV; tokens and verify / accept counts equal a single EAGLE engine; STANDALONE refused', { timeout: 600_000 }, async (t) => {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { run: makeTiny } = await import('../src/cli/make_tiny.js');
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-pd-spec-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.equal(await makeTiny(['--preset', 'demo', '--arch', 'deepseek-v32', '--out', dir]), 0);
  const eagle = { modelPath: dir, useWorkerThread: false, numThreads: 1, maxTotalTokens: 4096, contextLength: 1024, logLevel: 'error', speculativeAlgorithm: 'EAGLE', speculativeNumSteps: 2, speculativeEagleTopk: 1, speculativeNumDraftTokens: 3 } as const;
  const texts = ['What is the weather in Paris?', 'What is 2 + 3?'].map((q) => `<｜begin▁of▁sentence｜><｜User｜>${q}<｜Assistant｜></think>`);
  const spp = { temperature: 0, maxNewTokens: 24, ignoreEos: true };
  const one = await Engine.create({ ...eagle });
  const want = await Promise.all(texts.map((text, i) => collect(one.generate({ rid: `one${i}`, text, samplingParams: spp }))));
  await one.shutdown();
  assert.ok(want.some((w) => (w.last.spec?.acceptedTokens ?? 0) > 0), 'the demo MTP accepts drafts');
  const bp = await freePort();
  const pd = { host: '127.0.0.1', bootstrapPort: bp, transferBackend: 'tcp', decodeEnableRadixCache: false };
  const p = await Engine.create({ ...eagle, disaggregation: { ...pd, mode: 'prefill' } });
  const d = await Engine.create({ ...eagle, disaggregation: { ...pd, mode: 'decode' } });
  t.after(async () => { await p.shutdown(); await d.shutdown(); });
  const got = await Promise.all(texts.map(async (text, i) => {
    const bootstrap = [{ host: '127.0.0.1', port: bp, room: room++ }];
    const [, dec] = await Promise.all([collect(p.generate({ rid: `p${i}`, text, samplingParams: spp, bootstrap })), collect(d.generate({ rid: `d${i}`, text, samplingParams: spp, bootstrap }))]);
    return dec;
  }));
  got.forEach((g, i) => {
    assert.deepEqual(g.ids, want[i].ids, `prompt ${i}: tokens`);
    assert.deepEqual(g.last.spec, want[i].last.spec, `prompt ${i}: verify / accept counts (the draft state arrived)`);
  });
  assert.equal((await d.getLoad()).disaggregation?.numPrefillSteps, 0);
  // STANDALONE has no draft state to send: refused with the reason
  await assert.rejects(
    Engine.create({ ...eagle, speculativeAlgorithm: 'STANDALONE', speculativeDraftModelPath: dir, disaggregation: { ...pd, bootstrapPort: await freePort(), mode: 'decode' } }),
    /--disaggregation-mode decode with --speculative-algorithm STANDALONE is not built: PD carries EAGLE's draft state/,
  );
});

// The scheduler's grammar seam with a fake backend: constrained requests wait in the grammar queue until their
// grammar is ready, a row whose mask is not back while the backend is busy sits the step out while the other rows
// decode, masks reach the sampler (only allowed tokens are sampled; EOS only where allowed), a terminated grammar
// finishes the request, a failed compile aborts with SGLang's 400 message, --grammar-backend none refuses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelRunner } from '../executor/index.js';
import { KVPool, RadixCache, ReqToTokenPool, TokenToKVPoolAllocator } from '../mem_cache/index.js';
import { applyVocabMask, normalizeSamplingParams, type GrammarSpec, type SamplingParamsInput } from '../sampling/index.js';
import { CacheManager } from './cache_manager.js';
import { FakeModel } from './fake_model.case.js';
import type { GrammarScheduling } from './grammar.js';
import { Scheduler } from './scheduler.js';

const V = 64;
const EOS = 0;

/** Allows tokens 10..13 for `len` steps, then only EOS. */
class FakeGrammar implements GrammarScheduling {
  readonly state = new Map<string, { phase: 'compiling' | 'ready' | 'failed'; steps: number; inFlight: boolean; len: number }>();
  busy = false;
  closed: string[] = [];
  open(rid: string, key: GrammarSpec): void {
    this.state.set(rid, { phase: key.source === 'bad' ? 'failed' : 'compiling', steps: 0, inFlight: false, len: Number(key.source) || 3 });
  }
  phase(rid: string) { return this.state.get(rid)?.phase ?? null; }
  error(rid: string) { return this.state.get(rid)?.phase === 'failed' ? { message: 'Unsupported type "foo"', atCompile: true } : null; }
  canSampleNow(rid: string): boolean { const s = this.state.get(rid)!; return !s.inFlight || !this.busy; }
  mask(rid: string): Int32Array {
    const s = this.state.get(rid)!;
    s.inFlight = false;
    const m = new Int32Array(Math.ceil(V / 32));
    if (s.steps < s.len) for (const t of [10, 11, 12, 13]) m[t >> 5] |= 1 << (t & 31);
    else m[0] |= 1 << EOS;
    return m;
  }
  accept(rid: string, token: number): boolean { const s = this.state.get(rid)!; s.steps++; s.inFlight = true; return token === EOS; }
  close(rid: string): void { this.closed.push(rid); }
}

function make(grammar: GrammarScheduling | null): Scheduler {
  const model = new FakeModel(V);
  const kvPool = new KVPool(model.kvPoolLayout(), 4097, 8);
  const alloc = new TokenToKVPoolAllocator(4096, 1, kvPool);
  const cfg = { pageSize: 1, maxRunningRequests: 16, maxPrefillTokens: 16384, chunkedPrefillSize: null, schedulePolicy: 'fcfs' as const, scheduleConservativeness: 1, enableMixedChunk: false, contextLength: 256, maxTotalNumTokens: 4096, eosTokenIds: [EOS], recordStats: true };
  return new Scheduler(cfg, new ModelRunner(model, kvPool, V), new CacheManager(new ReqToTokenPool(17, 264), alloc, new RadixCache(alloc)), grammar);
}

function add(s: Scheduler, rid: string, sp: SamplingParamsInput): void {
  s.addRequest({ rid, inputIds: [5, 6, 7, rid.length], params: normalizeSamplingParams({ temperature: 1, maxNewTokens: 10, ...sp }, V), rngSeed: 9, returnLogprob: false, logprobStartLen: -1, topLogprobsNum: 0, stream: true, arrivalMs: 0 });
}

test('applyVocabMask: disallowed ids become −Infinity, allowed keep their logits, ids past the mask are disallowed', () => {
  const logits = Float32Array.from({ length: 70 }, (_, i) => i);
  const mask = new Int32Array(2); // 64 ids covered
  mask[0] = (1 << 3) | (1 << 31);
  mask[1] = -1;
  applyVocabMask(logits, mask);
  for (let i = 0; i < 70; i++) assert.equal(logits[i], i === 3 || i === 31 || (i >= 32 && i < 64) ? i : -Infinity, `id ${i}`);
});

test('grammar queue → waiting; masked sampling; busy backend: the constrained row sits out, the free row decodes; grammar end finishes', () => {
  const g = new FakeGrammar();
  const s = make(g);
  add(s, 'c', { jsonSchema: '3' });
  add(s, 'f', { ignoreEos: true });
  assert.equal(s.grammarQueue.length, 1);
  const outC: number[] = [];
  const outF: number[] = [];
  const collect = (r: ReturnType<Scheduler['step']>) => r.outputs.forEach((o) => (o.rid === 'c' ? outC : outF).push(...o.newIds));
  collect(s.step()); // prefill of the free request only: 'c' is still compiling
  assert.equal(s.grammarQueue.length, 1);
  g.state.get('c')!.phase = 'ready';
  collect(s.step()); // 'c' leaves the grammar queue and prefills (its first masked token)
  assert.equal(s.grammarQueue.length, 0);
  g.busy = true; // the backend compiles another grammar: c's next mask is in flight
  const before = s.statsHistory.length;
  collect(s.step());
  const st = s.statsHistory[before];
  assert.equal(st.numDecodeReqs, 1, 'only the free row decodes while the backend is busy');
  g.busy = false;
  for (let i = 0; i < 40 && s.hasWork; i++) collect(s.step());
  assert.deepEqual(outC.slice(0, 3).every((t) => t >= 10 && t <= 13), true, `masked tokens ${outC}`);
  assert.deepEqual(outC, [...outC.slice(0, 3), EOS], 'EOS only once the grammar allows it, then the request ends');
  assert.ok(g.closed.includes('c'));
  assert.equal(outF.length, 10);
});

test('failed compile → abort 400 with SGLang message; --grammar-backend none refuses', () => {
  const g = new FakeGrammar();
  const s = make(g);
  add(s, 'bad', { regex: 'bad' });
  const r = s.step();
  const o = r.outputs.find((x) => x.rid === 'bad')!;
  assert.deepEqual(o.finishReason, { type: 'abort', message: 'Failed to compile regex grammar: Unsupported type "foo"', statusCode: 400, errType: 'BadRequestError' });
  const none = make(null);
  assert.throws(() => add(none, 'x', { ebnf: 'root ::= "a"' }), /not supported when the server is launched with --grammar-backend none/);
});

// Engine with its tokenizer worker (the embedded default model, in-process core, context stretched to 65536 so that
// megabyte prompts pass the over-length pre-check): a prompt that runs the worker out of memory fails alone with a
// 400 and the next requests are served; a client that leaves drops its tokenization, abort(rid) ends the request with
// finish_reason abort once it is tokenized; a rid is
// taken while its request is tokenized; /v1/tokenize's path gives the same ids as the main thread's tokenizer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { InvalidRequestError, RequestAbortedError, SILENT_LOGGER } from '../src/common/index.js';
import { ensureEmbeddedModel } from '../src/cli/embedded_model.js';
import { Engine, type GenerateOutput, type GenerateRequest } from '../src/engine/index.js';
import { toHttpError } from '../src/server/index.js';

let engine: Engine;
const CONTEXT_LEN = 65536;
/** 1M letters in one word: at least 7813 tokens by the bound (< 65536), and more BPE memory than the worker's 192 MB. */
const HUGE_WORD = 'a'.repeat(1_000_000);
const OOM_MESSAGE = "The input could not be tokenized within the server's limits (the tokenizer ran out of memory: 192 MB).";

before(async () => {
  const dir = ensureEmbeddedModel(join(homedir(), '.cache', 'tsglang'), SILENT_LOGGER);
  engine = await Engine.create({
    modelPath: dir, useWorkerThread: false, tokenizerWorker: true, tokenizerWorkerHeapMb: 192,
    jsonModelOverrideArgs: { max_position_embeddings: CONTEXT_LEN }, contextLength: CONTEXT_LEN, maxTotalTokens: 4096,
    logLevel: 'error', numThreads: 1,
  });
});

after(async () => {
  await engine?.shutdown();
});

async function run(req: Omit<GenerateRequest, 'samplingParams'>, signal?: AbortSignal): Promise<GenerateOutput[]> {
  const outs: GenerateOutput[] = [];
  for await (const o of engine.generate({ ...req, samplingParams: { temperature: 0, maxNewTokens: 2, ignoreEos: true } }, signal)) outs.push(o);
  return outs;
}

test('out of memory in the tokenizer worker: that request gets a 400, the request queued behind it and later ones are served', async () => {
  const doomed = run({ rid: 'oom', text: HUGE_WORD });
  const queued = run({ rid: 'queued', text: 'The capital city of France is' });
  const err = await doomed.then(() => null, (e: unknown) => e);
  assert.ok(err instanceof InvalidRequestError);
  assert.deepEqual(toHttpError(err), { status: 400, body: { object: 'error', message: OOM_MESSAGE, type: 'BadRequestError', param: null, code: 400 } });
  const [q] = await queued;
  assert.equal(q.promptTokens, engine.tokenizer!.encode('The capital city of France is').length);
  assert.equal(q.completionTokens, 2);
  const [next] = await run({ rid: 'next', text: 'Hello' });
  assert.equal(next.finished, true);
});

test('a rid is taken while its request is tokenized; abort(rid) meanwhile ends it with finish_reason abort, a client that leaves drops the tokenization', async () => {
  // abort(rid) (/abort_request) during tokenization: SGLang would let it run (the rid is not registered yet); tsglang
  // lets the tokenization finish and aborts the request as it reaches the scheduler (200, finish_reason abort)
  const slowText = 'x'.repeat(32_000); // one word: ~0.5 s of BPE, 4000 tokens (fits the 4096-token KV pool)
  const first = run({ rid: 'dup', text: slowText });
  await assert.rejects(run({ rid: 'dup', text: 'hi' }), /Duplicate request id dup\./);
  engine.abort('dup');
  const outs = await first;
  assert.equal(outs.length, 1);
  assert.deepEqual(outs[0].finishReason, { type: 'abort', message: 'Abort in waiting queue' });
  assert.equal(outs[0].completionTokens, 0);
  assert.deepEqual(outs[0].outputIds, []);
  const ac = new AbortController();
  const left = run({ rid: 'left', text: HUGE_WORD.slice(0, 300_000) }, ac.signal);
  setTimeout(() => ac.abort(), 20);
  await assert.rejects(left, RequestAbortedError);
  // both rids are free again, and the worker serves the next request
  const [again] = await run({ rid: 'dup', text: 'hi' });
  assert.equal(again.finished, true);
  assert.equal(engine.numInFlight, 0);
});

test('tokenize (/v1/tokenize): the worker\'s ids equal the main thread tokenizer\'s; the over-length pre-check still refuses first', async () => {
  const prompts = ['Hello world!', ']~!b[]~b]user\nhi 世界 🤖[e~[\n]~b]ai\n<think>\n', ''];
  for (const add of [true, false]) {
    assert.deepEqual(await engine.tokenize(prompts, add), prompts.map((p) => engine.tokenizer!.encode(p, { addSpecialTokens: add })));
  }
  await assert.rejects(engine.tokenize(['a'.repeat(CONTEXT_LEN * 128)], true), {
    message: `The input (at least ${CONTEXT_LEN} tokens) is longer than the model's context length (${CONTEXT_LEN} tokens).`,
  });
});

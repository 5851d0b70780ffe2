// Engine with a tokenizer, in a worker thread: text prompts, incremental detokenization (streamed deltas = one-shot
// text), stop strings cut the text and finish the request, stop token ids are trimmed from the text. Uses a tiny
// MiniMax-M2 checkpoint with a real tokenizer: the embedded default model of `tsglang serve` (generated once into the
// cache directory, shared with the server tests).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { SILENT_LOGGER } from '../src/common/index.js';
import { ensureEmbeddedModel } from '../src/cli/embedded_model.js';
import { Engine, type GenerateOutput } from '../src/engine/index.js';

let engine: Engine;

before(async () => {
  const dir = ensureEmbeddedModel(join(homedir(), '.cache', 'tsglang'), SILENT_LOGGER);
  engine = await Engine.create({ modelPath: dir, maxTotalTokens: 2048, contextLength: 1024, logLevel: 'error', numThreads: 1 });
});

after(async () => {
  await engine?.shutdown();
});

async function all(it: AsyncIterable<GenerateOutput>): Promise<GenerateOutput[]> {
  const outs: GenerateOutput[] = [];
  for await (const o of it) outs.push(o);
  return outs;
}

const PROMPT = 'The capital city of France is';

test('worker-thread engine: text in, text out; streamed deltas equal the one-shot text', async () => {
  assert.equal(engine.inProcessCore, null);
  const sp = { temperature: 0, maxNewTokens: 12, ignoreEos: true };
  const [one] = await all(engine.generate({ rid: 'one', text: PROMPT, samplingParams: sp }));
  assert.equal(one.finished, true);
  assert.equal(one.outputIds.length, 12);
  assert.equal(one.text, engine.tokenizer!.decode(one.outputIds, { skipSpecialTokens: true }));
  assert.equal(one.promptTokens, engine.tokenizer!.encode(PROMPT).length);
  const parts = await all(engine.generate({ rid: 'two', text: PROMPT, stream: true, samplingParams: sp }));
  assert.ok(parts.length > 1);
  assert.equal(parts.map((p) => p.text).join(''), one.text);
  assert.deepEqual(parts.flatMap((p) => p.outputIds), one.outputIds);
  assert.equal(parts.at(-1)!.cachedTokens > 0, true, 'second run hits the prefix cache');
  const load = await engine.getLoad();
  assert.equal(load.numRunningReqs, 0);
});

test('stop string: text cut before it, finish_reason matched string; stop token id trimmed from text', async () => {
  const sp = { temperature: 0, maxNewTokens: 12, ignoreEos: true };
  const [full] = await all(engine.generate({ rid: 'full', text: PROMPT, samplingParams: sp }));
  // A stop string starting in the middle of the output: the 2 characters after the first 5 non-space characters.
  const at = Math.max(3, Math.floor(full.text.length / 2));
  const stop = full.text.slice(at, at + 2);
  const cut = full.text.indexOf(stop);
  for (const stream of [false, true]) {
    const outs = await all(engine.generate({ rid: `stop-${stream}`, text: PROMPT, stream, samplingParams: { ...sp, stop: [stop] } }));
    const last = outs.at(-1)!;
    assert.deepEqual(last.finishReason, { type: 'stop', matched: stop });
    assert.equal(outs.map((o) => o.text).join(''), full.text.slice(0, cut));
    assert.ok(last.completionTokens < 12);
  }
  const tok = full.outputIds[4];
  const [st] = await all(engine.generate({ rid: 'stoptok', text: PROMPT, samplingParams: { temperature: 0, maxNewTokens: 12, stopTokenIds: [tok] } }));
  const k = full.outputIds.indexOf(tok);
  assert.deepEqual(st.finishReason, { type: 'stop', matched: tok });
  assert.deepEqual(st.outputIds, full.outputIds.slice(0, k + 1));
  assert.equal(st.text, engine.tokenizer!.decode(full.outputIds.slice(0, k), { skipSpecialTokens: true }));
  assert.equal(await engine.flushCache(), true);
});

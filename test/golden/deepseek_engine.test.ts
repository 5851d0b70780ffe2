// DeepSeek-V3.2 through the engine (in-process core, token ids in/out): golden greedy tokens of the tiny fixture with
// all prompts at once, with small chunked prefill + mixed batches + paging, and after a prefix-cache hit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../../src/engine/index.js';
import type { EngineOptions, GenerateOutput } from '../../src/engine/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, readSharedJson } from '../helpers/paths.js';

const MODEL = join(FIXTURES_DIR, 'tiny-deepseek-v32');
const golden = readSharedJson<unknown>(join(MODEL, 'golden.json'), { prompts: [] }) as {
  prompts: { name: string; tokens: number[]; greedy: { tokens: number[] } }[];
};

/** Runs each wave of prompts concurrently, waves one after another on the same engine. */
async function greedyAll(opts: Partial<EngineOptions>, waves: number[][][], maxNewTokens: number, cached: number[] = []): Promise<number[][]> {
  const engine = await Engine.create({
    modelPath: MODEL, skipTokenizerInit: true, useWorkerThread: false, maxTotalTokens: 4096, contextLength: 512, ...opts,
  });
  try {
    const run = async (ids: number[], i: number): Promise<number[]> => {
      const out: number[] = [];
      const it: AsyncIterable<GenerateOutput> = engine.generate({ rid: `r${i}`, inputIds: ids, stream: false, samplingParams: { temperature: 0, maxNewTokens, ignoreEos: true } });
      for await (const o of it) {
        out.push(...o.outputIds);
        cached[i] = o.cachedTokens;
      }
      return out;
    };
    const out: number[][] = [];
    for (const wave of waves) out.push(...(await Promise.all(wave.map((p, i) => run(p, out.length + i)))));
    return out;
  } finally {
    await engine.shutdown();
  }
}

test('engine: golden greedy tokens, all prompts batched, default scheduling', NEEDS_SHARED, async () => {
  const got = await greedyAll({}, [golden.prompts.map((p) => p.tokens)], 16);
  golden.prompts.forEach((p, i) => assert.deepEqual(got[i], p.greedy.tokens, p.name));
});

test('engine: golden greedy tokens with chunked prefill of 8 tokens, mixed batches, page size 4, then a prefix-cache hit', NEEDS_SHARED, async () => {
  // second wave: the longest prompt again (its prefix is in the radix cache, so the indexer reads cached index keys)
  const waves = [golden.prompts.map((p) => p.tokens), [golden.prompts[3].tokens]];
  const cached: number[] = [];
  const got = await greedyAll({ chunkedPrefillSize: 8, enableMixedChunk: true, pageSize: 4 }, waves, 16, cached);
  assert.ok(cached[4] >= 64, `prefix-cache hit expected, cachedTokens = ${cached[4]}`);
  golden.prompts.forEach((p, i) => assert.deepEqual(got[i], p.greedy.tokens, p.name));
  assert.deepEqual(got[4], golden.prompts[3].greedy.tokens, 'repeated prompt');
});

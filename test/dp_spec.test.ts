// Speculative decoding under data parallelism (issue 19 with issue 17's decoder): on the demo DeepSeek-V3.2 checkpoint
// (its MTP layer is trained, so EAGLE accepts drafts), EAGLE (2,1,3) under --tp 2 --dp 2 --enable-dp-attention (attn_tp
// 1), --tp 4 --dp 2 --enable-dp-attention with --page-size 4 (attn_tp 2) and plain --dp 2 replicas gives tp 1's tokens and tp 1's verify / accept counters per request, for concurrent requests
// spread over the groups; STANDALONE self-draft under DP-attention accepts every draft as on tp 1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run as makeTiny } from '../src/cli/make_tiny.js';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';

const DIR = mkdtempSync(join(tmpdir(), 'tsglang-dpspec-'));
process.on('exit', () => rmSync(DIR, { recursive: true, force: true }));
const PROMPTS = ['What is the weather in Paris?', 'Hello', 'Call get_weather for Tokyo', 'What is 2 + 3?'].map((q) => `<｜begin▁of▁sentence｜><｜User｜>${q}<｜Assistant｜></think>`);
const EAGLE = { speculativeAlgorithm: 'EAGLE', speculativeNumSteps: 2, speculativeEagleTopk: 1, speculativeNumDraftTokens: 3 };

interface Run { ids: number[][]; spec: unknown[] }

async function run(o: Partial<EngineOptions>): Promise<Run> {
  const e = await Engine.create({ modelPath: DIR, numThreads: 1, maxTotalTokens: 4096, contextLength: 1024, logLevel: 'error', ...o });
  try {
    const rs = await Promise.all(PROMPTS.map(async (text, i) => {
      const ids: number[] = [];
      let last: GenerateOutput | null = null;
      for await (const x of e.generate({ rid: `r${i}`, text, samplingParams: { temperature: 0, maxNewTokens: 24, ignoreEos: true } })) {
        ids.push(...x.outputIds);
        last = x;
      }
      return { ids, spec: last!.spec };
    }));
    if ((o.dpSize ?? 1) > 1) {
      const load = await e.getLoad();
      assert.ok(load.dpLoads!.every((l) => (l.avgSpecAcceptLength ?? 0) > 0), `every DP rank verified drafts: ${load.dpLoads!.map((l) => l.avgSpecAcceptLength)}`);
    }
    return { ids: rs.map((r) => r.ids), spec: rs.map((r) => r.spec) };
  } finally {
    await e.shutdown();
  }
}

test('EAGLE (2,1,3) under DP-attention (attn_tp 1 and 2, pages) and DP replicas: tp 1 tokens and accept counts', { timeout: 600_000 }, async () => {
  assert.equal(await makeTiny(['--preset', 'demo', '--arch', 'deepseek-v32', '--out', DIR]), 0);
  const one = await run({ ...EAGLE, useWorkerThread: false });
  const accepted = one.spec.map((s) => (s as { acceptedTokens: number }).acceptedTokens);
  assert.ok(accepted.some((a) => a > 0), `the demo MTP accepts drafts (${accepted})`);
  for (const layout of [
    { tpSize: 2, dpSize: 2, enableDpAttention: true },
    { tpSize: 4, dpSize: 2, enableDpAttention: true, pageSize: 4 },
    { dpSize: 2 },
  ]) {
    const got = await run({ ...EAGLE, ...layout });
    assert.deepEqual(got.ids, one.ids, `${JSON.stringify(layout)}: tokens`);
    assert.deepEqual(got.spec, one.spec, `${JSON.stringify(layout)}: verify / accept counts`);
  }
});

test('STANDALONE self-draft under --tp 2 --dp 2 --enable-dp-attention: every draft accepted, tokens and counters as tp 1', { timeout: 600_000 }, async () => {
  if (!(await import('node:fs')).existsSync(join(DIR, 'config.json'))) assert.equal(await makeTiny(['--preset', 'demo', '--arch', 'deepseek-v32', '--out', DIR]), 0);
  const sa = { speculativeAlgorithm: 'STANDALONE', speculativeDraftModelPath: DIR, speculativeNumSteps: 2, speculativeEagleTopk: 1, speculativeNumDraftTokens: 3 };
  const one = await run({ ...sa, useWorkerThread: false });
  for (const s of one.spec as { verifyCt: number; acceptedTokens: number }[]) assert.equal(s.acceptedTokens, 24 - 1 - s.verifyCt, 'self-draft: every draft accepted');
  assert.deepEqual(await run({ ...sa, tpSize: 2, dpSize: 2, enableDpAttention: true }), one);
});

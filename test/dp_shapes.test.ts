// Parallel layouts on checkpoints of other shapes than the golden fixtures (make-tiny with other head counts, layers,
// experts and vocabulary; the engine reads every size from config.json): under --enable-dp-attention with dp 2 and 4,
// plain --dp 2 replicas and prefill CP 2 and 4 (DeepSeek), greedy continuations equal tp 1 and every logprob the
// engine returns (prompt positions, chosen tokens, top 5) is within 1e-4 relative of tp 1; within a layout, requests
// run alone and all at once give the same bits (batch invariance).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run as makeTiny } from '../src/cli/make_tiny.js';
import { Engine, type EngineOptions, type GenerateOutput } from '../src/engine/index.js';
import { relDiff } from './helpers/golden.js';

const SHAPES: Record<string, Record<string, unknown>> = {
  'deepseek-v32': {
    num_attention_heads: 4, num_hidden_layers: 2, first_k_dense_replace: 0, n_routed_experts: 8, num_experts_per_tok: 2, n_group: 2, topk_group: 1,
    index_n_heads: 4, index_topk: 8, vocab_size: 1024, num_nextn_predict_layers: 0,
  },
  'minimax-m2': {
    num_attention_heads: 4, num_key_value_heads: 4, head_dim: 32, rotary_dim: 16, hidden_size: 128, num_hidden_layers: 3, attn_type_list: [1, 1, 1],
    num_local_experts: 8, num_experts_per_tok: 2, vocab_size: 1024,
  },
};
const LAYOUTS: Record<string, Partial<EngineOptions>[]> = {
  'deepseek-v32': [
    { tpSize: 2, dpSize: 2, enableDpAttention: true },
    { tpSize: 4, dpSize: 4, enableDpAttention: true, epSize: 4 },
    { dpSize: 2 },
    { tpSize: 4, attnCpSize: 2 },
    { tpSize: 4, attnCpSize: 4 },
  ],
  'minimax-m2': [
    { tpSize: 2, dpSize: 2, enableDpAttention: true },
    { tpSize: 4, dpSize: 2, enableDpAttention: true },
    { tpSize: 4, dpSize: 4, enableDpAttention: true, epSize: 4 },
    { tpSize: 2, dpSize: 2 },
  ],
};
// 16 and 24 tokens split under CP 2 and 4; 11 falls back; every prompt is prefilled then decoded
const PROMPTS = [16, 11, 24].map((n, k) => Array.from({ length: n }, (_, i) => (3 + 29 * i + 211 * k) % 1000));
const N_NEW = 12;

interface Result { ids: number[]; lps: number[] }

async function one(e: Engine, rid: string, p: number[]): Promise<Result> {
  const ids: number[] = [];
  const lps: number[] = [];
  let last: GenerateOutput | null = null;
  for await (const o of e.generate({ rid, inputIds: p, returnLogprob: true, logprobStartLen: 0, topLogprobsNum: 5, samplingParams: { temperature: 0, maxNewTokens: N_NEW, ignoreEos: true } })) {
    ids.push(...o.outputIds);
    const l = o.logprobs;
    for (const [lp] of l?.inputTokenLogprobs ?? []) if (lp !== null) lps.push(lp);
    for (const [lp] of l?.outputTokenLogprobs ?? []) lps.push(lp);
    for (const top of l?.outputTopLogprobs ?? []) for (const [lp] of top) lps.push(lp);
    last = o;
  }
  assert.equal(last?.finishReason?.type, 'length');
  return { ids, lps };
}

/** Every prompt alone, then all at once. */
async function runLayout(dir: string, o: Partial<EngineOptions>): Promise<{ alone: Result[]; batch: Result[] }> {
  const e = await Engine.create({ modelPath: dir, skipTokenizerInit: true, numThreads: 1, maxTotalTokens: 2048, contextLength: 256, logLevel: 'error', ...o });
  try {
    const alone: Result[] = [];
    for (const [i, p] of PROMPTS.entries()) alone.push(await one(e, `a${i}`, p));
    const batch = await Promise.all(PROMPTS.map((p, i) => one(e, `b${i}`, p)));
    return { alone, batch };
  } finally {
    await e.shutdown();
  }
}

for (const arch of Object.keys(SHAPES)) {
  test(`${arch} of another shape (${Object.entries(SHAPES[arch]).slice(0, 3).map(([k, v]) => `${k} ${String(v)}`).join(', ')}, …): DP-attention, DP replicas${arch.startsWith('deepseek') ? ', CP 2 and 4' : ''} = tp 1 (1e-4); batch invariant`, { timeout: 900_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), `tsglang-shape-${arch}-`));
    try {
      assert.equal(await makeTiny(['--arch', arch, '--out', dir, '--num-shards', '1', '--eos-shaping', 'off', '--json-model-override-args', JSON.stringify(SHAPES[arch])]), 0);
      const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
      for (const [k, v] of Object.entries(SHAPES[arch])) assert.deepEqual(cfg[k], v, `config.json ${k}`);
      const ref = await runLayout(dir, { useWorkerThread: false });
      assert.deepEqual(ref.batch, ref.alone, 'tp 1: batch invariant');
      for (const layout of LAYOUTS[arch]) {
        const name = JSON.stringify(layout);
        const got = await runLayout(dir, layout);
        assert.deepEqual(got.batch, got.alone, `${name}: batch invariant (same bits alone and batched)`);
        got.alone.forEach((g, i) => {
          assert.deepEqual(g.ids, ref.alone[i].ids, `${name} prompt ${i}: greedy tokens`);
          assert.equal(g.lps.length, ref.alone[i].lps.length);
          const d = relDiff(g.lps, ref.alone[i].lps);
          assert.ok(d <= 1e-4, `${name} prompt ${i}: logprobs ${d} relative from tp 1`);
        });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

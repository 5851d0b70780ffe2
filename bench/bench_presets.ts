// Bench-sized random checkpoints (a few hundred million parameters, FP8 block weights) for the CPU benchmarks:
// the 'tiny' preset of each architecture with the sizes below on top. The MiniMax one is the shape of the llama.cpp
// peer's bench model (../shared/tools/llamacpp-peer/README.md). Written once into a cache folder and reused.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { writeTinyCheckpoint } from '../src/executor/index.js';

/** config.json fields replacing the 'tiny' preset's, per `make-tiny --arch` name. */
export const BENCH_OVERRIDES: Readonly<Record<string, Record<string, unknown>>> = {
  'minimax-m2': {
    hidden_size: 1024, num_hidden_layers: 8, num_attention_heads: 16, num_key_value_heads: 4, head_dim: 128, rotary_dim: 64,
    num_local_experts: 32, num_experts_per_tok: 4, intermediate_size: 512, vocab_size: 32000, attn_type_list: Array(8).fill(1),
  },
  'deepseek-v32': {
    hidden_size: 1024, num_hidden_layers: 8, num_attention_heads: 16, q_lora_rank: 384, kv_lora_rank: 256, qk_nope_head_dim: 64,
    qk_rope_head_dim: 32, v_head_dim: 64, n_routed_experts: 32, num_experts_per_tok: 4, n_group: 4, topk_group: 2,
    moe_intermediate_size: 512, intermediate_size: 2048, vocab_size: 32000, index_head_dim: 64, index_n_heads: 16, index_topk: 256,
  },
};

/** Folder holding the cached bench checkpoints (env TSGLANG_BENCH_DIR, default $TMPDIR/tsglang-bench). */
export function benchDir(): string {
  return process.env.TSGLANG_BENCH_DIR ?? join(tmpdir(), 'tsglang-bench');
}

/**
 * Returns the folder of the bench checkpoint of `arch`, writing it first if missing (seed 0, 2 shards).
 * @param arch 'minimax-m2' | 'deepseek-v32'
 */
export function ensureBenchCheckpoint(arch: string, log: (line: string) => void = (l) => process.stderr.write(l + '\n')): string {
  const overrides = BENCH_OVERRIDES[arch];
  if (!overrides) throw new Error(`no bench preset for ${arch}`);
  const dir = join(benchDir(), arch);
  const stamp = JSON.stringify(overrides);
  if (existsSync(join(dir, 'model.safetensors.index.json')) && existsSync(join(dir, 'bench_preset.json')) && readFileSync(join(dir, 'bench_preset.json'), 'utf8') === stamp) return dir;
  log(`writing the ${arch} bench checkpoint to ${dir} (once) ...`);
  const t0 = performance.now();
  writeTinyCheckpoint(arch, dir, { seed: 0, preset: 'tiny', configOverrides: overrides, numShards: 2 });
  writeFileSync(join(dir, 'bench_preset.json'), stamp);
  log(`  done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return dir;
}


// Bench-sized random checkpoints (a few hundred million parameters, FP8 block weights) for the CPU benchmarks: the
// 'bench' preset of each architecture's tinyConfig (src/models: MINIMAX_M2_BENCH_SIZES, DEEPSEEK_BENCH_SIZES; the
// MiniMax one is the shape of the llama.cpp peer's bench model, ../shared/tools/llamacpp-peer/README.md), the same
// checkpoint `tsglang make-tiny --preset bench` writes (less the tokenizer). Written once into a cache folder and reused.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { writeTinyCheckpoint } from '../src/executor/index.js';
import { getTinyModelDefinition } from '../src/models/index.js';

/** Folder holding the cached bench checkpoints (env TSGLANG_BENCH_DIR, default $TMPDIR/tsglang-bench). */
export function benchDir(): string {
  return process.env.TSGLANG_BENCH_DIR ?? join(tmpdir(), 'tsglang-bench');
}

/**
 * Returns the folder of the bench checkpoint of `arch`, writing it first if missing (seed 0, 2 shards).
 * @param arch 'minimax-m2' | 'deepseek-v32'
 * @throws InvalidRequestError for an arch without the preset
 */
export function ensureBenchCheckpoint(arch: string, log: (line: string) => void = (l) => process.stderr.write(l + '\n')): string {
  const dir = join(benchDir(), arch);
  const stamp = JSON.stringify(getTinyModelDefinition(arch).tinyConfig('bench'));
  if (existsSync(join(dir, 'model.safetensors.index.json')) && existsSync(join(dir, 'bench_preset.json')) && readFileSync(join(dir, 'bench_preset.json'), 'utf8') === stamp) return dir;
  log(`writing the ${arch} bench checkpoint to ${dir} (once) ...`);
  const t0 = performance.now();
  writeTinyCheckpoint(arch, dir, { seed: 0, preset: 'bench', numShards: 2 });
  writeFileSync(join(dir, 'bench_preset.json'), stamp);
  log(`  done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return dir;
}


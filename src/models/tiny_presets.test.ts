// The `make-tiny --preset bench` configs: real presets of the model definitions' tinyConfig (the sizes bench/ uses),
// valid config.json, FP8 block-quantized and a few hundred million parameters (counted from expectedTensors; the
// checkpoint itself is too large to write in a test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseModelConfig } from '../config/index.js';
import { DEEPSEEK_BENCH_SIZES, MINIMAX_M2_BENCH_SIZES, getTinyModelDefinition } from './index.js';

/** Parameters (elements of every weight tensor, scales excluded) and the FP8 share of them. */
function countParams(arch: string, preset: string): { params: number; fp8: number; tensors: number } {
  const def = getTinyModelDefinition(arch);
  const config = parseModelConfig(def.tinyConfig(preset), `${arch}/${preset}/config.json`);
  let params = 0;
  let fp8 = 0;
  let tensors = 0;
  for (const s of def.expectedTensors(config)) {
    if (s.name.endsWith('_scale_inv')) continue;
    const n = s.shape.reduce((a, b) => a * b, 1);
    params += n;
    tensors++;
    if (s.storedAs === 'fp8') fp8 += n;
  }
  return { params, fp8, tensors };
}

for (const [arch, sizes] of [['minimax-m2', MINIMAX_M2_BENCH_SIZES], ['deepseek-v32', DEEPSEEK_BENCH_SIZES], ['deepseek-v3', DEEPSEEK_BENCH_SIZES]] as const) {
  test(`${arch}: preset bench is tiny with the bench sizes, FP8, a few hundred million parameters`, () => {
    const def = getTinyModelDefinition(arch);
    const tiny = def.tinyConfig('tiny');
    const bench = def.tinyConfig('bench');
    for (const [k, v] of Object.entries(sizes)) {
      if (arch === 'deepseek-v3' && k.startsWith('index_')) assert.equal(k in bench, false, `${k} is V3.2-only`);
      else assert.deepEqual(bench[k], v, k);
    }
    for (const k of Object.keys(tiny)) if (!(k in sizes)) assert.deepEqual(bench[k], tiny[k], `${k} stays the tiny preset's`);
    const q = bench.quantization_config as { quant_method: string; weight_block_size: number[] };
    assert.equal(q.quant_method, 'fp8');
    assert.deepEqual(q.weight_block_size, [128, 128]);
    const t = countParams(arch, 'tiny');
    const b = countParams(arch, 'bench');
    assert.ok(b.params >= 200e6 && b.params <= 900e6, `bench has ${b.params} parameters`);
    assert.ok(b.fp8 / b.params > 0.8, `FP8 share ${b.fp8 / b.params}`);
    assert.ok(t.params < 5e6, `tiny has ${t.params} parameters`);
    assert.ok(b.tensors > t.tensors, 'bench has more layers than tiny');
    // the bench preset does not leak into later tiny calls
    assert.deepEqual(def.tinyConfig('tiny'), tiny);
  });
}

test('an unknown preset names the known ones', () => {
  assert.throws(() => getTinyModelDefinition('minimax-m2').tinyConfig('huge'), { name: 'InvalidRequestError', message: "unknown --preset 'huge' for minimax-m2 (known: tiny, bench)" });
  assert.throws(() => getTinyModelDefinition('deepseek-v32').tinyConfig('huge'), { name: 'InvalidRequestError', message: "unknown --preset 'huge' for deepseek-v32 (known: tiny, bench)" });
});

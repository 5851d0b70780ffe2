// The `make-tiny --preset bench` configs: real presets of the model definitions' tinyConfig (the sizes bench/ uses),
// valid config.json, FP8 block-quantized and a few hundred million parameters (counted from expectedTensors; the
// checkpoint itself is too large to write in a test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseModelConfig } from '../config/index.js';
import { parallelLayout } from '../layers/index.js';
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

test('every make-tiny preset splits the seed layouts (--tp 2/4/8, --tp 8 --ep 8): every rank gets a shard of every split tensor', () => {
  for (const arch of ['minimax-m2', 'deepseek-v32', 'deepseek-v3']) {
    const def = getTinyModelDefinition(arch);
    for (const preset of ['tiny', 'bench']) {
      const config = parseModelConfig(def.tinyConfig(preset), `${arch}/${preset}/config.json`);
      const specs = def.expectedTensors(config);
      for (const [tp, ep] of [[2, 1], [4, 1], [8, 1], [8, 8], [4, 2]]) {
        let experts = 0;
        for (let r = 0; r < tp; r++) {
          const mine = def.shardTensors!(config, specs, parallelLayout(r, tp, ep));
          for (const s of mine) if (s.shard) assert.ok(s.shard.count > 0 && s.shard.start + s.shard.count <= s.shape[s.shard.dim], `${arch}/${preset} tp ${tp} ep ${ep} rank ${r}: ${s.name}`);
          experts += mine.filter((s) => /experts\.\d+\.(w1|gate_proj)\.weight$/.test(s.name)).length;
        }
        // every routed expert is held by tp/ep ranks (its moe_tp shards)
        const total = specs.filter((s) => /experts\.\d+\.(w1|gate_proj)\.weight$/.test(s.name)).length;
        assert.equal(experts, total * (tp / ep), `${arch}/${preset} tp ${tp} ep ${ep}`);
      }
    }
  }
});

test('layouts a checkpoint cannot split are refused naming the flag and the numbers', () => {
  const def = getTinyModelDefinition('minimax-m2');
  const cfg = (o: Record<string, unknown>) => parseModelConfig({ ...def.tinyConfig('tiny'), ...o }, 'x/config.json');
  const refuse = (o: Record<string, unknown>, tp: number, ep: number, re: RegExp) => {
    const c = cfg(o);
    assert.throws(() => def.shardTensors!(c, def.expectedTensors(c), parallelLayout(0, tp, ep)), re);
  };
  refuse({ num_attention_heads: 6, num_key_value_heads: 3 }, 4, 1, /num_attention_heads \(6\) must be divisible by --tp-size \(4\)/);
  refuse({ num_attention_heads: 12, num_key_value_heads: 6 }, 4, 1, /num_key_value_heads \(6\) must be divisible by --tp-size \(4\)/);
  refuse({ num_attention_heads: 12, num_key_value_heads: 3 }, 4, 1, /--tp-size \(4\) must be a multiple of num_key_value_heads \(3\)/);
  refuse({ num_local_experts: 12 }, 8, 8, /the number of routed experts \(12\) must be divisible by --ep-size \(8\)/);
  refuse({ intermediate_size: 20 }, 8, 1, /the expert intermediate size \(20\) must be divisible by moe_tp_size = --tp-size \/ --ep-size \(8\)/);
  assert.throws(() => parallelLayout(0, 4, 3), /--ep-size \(3\) must divide --tp-size \(4\)/);
});

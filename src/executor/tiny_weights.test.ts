import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FP8_E4M3_TO_F32, f32ToFp8E4m3 } from '../common/index.js';
import { parseModelConfig } from '../config/index.js';
import { MINIMAX_M2_DEFINITION } from '../models/index.js';
import { generateTinyTensors } from './tiny_weights.js';

const config = parseModelConfig(MINIMAX_M2_DEFINITION.tinyConfig('tiny'));
const specs = MINIMAX_M2_DEFINITION.expectedTensors(config);

test('generateTinyTensors: every spec (+ scale for FP8), deterministic per seed, a tensor depends only on seed and name', () => {
  const a = generateTinyTensors(specs, config, { seed: 4 });
  const fp8Specs = specs.filter((s) => s.storedAs === 'fp8');
  assert.equal(a.length, specs.length + fp8Specs.length);
  const again = generateTinyTensors(specs, config, { seed: 4 });
  assert.deepEqual(again.map((t) => t.data), a.map((t) => t.data));
  const other = generateTinyTensors(specs, config, { seed: 5 });
  assert.notDeepEqual(other[0].data, a[0].data);
  const name = 'model.layers.1.self_attn.o_proj.weight';
  const subset = generateTinyTensors(specs.filter((s) => s.name === name), config, { seed: 4 });
  assert.deepEqual(subset[0].data, a.find((t) => t.name === name)!.data);
  const scale = a.find((t) => t.name === `${name}_scale_inv`)!;
  assert.deepEqual(scale.shape, [Math.ceil(160 / 128), Math.ceil((8 * 40) / 128)]); // o_proj [hidden, heads·head_dim]
});

test('generateTinyTensors: FP8 codes are the round-to-nearest-even e4m3 of value/scale; pow2 scales are powers of two', () => {
  const spec = specs.find((s) => s.name === 'model.layers.0.self_attn.q_proj.weight')!;
  const [w, s] = generateTinyTensors([spec], config, { seed: 1, pow2Scales: true });
  const scales = new Float32Array(s.data.buffer);
  for (const v of scales) assert.equal(Math.log2(v) % 1 === 0, true, `scale ${v}`);
  const [w2] = generateTinyTensors([spec], config, { seed: 1, pow2Scales: true, storedAs: () => 'f32' });
  const vals = new Float32Array(w2.data.buffer);
  const cols = spec.shape[1];
  for (let i = 0; i < 500; i++) {
    const r = Math.floor(i / cols), c = i % cols;
    const sc = scales[Math.floor(r / 128) * Math.ceil(cols / 128) + Math.floor(c / 128)];
    // f32 storage holds the dequantized FP8 values, so re-encoding reproduces the stored code exactly
    assert.equal(f32ToFp8E4m3(vals[i] / sc), w.data[i]);
    assert.equal(FP8_E4M3_TO_F32[w.data[i]] * sc, vals[i]);
  }
});

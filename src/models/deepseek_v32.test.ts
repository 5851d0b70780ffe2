import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseModelConfig } from '../config/index.js';
import { DEEPSEEK_V32_DEFINITION, DEEPSEEK_V3_DEFINITION } from './deepseek_v32.js';
import { deepseekExpectedTensors, deepseekKvPoolLayout, dsaLayerReusesTopK, isMoeLayer, parseDeepseekConfig } from './deepseek_v32_config.js';

const tinyV32 = (over: Record<string, unknown> = {}) => parseModelConfig({ ...DEEPSEEK_V32_DEFINITION.tinyConfig('tiny'), ...over }, 'config.json');
const tinyV3 = (over: Record<string, unknown> = {}) => parseModelConfig({ ...DEEPSEEK_V3_DEFINITION.tinyConfig('tiny'), ...over }, 'config.json');

test('tiny presets: V3.2 has the indexer and index_k buffer, V3 has neither', () => {
  const v32 = parseDeepseekConfig(tinyV32());
  const v3 = parseDeepseekConfig(tinyV3());
  assert.equal(v32.isDsa, true);
  assert.equal(v3.isDsa, false);
  const f32 = { kind: 'f32' };
  assert.deepEqual(deepseekKvPoolLayout(v32, 3).buffers, [{ name: 'kv', width: 64 + 16, codec: f32 }, { name: 'index_k', width: 64, codec: f32 }]);
  assert.deepEqual(deepseekKvPoolLayout(v3, 3).buffers, [{ name: 'kv', width: 80, codec: f32 }]);
  // --kv-cache-dtype fp8_e4m3: SGLang's fp8_ds_mla latent and FP8 index keys for DSA; plain e4m3 latent for V3
  assert.deepEqual(deepseekKvPoolLayout(v32, 3, 'fp8_e4m3').buffers, [{ name: 'kv', width: 80, codec: { kind: 'fp8_block', fp8Dims: 64 } }, { name: 'index_k', width: 64, codec: { kind: 'fp8_block', fp8Dims: 64 } }]);
  assert.deepEqual(deepseekKvPoolLayout(v3, 3, 'fp8_e4m3').buffers, [{ name: 'kv', width: 80, codec: { kind: 'fp8_e4m3', scale: 1 } }]);
  assert.ok(deepseekExpectedTensors(tinyV32()).some((t) => t.name === 'model.layers.0.self_attn.indexer.wq_b.weight'));
  assert.ok(!deepseekExpectedTensors(tinyV3()).some((t) => t.name.includes('indexer')));
  assert.throws(() => DEEPSEEK_V3_DEFINITION.tinyConfig('huge'), { name: 'InvalidRequestError' });
});

test('tensor list: dense layers before first_k_dense_replace, MoE after, MTP layer optional at index num_hidden_layers', () => {
  const cfg = parseDeepseekConfig(tinyV32());
  assert.equal(isMoeLayer(cfg, 0), false);
  assert.equal(isMoeLayer(cfg, 1), true);
  assert.equal(isMoeLayer(cfg, 3), true); // the MTP layer always routes
  const specs = deepseekExpectedTensors(tinyV32());
  const byName = new Map(specs.map((s) => [s.name, s]));
  assert.deepEqual(byName.get('model.layers.0.mlp.gate_proj.weight')?.shape, [256, 192]);
  assert.equal(byName.has('model.layers.0.mlp.gate.weight'), false);
  assert.deepEqual(byName.get('model.layers.2.mlp.experts.15.down_proj.weight')?.shape, [192, 64]);
  assert.deepEqual(byName.get('model.layers.1.self_attn.kv_a_proj_with_mqa.weight')?.shape, [80, 192]);
  assert.deepEqual(byName.get('model.layers.1.self_attn.q_b_proj.weight')?.shape, [8 * 48, 96]); // 8 heads × (nope 32 + rope 16)
  assert.deepEqual(byName.get('model.layers.1.self_attn.kv_b_proj.weight')?.shape, [8 * 64, 64]);
  assert.equal(byName.get('model.layers.1.mlp.gate.e_score_correction_bias')?.storedAs, 'f32');
  assert.equal(byName.get('model.layers.1.self_attn.indexer.k_norm.bias')?.init, 'norm_bias');
  assert.deepEqual(byName.get('model.layers.3.eh_proj.weight')?.shape, [192, 384]);
  const mtp = specs.filter((s) => s.name.startsWith('model.layers.3.'));
  assert.ok(mtp.length > 0 && mtp.every((s) => s.optional === true));
  assert.ok(specs.filter((s) => !s.name.startsWith('model.layers.3.')).every((s) => s.optional !== true));
  assert.equal(deepseekExpectedTensors(tinyV32({ num_nextn_predict_layers: 0 })).some((s) => s.name.startsWith('model.layers.3.')), false);
});

test('config errors name config.json and the field', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ index_head_dim: undefined }, /'index_head_dim' is missing/],
    [{ n_group: 3 }, /'n_group'/],
    [{ topk_group: 5 }, /'topk_group'/],
    [{ num_experts_per_tok: 9 }, /'num_experts_per_tok'/],
    [{ scoring_func: 'softmax' }, /'scoring_func'/],
    [{ topk_method: 'greedy' }, /'topk_method'/],
    [{ qk_rope_head_dim: 15 }, /'qk_rope_head_dim'/],
    [{ q_lora_rank: null }, /'q_lora_rank'/],
    [{ rope_scaling: { type: 'linear', factor: 2 } }, /rope_scaling type 'linear'/],
  ];
  for (const [over, re] of cases) {
    assert.throws(() => deepseekExpectedTensors(tinyV32(over)), (err: Error) => err.name === 'ModelLoadError' && /config\.json/.test(err.message) && re.test(err.message), JSON.stringify(over));
  }
  // V3 without q_lora_rank uses q_proj
  const specs = deepseekExpectedTensors(tinyV3({ q_lora_rank: null }));
  assert.ok(specs.some((s) => s.name === 'model.layers.0.self_attn.q_proj.weight'));
  assert.ok(!specs.some((s) => s.name.includes('q_a_proj')));
});

test('Index Cache config: index_topk_pattern / index_topk_freq / index_skip_topk_offset as SGLang reads them', () => {
  assert.deepEqual(parseDeepseekConfig(tinyV32()).indexerReusesTopK, [false, false, false]);
  assert.deepEqual(parseDeepseekConfig(tinyV32({ index_topk_pattern: 'FSS' })).indexerReusesTopK, [false, true, true]);
  assert.deepEqual(parseDeepseekConfig(tinyV32({ index_topk_pattern: 'FS' })).indexerReusesTopK, [false, true, false], 'layers past the pattern are full');
  assert.deepEqual(parseDeepseekConfig(tinyV32({ index_topk_pattern: null })).indexerReusesTopK, [false, false, false]);
  // freq/offset: full when max(layer − offset + 1, 0) is a multiple of freq
  assert.deepEqual(Array.from({ length: 6 }, (_, l) => dsaLayerReusesTopK(l, null, 2, 2)), [false, false, true, false, true, false]);
  assert.deepEqual(Array.from({ length: 10 }, (_, l) => dsaLayerReusesTopK(l, null, 4, 3)), [false, false, false, true, true, true, false, true, true, true]);
  assert.deepEqual(parseDeepseekConfig(tinyV32({ index_topk_freq: 2 })).indexerReusesTopK, [false, false, true]);
  // a reusing layer's indexer tensors are optional (a checkpoint may leave them out); the others stay required
  const specs = new Map(deepseekExpectedTensors(tinyV32({ index_topk_pattern: 'FSF' })).map((t) => [t.name, t]));
  assert.equal(specs.get('model.layers.1.self_attn.indexer.wq_b.weight')?.optional, true);
  assert.equal(specs.get('model.layers.1.self_attn.indexer.k_norm.bias')?.optional, true);
  assert.notEqual(specs.get('model.layers.0.self_attn.indexer.wq_b.weight')?.optional, true);
  assert.notEqual(specs.get('model.layers.1.self_attn.q_b_proj.weight')?.optional, true);
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ index_topk_pattern: 'FxS' }, /'index_topk_pattern' must be a string of 'F'/],
    [{ index_topk_pattern: ['F', 'S'] }, /'index_topk_pattern'/],
    [{ index_topk_pattern: 'SFF' }, /'index_topk_pattern' makes layer 0 reuse/],
    [{ index_topk_freq: 0 }, /'index_topk_freq' \(0\) must be ≥ 1/],
    [{ index_topk_freq: 2, index_skip_topk_offset: 0 }, /'index_skip_topk_offset' makes layer 0 reuse/],
  ];
  for (const [over, re] of bad) assert.throws(() => parseDeepseekConfig(tinyV32(over)), (err: Error) => err.name === 'ModelLoadError' && re.test(err.message), JSON.stringify(over));
});

// Checkpoint loading: broken checkpoints fail with ModelLoadError naming file and tensor; other layouts and shapes
// (single file, BF16 linears, other head/expert counts, tied embeddings, config overrides) load and run correctly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelLoadError } from '../src/common/index.js';
import { parseModelConfig } from '../src/config/index.js';
import { generateTinyTensors, writeTinyCheckpoint } from '../src/executor/index.js';
import type { TinyCheckpointOptions } from '../src/executor/index.js';
import { CpuOps, createCpuOps } from '../src/kernels/index.js';
import type { StoredTensor, Weight } from '../src/kernels/index.js';
import { SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { MINIMAX_M2_DEFINITION, loadModel, writeCheckpoint } from '../src/models/index.js';
import type { CausalLM, TensorToWrite } from '../src/models/index.js';

const ops = createCpuOps();
const tmpRoot = mkdtempSync(join(tmpdir(), 'tsglang-loader-'));
process.on('exit', () => rmSync(tmpRoot, { recursive: true, force: true }));
let dirCount = 0;

function tiny(options: TinyCheckpointOptions = {}): string {
  const dir = join(tmpRoot, `ckpt${dirCount++}`);
  writeTinyCheckpoint('minimax-m2', dir, { seed: 11, ...options });
  return dir;
}

function loadErr(dir: string, overrides?: Record<string, unknown>): ModelLoadError {
  try {
    loadModel(dir, { ops, progress: false, overrides });
  } catch (err) {
    assert.ok(err instanceof ModelLoadError, `expected ModelLoadError, got ${String(err)}`);
    return err;
  }
  assert.fail('loading should have failed');
}

const PROMPT = [3, 17, 42, 7, 99, 250, 1, 0, 511, 64, 12];

/** Logits of every position: one prefill and one token at a time; returns both. */
function prefillAndDecode(model: CausalLM, tokens: number[]): { prefill: Float32Array; decode: Float32Array } {
  const V = model.config.vocabSize;
  const mk = (): SimpleBatchContext => new SimpleBatchContext(new KVPool(model.kvPoolLayout(), tokens.length + 1), 1, tokens.length);
  const a = mk();
  const prefill = model.forward(a.makeBatch([{ req: a.addReq(), inputIds: tokens }], { logits: 'all' })).logits;
  const b = mk();
  const rb = b.addReq();
  const decode = new Float32Array(tokens.length * V);
  tokens.forEach((t, i) => decode.set(model.forward(b.makeBatch([{ req: rb, inputIds: [t] }])).logits, i * V));
  return { prefill, decode };
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test('sharded tiny checkpoint loads; prefill == decode', () => {
  const dir = tiny({ numShards: 3 });
  assert.ok(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8').includes('model-00003-of-00003.safetensors'));
  const { model } = loadModel(dir, { ops, progress: false });
  const { prefill, decode } = prefillAndDecode(model, PROMPT);
  assert.ok(maxAbsDiff(prefill, decode) <= 1e-5);
});

test('missing shard → ModelLoadError naming the shard file and a tensor it holds', () => {
  const dir = tiny({ numShards: 2 });
  unlinkSync(join(dir, 'model-00002-of-00002.safetensors'));
  const err = loadErr(dir);
  assert.equal(err.file, join(dir, 'model-00002-of-00002.safetensors'));
  assert.ok(err.tensor !== null && err.message.includes(err.tensor), err.message);
  assert.match(err.message, /missing shard/);
});

test('truncated shard → ModelLoadError naming the file and the tensor whose data is cut', () => {
  const dir = tiny({ numShards: 2 });
  const shard = join(dir, 'model-00001-of-00002.safetensors');
  const size = readFileSync(shard).length;
  truncateSync(shard, size - 1000);
  const err = loadErr(dir);
  assert.equal(err.file, shard);
  assert.ok(err.tensor !== null && err.message.includes(err.tensor), err.message);
  assert.match(err.message, /truncated/);
});

test('bad header JSON → ModelLoadError naming the file (and a tensor of that shard)', () => {
  const dir = tiny({ numShards: 2 });
  const shard = join(dir, 'model-00002-of-00002.safetensors');
  const fd = openSync(shard, 'r+');
  writeSync(fd, Buffer.from('[[[[[['), 0, 6, 8); // corrupt the start of the header, keep its length
  closeSync(fd);
  const err = loadErr(dir);
  assert.equal(err.file, shard);
  assert.match(err.message, /bad safetensors header JSON/);
  assert.ok(err.tensor !== null && err.message.includes(err.tensor));
});

test('tensor shape disagreeing with config.json → ModelLoadError naming file, tensor and both shapes', () => {
  const dir = tiny({ numShards: 1 });
  const cfgPath = join(dir, 'config.json');
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
  cfg.intermediate_size += 8;
  writeFileSync(cfgPath, JSON.stringify(cfg));
  const err = loadErr(dir);
  assert.equal(err.file, join(dir, 'model.safetensors'));
  assert.match(err.tensor ?? '', /experts\.0\.w[13]\.weight$/);
  assert.match(err.message, /has shape \[80, 160\] but .*config\.json implies \[88, 160\]/);
});

test('missing tensor / missing weight_scale_inv → ModelLoadError naming the tensor and checkpoint', () => {
  const config = parseModelConfig(MINIMAX_M2_DEFINITION.tinyConfig('tiny'));
  const all = generateTinyTensors(MINIMAX_M2_DEFINITION.expectedTensors(config), config, { seed: 1 });
  for (const drop of ['model.layers.1.self_attn.k_norm.weight', 'model.layers.0.block_sparse_moe.experts.3.w2.weight_scale_inv']) {
    const dir = join(tmpRoot, `drop${dirCount++}`);
    writeTinyCheckpoint('minimax-m2', dir, { numShards: 1 });
    writeCheckpoint(dir, all.filter((t) => t.name !== drop), 1);
    const err = loadErr(dir);
    assert.equal(err.tensor, drop);
    assert.ok(err.message.includes(drop) && err.message.includes(dir), err.message);
  }
});

test('config problems → ModelLoadError naming config.json and the field', () => {
  const dir = tiny({ numShards: 1 });
  assert.match(loadErr(dir, { architectures: ['NopeForCausalLM'] }).message, /config\.json: unsupported architectures \[NopeForCausalLM\]/);
  assert.match(loadErr(dir, { rotary_dim: 41 }).message, /config\.json: field 'rotary_dim'/);
  assert.match(loadErr(dir, { num_experts_per_tok: 99 }).message, /field 'num_experts_per_tok'/);
  assert.match(loadErr(dir, { hidden_size: 'big' }).message, /field 'hidden_size' must be a non-negative integer/);
  writeFileSync(join(dir, 'config.json'), '{"architectures": [');
  assert.match(loadErr(dir).message, /config\.json is not valid JSON/);
  assert.match(loadErr(join(tmpRoot, 'nowhere')).message, /cannot read .*config\.json/);
});

test('single file, other head / expert counts, some linears BF16: loads, prefill == decode, batch invariant', () => {
  const dir = tiny({
    numShards: 1,
    configOverrides: { hidden_size: 96, num_attention_heads: 8, num_key_value_heads: 4, head_dim: 16, rotary_dim: 8, num_local_experts: 5, num_experts_per_tok: 2, intermediate_size: 40, num_hidden_layers: 3, attn_type_list: [1, 1, 1], vocab_size: 300 },
    storedAs: (s) => (s.storedAs === 'fp8' && /(q_proj|experts\.[02]\.)/.test(s.name) ? 'bf16' : s.storedAs),
  });
  const header = readFileSync(join(dir, 'model.safetensors')).subarray(0, 200000).toString('latin1');
  assert.match(header, /"model\.layers\.0\.self_attn\.q_proj\.weight":\{"dtype":"BF16"/);
  assert.match(header, /"model\.layers\.0\.self_attn\.k_proj\.weight":\{"dtype":"F8_E4M3"/);
  const { model } = loadModel(dir, { ops, progress: false });
  const prompt = PROMPT.map((t) => t % 300);
  const { prefill, decode } = prefillAndDecode(model, prompt);
  assert.ok(maxAbsDiff(prefill, decode) <= 1e-5, `prefill vs decode ${maxAbsDiff(prefill, decode)}`);
  // batch invariance: the prompt batched after another request gives bit-identical logits
  const ctx = new SimpleBatchContext(new KVPool(model.kvPoolLayout(), 64), 2, 32);
  const [r0, r1] = [ctx.addReq(), ctx.addReq()];
  const both = model.forward(ctx.makeBatch([{ req: r0, inputIds: [5, 6, 7] }, { req: r1, inputIds: prompt }], { logits: 'all' })).logits;
  assert.deepEqual(both.subarray(3 * 300), prefill);
});

test('the same weights stored as FP8 (power-of-two scales), BF16 or F32 give bit-identical logits', () => {
  const fp8 = tiny({ pow2Scales: true });
  const bf16 = tiny({ pow2Scales: true, storedAs: (s) => (s.storedAs === 'fp8' ? 'bf16' : s.storedAs) });
  const f32 = tiny({ pow2Scales: true, storedAs: (s) => (s.storedAs === 'fp8' ? 'f32' : s.storedAs), numShards: 1 });
  const results = [fp8, bf16, f32].map((dir) => prefillAndDecode(loadModel(dir, { ops, progress: false }).model, PROMPT).prefill);
  assert.deepEqual(results[1], results[0]);
  assert.deepEqual(results[2], results[0]);
});

test('a backend that keeps FP8/BF16 as stored computes the same logits as the f32 reference', () => {
  class StoredFormatOps extends CpuOps {
    override prepareWeight(t: StoredTensor): Weight {
      if (t.dtype === 'f8_e4m3' && t.scale) return { format: 'fp8_block', shape: t.shape, data: t.bytes, scale: t.scale };
      if (t.dtype === 'bf16' && t.shape.length === 2) return { format: 'bf16', shape: t.shape, data: new Uint16Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 2) };
      return super.prepareWeight(t);
    }
  }
  const dir = tiny();
  const ref = prefillAndDecode(loadModel(dir, { ops, progress: false }).model, PROMPT).prefill;
  const stored = loadModel(dir, { ops: new StoredFormatOps(), progress: false }).model;
  assert.deepEqual(prefillAndDecode(stored, PROMPT).prefill, ref);
});

test('--json-model-override-args and tied embeddings: overrides change the model, lm_head may be absent', () => {
  const dir = tiny({ configOverrides: { tie_word_embeddings: true } });
  assert.ok(!readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8').includes('lm_head.weight'));
  const base = loadModel(dir, { ops, progress: false });
  const over = loadModel(dir, { ops, progress: false, overrides: '{"num_experts_per_tok": 1}' });
  assert.equal(over.config.raw.num_experts_per_tok, 1);
  assert.equal(over.config.raw.use_mtp, true, 'unknown fields are kept');
  const a = prefillAndDecode(base.model, PROMPT.slice(0, 4)).prefill;
  const b = prefillAndDecode(over.model, PROMPT.slice(0, 4)).prefill;
  assert.ok(maxAbsDiff(a, b) > 1e-3, 'top-1 routing must change the logits');
  assert.throws(() => loadModel(dir, { ops, progress: false, overrides: '{bad' }), (e: unknown) => e instanceof ModelLoadError && /--json-model-override-args is not valid JSON/.test(e.message));
});

test('a NaN norm weight or an Inf FP8 block scale → ModelLoadError naming the tensor (they would serve token 0 forever)', () => {
  const config = parseModelConfig(MINIMAX_M2_DEFINITION.tinyConfig('tiny'));
  const all = generateTinyTensors(MINIMAX_M2_DEFINITION.expectedTensors(config), config, { seed: 1 });
  const poison = (t: TensorToWrite, value: number): TensorToWrite => {
    const bytes = new Uint8Array(t.data);
    const dv = new DataView(bytes.buffer);
    if (t.dtype === 'f32') dv.setFloat32(4, value, true);
    else if (t.dtype === 'bf16') dv.setUint16(2, value !== value ? 0x7fc0 : value > 0 ? 0x7f80 : 0xff80, true);
    else assert.fail(`unexpected dtype ${t.dtype} of ${t.name}`);
    return { ...t, data: bytes };
  };
  for (const [bad, value] of [['model.layers.1.post_attention_layernorm.weight', NaN], ['model.norm.weight', -Infinity], ['model.layers.0.block_sparse_moe.experts.3.w2.weight_scale_inv', Infinity]] as const) {
    const dir = join(tmpRoot, `nan${dirCount++}`);
    writeTinyCheckpoint('minimax-m2', dir, { numShards: 1 });
    writeCheckpoint(dir, all.map((t) => (t.name === bad ? poison(t, value) : t)), 1);
    const err = loadErr(dir);
    assert.equal(err.tensor, bad);
    assert.ok(err.message.includes(`tensor '${bad}' holds ${String(value)} at element 1`), err.message);
  }
  // the same checkpoint unpoisoned loads
  const ok = join(tmpRoot, `nan${dirCount++}`);
  writeTinyCheckpoint('minimax-m2', ok, { numShards: 1 });
  writeCheckpoint(ok, all, 1);
  loadModel(ok, { ops, progress: false });
});

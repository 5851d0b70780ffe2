import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidRequestError, ModelLoadError } from '../common/index.js';
import { configBool, configInt, configString, deriveContextLength, loadModelConfig, parseModelConfig, parseOverrideArgs } from './model_config.js';

const BASE = { architectures: ['MiniMaxM2ForCausalLM'], hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 100, custom_field: { a: 1 } };

test('parseModelConfig: typed fields, defaults, unknown fields kept in raw', () => {
  const c = parseModelConfig({ ...BASE, quantization_config: { quant_method: 'fp8', weight_block_size: [64, 32], modules_to_not_convert: ['gate'] } }, 'x/config.json');
  assert.equal(c.hiddenSize, 64);
  assert.equal(c.numKeyValueHeads, 4, 'defaults to num_attention_heads');
  assert.equal(c.headDim, 16, 'defaults to hidden/heads');
  assert.equal(c.rmsNormEps, 1e-6);
  assert.equal(c.tieWordEmbeddings, false);
  assert.deepEqual(c.quantization?.weightBlockSize, [64, 32]);
  assert.deepEqual(c.quantization?.modulesToNotConvert, ['gate']);
  assert.deepEqual(c.raw.custom_field, { a: 1 });
  assert.equal(configInt(c, 'missing', 7), 7);
  assert.equal(configBool(c, 'missing', true), true);
  assert.equal(configString(c, 'missing', 'z'), 'z');
});

test('parseModelConfig: errors name the file and the field', () => {
  const { vocab_size: _omit, ...noVocab } = BASE;
  assert.throws(() => parseModelConfig(noVocab, 'm/config.json'), (e: unknown) => e instanceof ModelLoadError && e.message === "m/config.json: field 'vocab_size' is missing" && e.file === 'm/config.json');
  assert.throws(() => parseModelConfig({ ...BASE, architectures: [] }, 'm/config.json'), /field 'architectures' must be a non-empty list/);
  assert.throws(() => parseModelConfig({ ...BASE, num_attention_heads: 2.5 }), /'num_attention_heads' must be a non-negative integer, got 2.5/);
  assert.throws(() => parseModelConfig({ ...BASE, tie_word_embeddings: 'yes' }), /'tie_word_embeddings' must be true or false/);
  assert.throws(() => parseModelConfig({ ...BASE, quantization_config: { weight_block_size: [128] } }), /weight_block_size' must be two positive integers/);
});

test('loadModelConfig: overrides replace top-level keys (string or object); bad override JSON is a ModelLoadError', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-cfg-'));
  try {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...BASE, rope_theta: 5 }));
    const c = loadModelConfig(dir, '{"rope_theta": 7, "custom_field": {"b": 2}}');
    assert.equal(c.ropeTheta, 7);
    assert.deepEqual(c.raw.custom_field, { b: 2 }, 'top-level replace, not deep merge');
    assert.equal(c.source, join(dir, 'config.json'));
    assert.equal(loadModelConfig(dir, { num_hidden_layers: 1 }).numHiddenLayers, 1);
    assert.throws(() => parseOverrideArgs('[1]'), /must be a JSON object/);
    assert.throws(() => parseOverrideArgs('{'), /not valid JSON/);
    assert.deepEqual(parseOverrideArgs(undefined), {});
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('deriveContextLength: default, shorter override, longer refused unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN', () => {
  assert.equal(deriveContextLength(4096, null, undefined, {}), 4096);
  assert.equal(deriveContextLength(4096, 1000, undefined, {}), 1000);
  assert.equal(deriveContextLength(4096, 4096, undefined, {}), 4096);
  assert.throws(() => deriveContextLength(4096, 999999999, undefined, {}), (e: Error) => e instanceof InvalidRequestError
    && e.message === 'Warning: User-specified context_length (999999999) is greater than the derived context_length (4096). '
      + "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ from max_position_embeddings in the model's config. "
      + 'To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1');
  assert.throws(() => deriveContextLength(4096, 4097, undefined, { SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: '0' }), InvalidRequestError);
  const warnings: string[] = [];
  assert.equal(deriveContextLength(4096, 8192, (m) => warnings.push(m), { SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: '1' }), 8192);
  assert.equal(deriveContextLength(2048, 3000, (m) => warnings.push(m), { SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN: 'true' }), 3000);
  assert.equal(warnings.length, 2);
  assert.match(warnings[0], /^Warning: User-specified context_length \(8192\) is greater than the derived context_length \(4096\)\./);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createCpuOps } from '../kernels/index.js';
import { loadModel } from '../models/index.js';
import { parseMakeTinyArgs, run } from './make_tiny.js';

test('make-tiny writes a loadable checkpoint with the requested shards and config overrides', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-mt-'));
  try {
    const out = join(dir, 'm');
    assert.equal(await run(['--arch', 'minimax-m2', '--out', out, '--seed', '3', '--num-shards', '1', '--json-model-override-args', '{"num_local_experts": 4}']), 0);
    assert.ok(existsSync(join(out, 'model.safetensors')));
    const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    assert.equal(cfg.num_local_experts, 4);
    assert.deepEqual(cfg.architectures, ['MiniMaxM2ForCausalLM']);
    const { model } = loadModel(out, { ops: createCpuOps(), progress: false });
    assert.equal(model.config.vocabSize, cfg.vocab_size);
    assert.equal(await run(['--arch', 'nope', '--out', out]), 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('parseMakeTinyArgs: defaults and flag errors', () => {
  const a = parseMakeTinyArgs(['--arch', 'minimax-m2', '--out', 'x']);
  assert.deepEqual([a.seed, a.preset, a.numShards, a.configOverrides], [0, 'tiny', 2, {}]);
  assert.throws(() => parseMakeTinyArgs(['--out', 'x']), /--arch is required/);
  assert.throws(() => parseMakeTinyArgs(['--arch', 'a', '--out', 'x', '--num-shards', '0']), /--num-shards must be an integer >= 1/);
  assert.throws(() => parseMakeTinyArgs(['--arch', 'a', '--out', 'x', '--json-model-override-args', '[]']), /must be a JSON object/);
});

test('make-tiny on an uncreatable --out prints one error line naming the path and exits 1', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-mt-'));
  try {
    const file = join(dir, 'plain-file');
    writeFileSync(file, 'x');
    const outs = [join(file, 'sub')];
    if (existsSync('/proc/self')) outs.push('/proc/tsglang-nope');
    for (const out of outs) {
      for (const arch of ['deepseek-v32', 'minimax-m2']) {
        const r = spawnSync(process.execPath, [resolve('bin', 'tsglang.js'), 'make-tiny', '--arch', arch, '--out', out], { encoding: 'utf8', timeout: 60_000 });
        assert.equal(r.status, 1, `${arch} ${out}: status ${r.status} signal ${r.signal} stderr ${r.stderr}`);
        const lines = r.stderr.trim().split('\n');
        assert.equal(lines.length, 1, r.stderr);
        assert.match(lines[0], /^tsglang make-tiny: error: /);
        assert.ok(lines[0].includes(out.startsWith('/proc') ? out : file), lines[0]);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('make-tiny --preset demo: the trained checkpoint (config from the asset, overrides on top, every tensor loads); other archs refused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-mt-'));
  try {
    const out = join(dir, 'demo');
    assert.equal(await run(['--arch', 'deepseek-v32', '--preset', 'demo', '--out', out, '--num-shards', '1', '--json-model-override-args', '{"max_position_embeddings": 2048}']), 0);
    const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    assert.deepEqual(cfg.architectures, ['DeepseekV32ForCausalLM']);
    assert.equal(cfg.max_position_embeddings, 2048);
    assert.equal(cfg.num_nextn_predict_layers, 1);
    for (const f of ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json']) assert.ok(existsSync(join(out, f)), f);
    const { model } = loadModel(out, { ops: createCpuOps(), progress: false });
    assert.equal(model.config.vocabSize, cfg.vocab_size);
    assert.equal(await run(['--arch', 'deepseek-v3', '--preset', 'demo', '--out', join(dir, 'x')]), 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

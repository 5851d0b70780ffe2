// `tsglang bench-one-batch`: SGLang's flags (multi-value sweeps) and printed lines, and the JSON lines it appends.
// Figures are not asserted (never timed tests): only the shape of the output and the counts it reports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES_DIR, NEEDS_SHARED, TSGLANG_BIN } from './helpers/paths.js';
import { checkSweepFitsContext, parseBenchOneBatchArgs, syntheticPrompts } from '../src/cli/bench_one_batch.js';

test('parseBenchOneBatchArgs: nargs+ sweeps, defaults, bad values name the flag', () => {
  const a = parseBenchOneBatchArgs(['--model-path', 'M', '--batch-size', '1', '8', '32', '--input-len', '512', '--output-len', '4', '--threads', '1']);
  assert.deepEqual([a.batchSize, a.inputLen, a.outputLen, a.threads], [[1, 8, 32], [512], [4], 1]);
  const d = parseBenchOneBatchArgs(['--model-path', 'M']);
  assert.deepEqual([d.batchSize, d.inputLen, d.outputLen, d.runName, d.resultFilename], [[1], [1024], [16], 'default', 'result.jsonl']);
  assert.throws(() => parseBenchOneBatchArgs(['--batch-size', '1']), /--model-path is required/);
  assert.throws(() => parseBenchOneBatchArgs(['--model-path', 'M', '--threads', 'x']), /--threads/);
  assert.throws(() => parseBenchOneBatchArgs(['--model-path', 'M', '--backend', 'gpu']), /backend must be one of/);
});

test('checkSweepFitsContext: the longest input + output must fit the context; the error names both flags', () => {
  checkSweepFitsContext([1024, 4080], [16], 4096);
  assert.throws(() => checkSweepFitsContext([1024, 4096], [1], 4096),
    /^InvalidRequestError: --input-len 4096 \+ --output-len 1 = 4097 tokens exceeds the model's context length \(4096 tokens, max_position_embeddings in config.json\)/);
  assert.throws(() => checkSweepFitsContext([8], [16, 4089], 4096), /--output-len 4089 = 4097 tokens exceeds/);
});

test('tsglang bench-one-batch with --input-len past the context stops before loading weights: exit 2, message on stderr', NEEDS_SHARED, () => {
  const r = spawnSync(process.execPath, [TSGLANG_BIN, 'bench-one-batch', '--model-path', join(FIXTURES_DIR, 'tiny-minimax-m2'),
    '--input-len', '200000', '--output-len', '4', '--threads', '1', '--result-filename', ''], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr, "tsglang bench-one-batch: --input-len 200000 + --output-len 4 = 200004 tokens exceeds the model's context length (196608 tokens, max_position_embeddings in config.json); use a smaller --input-len or --output-len\n");
});

test('syntheticPrompts: ids below min(10000, vocab), deterministic per seed', () => {
  const p = syntheticPrompts(3, 50, 512, 7);
  assert.deepEqual(p.map((r) => r.length), [50, 50, 50]);
  assert.ok(p.flat().every((id) => Number.isInteger(id) && id >= 0 && id < 512));
  assert.deepEqual(syntheticPrompts(3, 50, 512, 7), p);
  assert.notDeepEqual(syntheticPrompts(3, 50, 512, 8), p);
});

test('tsglang bench-one-batch on the tiny MiniMax fixture prints SGLang\'s lines and appends one JSON line per run', NEEDS_SHARED, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-bob-'));
  try {
    const results = join(dir, 'r.jsonl');
    const r = spawnSync(process.execPath, [TSGLANG_BIN, 'bench-one-batch', '--model-path', join(FIXTURES_DIR, 'tiny-minimax-m2'),
      '--batch-size', '1', '3', '--input-len', '6', '--output-len', '4', '--threads', '1', '--run-name', 't', '--result-filename', results], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines[0], 'max_total_num_tokens=30');
    assert.equal(lines[1], 'Warmup ...');
    const bench = lines.slice(lines.indexOf('Benchmark ...') + 1);
    const num = '\\s*\\d+\\.\\d+';
    const prefill = new RegExp(`^Prefill\\. latency:${num} s, throughput:${num} token/s$`);
    const decode = (bs: number, i: number): RegExp => new RegExp(`^Decode ${i}\\. Batch size: ${bs}, latency:${num} s, throughput:${num} token/s$`);
    const median = new RegExp(`^Decode\\.  median latency:${num} s, median throughput:${num} token/s$`);
    const total = new RegExp(`^Total\\. latency:${num} s, throughput:${num} token/s$`);
    // per run: prefill, output_len - 1 decode lines, median, total
    const expected = [prefill, decode(1, 0), decode(1, 1), decode(1, 2), median, total, prefill, decode(3, 0), decode(3, 1), decode(3, 2), median, total];
    assert.equal(bench.length, expected.length, bench.join('\n'));
    bench.forEach((l, i) => assert.match(l, expected[i]));
    assert.match(lines[2], /^Prefill\. latency: \d\.\d{5} s, throughput: {0,8}\d+\.\d\d token\/s$/);
    const rows = readFileSync(results, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(rows.map((o) => Object.keys(o)), Array(2).fill(['run_name', 'batch_size', 'input_len', 'output_len', 'prefill_latency', 'prefill_throughput', 'median_decode_latency', 'median_decode_throughput', 'total_latency', 'overall_throughput']));
    assert.deepEqual(rows.map((o) => [o.run_name, o.batch_size, o.input_len, o.output_len]), [['t', 1, 6, 4], ['t', 3, 6, 4]]);
    for (const o of rows) {
      assert.ok(Math.abs((o.prefill_throughput as number) - (6 * (o.batch_size as number)) / (o.prefill_latency as number)) < 1e-6 * (o.prefill_throughput as number));
      assert.ok(Math.abs((o.overall_throughput as number) - (10 * (o.batch_size as number)) / (o.total_latency as number)) < 1e-6 * (o.overall_throughput as number));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

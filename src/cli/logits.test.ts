// `tsglang logits` end to end on the MiniMax fixture (spawned CLI: stdout is exactly one JSON object).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR, NEEDS_SHARED, readSharedJson, TSGLANG_BIN } from '../../test/helpers/paths.js';
import { parseLogitsArgs } from './logits.js';

const DIR = join(FIXTURES_DIR, 'tiny-minimax-m2');
const golden = readSharedJson<unknown>(join(DIR, 'golden.json'), { prompts: [] }) as { prompts: { tokens: number[]; logits_at: { position: number; logits: number[] }[]; logits_last: number[]; greedy: { tokens: number[] } }[] };

function runCli(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [TSGLANG_BIN, 'logits', ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('tsglang logits reproduces golden logits_at and greedy tokens; stdout is one JSON object', NEEDS_SHARED, () => {
  const p = golden.prompts[1];
  const positions = p.logits_at.map((a) => a.position);
  const r = runCli(['--model-path', DIR, '--input-ids', p.tokens.join(','), '--positions', positions.join(','), '--greedy', '16']);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { logits: Record<string, number[]>; greedy: number[] };
  assert.deepEqual(Object.keys(out.logits), positions.map(String));
  for (const at of p.logits_at) {
    const got = out.logits[String(at.position)];
    assert.equal(got.length, at.logits.length);
    assert.ok(got.every((v, i) => Math.abs(v - at.logits[i]) <= 2e-3));
  }
  assert.deepEqual(out.greedy, p.greedy.tokens);
});

test('tsglang logits: default position is the last one, no greedy key without --greedy', NEEDS_SHARED, () => {
  const p = golden.prompts[0];
  const r = runCli(['--model-path', DIR, '--input-ids', p.tokens.join(',')]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(out), ['logits']);
  assert.deepEqual(Object.keys(out.logits), [String(p.tokens.length - 1)]);
  assert.ok(out.logits[String(p.tokens.length - 1)].every((v: number, i: number) => Math.abs(v - p.logits_last[i]) <= 2e-3));
});

test('tsglang logits: errors go to stderr with a non-zero exit and empty stdout', NEEDS_SHARED, () => {
  const badId = runCli(['--model-path', DIR, '--input-ids', '1,2,512']);
  assert.equal(badId.code, 2);
  assert.equal(badId.stdout, '');
  assert.match(badId.stderr, /id 512 at position 2 is outside the vocabulary \[0, 512\)/);
  const noModel = runCli(['--model-path', join(DIR, 'nope'), '--input-ids', '1']);
  assert.equal(noModel.code, 1);
  assert.match(noModel.stderr, /^tsglang logits: error: cannot read .*config\.json/);
  assert.doesNotMatch(noModel.stderr, /ModelLoadError/);
});

test('parseLogitsArgs: flags and their errors', NEEDS_SHARED, () => {
  const a = parseLogitsArgs(['--model-path', 'm', '--input-ids', '3, 17,42', '--positions', 'all', '--greedy', '2', '--json-model-override-args', '{}']);
  assert.deepEqual([a.modelPath, a.inputIds, a.positions, a.greedy, a.overrideArgs], ['m', [3, 17, 42], 'all', 2, '{}']);
  assert.equal(parseLogitsArgs(['--model-path', 'm', '--input-ids', '1']).positions, 'last');
  assert.throws(() => parseLogitsArgs(['--input-ids', '1']), /--model-path is required/);
  assert.throws(() => parseLogitsArgs(['--model-path', 'm', '--input-ids', '1,x']), /'x' is not a non-negative integer/);
  assert.throws(() => parseLogitsArgs(['--model-path', 'm', '--input-ids', '1,2', '--positions', '2']), /--positions: 2 is outside the prompt \(length 2\)/);
  assert.throws(() => parseLogitsArgs(['--model-path', 'm', '--input-ids', '1', '--greedy', '-1']), /--greedy/);
  assert.throws(() => parseLogitsArgs(['--model-path', 'm', '--input-ids', '1', '--bogus']), /Unknown option '--bogus'/);
});

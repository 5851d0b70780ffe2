// `tsglang logits --mtp-next-tokens` end to end (spawned CLI): MTP logits of the DeepSeek-V3.2 fixture vs golden.json,
// the length check, and the error on a checkpoint without an MTP layer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES_DIR, NEEDS_SHARED, TSGLANG_BIN } from '../helpers/paths.js';
import { writeTinyCheckpoint } from '../../src/executor/index.js';

const DIR = join(FIXTURES_DIR, 'tiny-deepseek-v32');

interface MtpGolden { tokens: number[]; mtp: { next_tokens: number[]; logits_at: { position: number; logits: number[] }[] }; logits_at: { position: number; logits: number[] }[] }

function runLogits(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [TSGLANG_BIN, 'logits', ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('--mtp-next-tokens prints mtp_logits of the asked positions within 2e-3 of golden.json', NEEDS_SHARED, () => {
  const golden = JSON.parse(readFileSync(join(DIR, 'golden.json'), 'utf8')) as { prompts: MtpGolden[] };
  const p = golden.prompts.find((x) => x.tokens.length > 16)!;
  const positions = p.mtp.logits_at.map((x) => x.position);
  const r = runLogits(['--model-path', DIR, '--input-ids', p.tokens.join(','), '--positions', positions.join(','), '--mtp-next-tokens', p.mtp.next_tokens.join(',')]);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { logits: Record<string, number[]>; mtp_logits: Record<string, number[]> };
  assert.deepEqual(Object.keys(out.mtp_logits).map(Number).sort((a, b) => a - b), positions);
  for (const la of p.mtp.logits_at) {
    const got = out.mtp_logits[String(la.position)];
    assert.equal(got.length, la.logits.length);
    assert.ok(got.every((x, i) => Math.abs(x - la.logits[i]) <= 2e-3), `mtp position ${la.position}`);
  }
  for (const la of p.logits_at) assert.ok(out.logits[String(la.position)].every((x, i) => Math.abs(x - la.logits[i]) <= 2e-3));
});

test('--mtp-next-tokens of the wrong length is a usage error naming both lengths', NEEDS_SHARED, () => {
  const r = runLogits(['--model-path', DIR, '--input-ids', '5,6,7', '--mtp-next-tokens', '6,7']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--mtp-next-tokens has 2 ids but the prompt has 3 positions/);
  assert.equal(r.stdout, '');
});

test('--mtp-next-tokens on a checkpoint without the MTP layer fails and says so', NEEDS_SHARED, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-dsv3-nomtp-'));
  try {
    writeTinyCheckpoint('deepseek-v3', dir, { seed: 5, configOverrides: { num_nextn_predict_layers: 0 } });
    // the config claims one MTP layer, the checkpoint has none: it still loads (MTP tensors are optional)
    const r = runLogits(['--model-path', dir, '--input-ids', '5,6,7', '--mtp-next-tokens', '6,7,8', '--json-model-override-args', '{"num_nextn_predict_layers": 1}']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /no MTP layer/);
    assert.equal(r.stdout, '');
    const ok = runLogits(['--model-path', dir, '--input-ids', '5,6,7']);
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal((JSON.parse(ok.stdout) as { logits: Record<string, number[]> }).logits['2'].length, 512);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 14 defect 4: `make-tiny` checkpoints stop. Every family gets the embedded default's EOS shaping and its
// 4096-token context (the README's promise), so a sampled request without max_tokens ends by itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseMakeTinyArgs, run } from '../src/cli/make_tiny.js';
import { Engine } from '../src/engine/index.js';

for (const arch of ['minimax-m2', 'deepseek-v32', 'deepseek-v3']) {
  test(`make-tiny --arch ${arch}: EOS-shaped by default, context 4096; sampled answers end with "stop"`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tsglang-mte-'));
    try {
      assert.equal(await run(['--arch', arch, '--out', dir, '--num-shards', '1']), 0);
      const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { max_position_embeddings: number };
      assert.equal(cfg.max_position_embeddings, 4096);
      const e = await Engine.create({ modelPath: dir, useWorkerThread: false, numThreads: 1, memFractionStatic: 0.2 });
      try {
        const ends = await Promise.all(Array.from({ length: 6 }, async (_, i) => {
          let last = null;
          for await (const o of e.generate({ rid: `r${i}`, text: `Who won the world series in 2020? (${i})`, samplingParams: { temperature: 1, seed: 100 + i, maxNewTokens: 2000 } })) last = o;
          return last!;
        }));
        const stopped = ends.filter((o) => o.finishReason?.type === 'stop');
        assert.ok(stopped.length >= 5, `${stopped.length}/6 stopped: ${ends.map((o) => o.completionTokens).join(' ')}`);
      } finally {
        await e.shutdown();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('make-tiny --eos-shaping on|off (default on)', () => {
  assert.equal(parseMakeTinyArgs(['--arch', 'minimax-m2', '--out', 'x']).eosShaping, true);
  assert.equal(parseMakeTinyArgs(['--arch', 'minimax-m2', '--out', 'x', '--eos-shaping', 'off']).eosShaping, false);
  assert.throws(() => parseMakeTinyArgs(['--arch', 'minimax-m2', '--out', 'x', '--eos-shaping', 'maybe']), /--eos-shaping must be on or off/);
});

// The DeepSeek-V3.2 page's `--tp-size 8 --dp-size 8 --enable-dp-attention` command as written (only --model-path
// points at a make-tiny DeepSeek-V3.2 checkpoint) on this machine's cores: 8 attention-DP groups start (attn_tp 1, the
// MoE over all 8 ranks), 8 concurrent requests land one per group (visible in /get_server_info's internal_states),
// the greedy tokens equal the tp 1 engine's, a chat request goes through the reasoning parser, SIGTERM exits cleanly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run as makeTiny } from '../../src/cli/make_tiny.js';
import { Engine } from '../../src/engine/index.js';
import { TSGLANG_BIN } from '../helpers/paths.js';

interface ServerInfo { dp_size: number; enable_dp_attention: boolean; internal_states: { num_running_reqs: number }[] }

test('seed command --tp-size 8 --dp-size 8 --enable-dp-attention (DeepSeek-V3.2): 8 groups, one request each, tp 1 tokens, clean exit', { timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-dpa-'));
  const child = await (async () => {
    assert.equal(await makeTiny(['--arch', 'deepseek-v32', '--out', dir, '--num-shards', '1']), 0);
    return spawn(process.execPath, [TSGLANG_BIN, 'serve', '--model-path', dir, '--trust-remote-code', '--tp-size', '8', '--dp-size', '8', '--enable-dp-attention',
      '--reasoning-parser', 'deepseek-v3', '--port', '0', '--max-total-tokens', '2048'], { stdio: ['ignore', 'ignore', 'pipe'] });
  })();
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.stderr!.on('data', (d: string) => {
        stderr += d;
        const m = /Uvicorn running on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
        if (m && stderr.includes('ready to roll')) resolve(Number(m[1]));
      });
      void exited.then((code) => reject(new Error(`server exited with ${code}:\n${stderr}`)));
    });
    const base = `http://127.0.0.1:${port}`;
    for (let g = 0; g < 8; g++) assert.match(stderr, new RegExp(`\\[DP${g} TP${g}\\] Load weight end\\. .*tp_size=8, dp_size=8, attn_tp_size=1`));
    // 8 concurrent streams: each on its own group, all running at once
    const ctrl = new AbortController();
    const firstChunks: Promise<void>[] = [];
    for (let i = 0; i < 8; i++) {
      firstChunks.push((async () => {
        const r = await fetch(`${base}/generate`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, signal: ctrl.signal,
          body: JSON.stringify({ rid: `s${i}`, input_ids: [3, 4, 5 + i], stream: true, sampling_params: { max_new_tokens: 3000, temperature: 0, ignore_eos: true } }),
        });
        const reader = r.body!.getReader();
        await reader.read();
        void (async () => { try { for (;;) if ((await reader.read()).done) break; } catch { /* aborted */ } })();
      })());
    }
    await Promise.all(firstChunks);
    const info = (await (await fetch(`${base}/get_server_info`)).json()) as ServerInfo;
    assert.equal(info.dp_size, 8);
    assert.equal(info.enable_dp_attention, true);
    assert.deepEqual(info.internal_states.map((s) => s.num_running_reqs), [1, 1, 1, 1, 1, 1, 1, 1]);
    for (let i = 0; i < 8; i++) await fetch(`${base}/abort_request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ rid: `s${i}` }) });
    ctrl.abort();
    // greedy tokens as on one rank
    const ids = [1, 20, 300, 400, 5];
    const got = await Promise.all([0, 1].map(async () => ((await (await fetch(`${base}/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: ids, sampling_params: { max_new_tokens: 12, temperature: 0, ignore_eos: true } }),
    })).json()) as { output_ids: number[] }).output_ids));
    const e = await Engine.create({ modelPath: dir, skipTokenizerInit: true, useWorkerThread: false, numThreads: 1, maxTotalTokens: 1024 });
    const ref: number[] = [];
    for await (const o of e.generate({ rid: 'ref', inputIds: ids, stream: false, samplingParams: { temperature: 0, maxNewTokens: 12, ignoreEos: true } })) ref.push(...o.outputIds);
    await e.shutdown();
    assert.deepEqual(got, [ref, ref]);
    const chat = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0 }),
    });
    assert.equal(chat.status, 200);
    const after = (await (await fetch(`${base}/get_server_info`)).json()) as ServerInfo;
    assert.deepEqual(after.internal_states.map((s) => s.num_running_reqs), [0, 0, 0, 0, 0, 0, 0, 0]);
  } finally {
    if (child.exitCode === null) child.kill('SIGTERM');
  }
  const t0 = Date.now();
  assert.equal(await exited, 0, stderr.slice(-2000));
  assert.ok(Date.now() - t0 < 60_000, 'SIGTERM stops every group and the server');
  assert.doesNotMatch(stderr, /ERROR/);
  rmSync(dir, { recursive: true, force: true });
});

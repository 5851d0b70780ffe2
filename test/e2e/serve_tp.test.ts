// The MiniMax-M2.7 recipe's 8-GPU command as written (`--tp 8 --ep 8 --tool-call-parser minimax-m2 --reasoning-parser
// minimax-append-think --trust-remote-code --mem-fraction-static 0.85`, only --model-path left to the embedded default)
// on this machine's cores: the server starts 8 rank threads, answers a chat request, gives the tp 1 engine's greedy
// tokens, and exits cleanly on SIGTERM.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../../src/engine/index.js';
import { TSGLANG_BIN } from '../helpers/paths.js';
import { freePort } from '../../bench/serve_child.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');
const MODEL_DIR = join(HOME, '.cache', 'tsglang', 'tiny-minimax-m2-v3');

test('serve --tp 8 --ep 8 (the MiniMax recipe command): 8 rank threads start, answer as tp 1, exit on SIGTERM', async () => {
  mkdirSync(HOME, { recursive: true });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--tp', '8', '--ep', '8', '--tool-call-parser', 'minimax-m2', '--reasoning-parser', 'minimax-append-think', '--trust-remote-code', '--mem-fraction-static', '0.85', '--port', String(port)], {
    env: { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${stderr}`)), 300_000);
      child.stderr!.on('data', (d: string) => {
        stderr += d;
        if (stderr.includes('The server is fired up and ready to roll!')) { clearTimeout(timer); resolve(); }
      });
      void exited.then((code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${stderr}`)); });
    });
    for (let r = 0; r < 8; r++) assert.match(stderr, new RegExp(`\\[TP${r}\\] Load weight end\\. weight bytes=\\d+ .*tp_size=8, ep_size=8`));
    const chat = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0 }),
    });
    assert.equal(chat.status, 200);
    const body = (await chat.json()) as { choices: { finish_reason: string }[]; usage: { completion_tokens: number } };
    assert.ok(body.usage.completion_tokens >= 1 && body.usage.completion_tokens <= 8);
    const ids = [1, 20, 300, 4000, 5];
    const gen = (await (await fetch(`${base}/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: ids, sampling_params: { max_new_tokens: 8, temperature: 0, ignore_eos: true } }),
    })).json()) as { output_ids: number[] };
    // the same request on one rank, in process
    const e = await Engine.create({ modelPath: MODEL_DIR, skipTokenizerInit: true, useWorkerThread: false, numThreads: 1, maxTotalTokens: 1024 });
    const ref: number[] = [];
    for await (const o of e.generate({ rid: 'ref', inputIds: ids, stream: false, samplingParams: { temperature: 0, maxNewTokens: 8, ignoreEos: true } })) ref.push(...o.outputIds);
    await e.shutdown();
    assert.deepEqual(gen.output_ids, ref);
  } finally {
    if (child.exitCode === null) child.kill('SIGTERM');
  }
  const t0 = Date.now();
  assert.equal(await exited, 0);
  assert.ok(Date.now() - t0 < 60_000, 'SIGTERM stops every rank and the server');
});

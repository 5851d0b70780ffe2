// The MiniMax page's AMD command (`--kv-cache-dtype fp8_e4m3 --attention-backend triton`, without --tp/--ep until TP/EP
// land) starts, says in one warning what the GPU knob becomes on CPU, keeps the KV cache in FP8, and answers the seed
// curl request (embedded default model, same cache as the other e2e tests).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TSGLANG_BIN } from '../helpers/paths.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');

test('seed AMD command (fp8_e4m3 KV, triton attention backend) starts and answers the seed chat request', { timeout: 240_000 }, async () => {
  mkdirSync(HOME, { recursive: true });
  const child = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--port', '0', '--num-threads', '1', '--tool-call-parser', 'minimax-m2',
    '--reasoning-parser', 'minimax-append-think', '--trust-remote-code', '--mem-fraction-static', '0.85', '--kv-cache-dtype', 'fp8_e4m3',
    '--attention-backend', 'triton'], { env: { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  const ready = new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (d: string) => {
      stderr += d;
      const port = /Uvicorn running on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      if (port && stderr.includes('ready to roll')) resolve(Number(port[1]));
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}:\n${stderr}`)));
  });
  try {
    const port = await ready;
    const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'MiniMaxAI/MiniMax-M2.7', max_tokens: 64,
        messages: [{ role: 'system', content: [{ type: 'text', text: 'You are a helpful assistant.' }] }, { role: 'user', content: [{ type: 'text', text: 'Who won the world series in 2020?' }] }],
      }),
    });
    assert.equal(r.status, 200);
    const body = await r.json() as { choices: { message: { content: string | null }; finish_reason: string }[]; usage: { completion_tokens: number } };
    assert.ok(body.usage.completion_tokens > 0 && ['stop', 'length'].includes(body.choices[0].finish_reason));
    assert.match(stderr, /WARNING GPU-only settings accepted with no effect on CPU: --attention-backend triton\. tsglang uses instead: /);
    assert.match(stderr, /KV Cache is allocated\. .*kv_cache_dtype=fp8_e4m3: k fp8_e4m3, v fp8_e4m3/);
    for (let i = 0; i < 100 && !stderr.includes('"POST /v1/chat/completions HTTP/1.1" 200 OK'); i++) await new Promise((res) => setTimeout(res, 20));
    assert.match(stderr, /- "POST \/v1\/chat\/completions HTTP\/1\.1" 200 OK/);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
});

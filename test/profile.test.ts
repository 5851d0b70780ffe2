// /start_profile and /stop_profile (issue 14 defect 6): a V8 CPU profile of the engine core and per-step scheduler
// timings written to the output dir, SGLang's response texts, and errors for a double start or a stop without start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SILENT_LOGGER } from '../src/common/index.js';
import { httpServerSlice, parseServerArgs } from '../src/config/index.js';
import { Engine } from '../src/engine/index.js';
import { HttpServer, PLAIN_CHAT_OUTPUT } from '../src/server/index.js';
import { FIXTURES_DIR, NEEDS_SHARED } from './helpers/paths.js';

for (const worker of [false, true]) {
  test(`profile routes over a real engine (${worker ? 'worker thread' : 'in-process'} core): files, texts, errors, num_steps`, NEEDS_SHARED, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tsglang-prof-'));
    const engine = await Engine.create({ modelPath: join(FIXTURES_DIR, 'tiny-minimax-m2'), skipTokenizerInit: true, useWorkerThread: worker, numThreads: 1, memFractionStatic: 0.2 });
    const server = new HttpServer({
      engine, tokenizer: null, config: httpServerSlice(parseServerArgs(['--skip-tokenizer-init']).args, 'm'), chatPrompt: null, chatOutput: PLAIN_CHAT_OUTPUT,
      modelFacts: { modelType: 'm', architectures: [] }, serverArgs: {}, metrics: null, logger: SILENT_LOGGER, version: 'test', profilerDir: dir,
    });
    const port = await server.listen('127.0.0.1', 0);
    server.setReady(true);
    const base = `http://127.0.0.1:${port}`;
    const post = async (path: string, body?: unknown) => {
      const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: r.status, text: await r.text() };
    };
    try {
      assert.deepEqual(await post('/stop_profile'), { status: 400, text: 'Profiling is not in progress. Call /start_profile first.\n' });
      assert.deepEqual(await post('/start_profile', { profile_id: 'p1' }), { status: 200, text: 'Start profiling.\n' });
      assert.equal((await post('/start_profile')).status, 400, 'a second start while one runs');
      const gen = await post('/generate', { input_ids: [3, 17, 42, 7], sampling_params: { max_new_tokens: 5, temperature: 0 } });
      assert.equal(gen.status, 200);
      assert.deepEqual(await post('/stop_profile'), { status: 200, text: 'Stop profiling. This will take some time.\n' });
      const prof = JSON.parse(readFileSync(join(dir, 'p1-TP-0.cpuprofile'), 'utf8')) as { nodes: unknown[]; startTime: number; endTime: number };
      assert.ok(prof.nodes.length > 10 && prof.endTime > prof.startTime, 'a V8 CPU profile');
      const steps = JSON.parse(readFileSync(join(dir, 'p1-TP-0.steps.json'), 'utf8')) as { num_steps: number; steps: { forwardMode: string; forwardMs: number; numExtendTokens: number }[] };
      assert.ok(steps.num_steps >= 5, `steps ${steps.num_steps}`);
      assert.equal(steps.steps[0].numExtendTokens, 4);
      assert.ok(steps.steps.every((s) => s.forwardMs >= 0) && steps.steps.some((s) => s.forwardMode === 'decode'));
      // num_steps: the profile stops by itself; the default dir and a generated id
      assert.equal((await post('/start_profile', { num_steps: 2, profile_id: 'p2' })).status, 200);
      assert.equal((await post('/generate', { input_ids: [5, 6], sampling_params: { max_new_tokens: 4, temperature: 0 } })).status, 200);
      for (let i = 0; i < 50 && !existsSync(join(dir, 'p2-TP-0.steps.json')); i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal((JSON.parse(readFileSync(join(dir, 'p2-TP-0.steps.json'), 'utf8')) as { num_steps: number }).num_steps, 2);
      assert.equal((await post('/stop_profile')).status, 400, 'already stopped by num_steps');
      assert.equal((await post('/start_profile', { num_steps: 0 })).status, 400);
      assert.deepEqual(readdirSync(dir).sort(), ['p1-TP-0.cpuprofile', 'p1-TP-0.steps.json', 'p2-TP-0.cpuprofile', 'p2-TP-0.steps.json']);
    } finally {
      await server.close();
      await engine.shutdown();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

// bench-serving against an in-test fake server on loopback: the seed documents' token totals, every metric of
// a scripted run on a fake clock, the result block line by line against the seeds, the JSONL record, and
// Poisson arrivals. The seeds' numbers come from numpy's stream (bench-spec.md §1.10).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseBenchServingArgs, runBenchServing, SYSTEM_CLOCK, type BenchServingEnv, type BenchServingResult, type Clock } from '../src/bench/index.js';
import { FakeClock, fakeTokenizer, startFakeServer, type FakeServerOptions } from './bench_fake_server.js';
import { NEEDS_SHARED, SEEDS_DIR } from './helpers/paths.js';

const SEEDS = SEEDS_DIR;
const SEED_MM = join(SEEDS, '000_0d678bd84b8d555a.txt');
const SEED_DS = join(SEEDS, '003_b49e757ff547c151.txt');

const TMP = mkdtempSync(join(tmpdir(), 'tsglang-bench-'));
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));

interface Run {
  result: BenchServingResult;
  printed: string[];
  warned: string[];
}

/** Wall clock whose sleeps return at once (the 1 s settle after the warm-up is not worth waiting for here). */
const FAST_CLOCK: Clock = { now: SYSTEM_CLOCK.now, sleep: async () => {} };

async function runAgainst(server: { url: string }, argv: string[], clock: Clock = FAST_CLOCK, outputFile = join(TMP, 'out.jsonl')): Promise<Run> {
  const printed: string[] = [];
  const warned: string[] = [];
  const args = parseBenchServingArgs([...argv, '--base-url', server.url, '--disable-tqdm', '--output-file', outputFile]);
  assert.ok(args);
  const env: BenchServingEnv = {
    clock,
    loadTokenizer: async () => fakeTokenizer(),
    print: (l) => printed.push(l),
    warn: (l) => warned.push(l),
    progress: () => ({ increment: () => {}, stop: () => {} }),
    fetchShareGpt: async () => null,
    headers: {},
    isInCi: false,
    today: new Date(2026, 10, 29),
  };
  const result = await runBenchServing(args, env);
  return { result, printed, warned };
}

function value(block: string[], label: string): string {
  const line = block.find((l) => l.startsWith(label + ' ') || l.slice(0, 40).trimEnd() === label);
  assert.ok(line !== undefined, `no row '${label}'`);
  return line.slice(41).trimEnd();
}

async function withServer<T>(opts: FakeServerOptions, fn: (s: { url: string; seen: { path: string; body: Record<string, unknown> }[] }) => Promise<T>): Promise<T> {
  const server = await startFakeServer(opts);
  try {
    return await fn(server);
  } finally {
    await server.close();
  }
}

const SEED_ARGS = ['--backend', 'sglang', '--model', 'MiniMaxAI/MiniMax-M2.7', '--dataset-name', 'random', '--random-input-len', '1000', '--random-output-len', '1000'];

test('seed command, 10 prompts at concurrency 1: total input 6101, generated 4220 (random ids, same draws)', async () => {
  await withServer({}, async (server) => {
    const { result, warned } = await runAgainst(server, [...SEED_ARGS, '--num-prompts', '10', '--max-concurrency', '1']);
    assert.equal(value(result.block, 'Total input tokens:'), '6101');
    assert.equal(value(result.block, 'Total generated tokens:'), '4220');
    assert.equal(value(result.block, 'Successful requests:'), '10');
    assert.equal(value(result.block, 'Max request concurrency:'), '1');
    assert.equal(value(result.block, 'Traffic request rate:'), 'inf');
    // one line says the prompts are random ids; the server saw 1 warm-up + 10 requests with ignore_eos
    assert.equal(warned.filter((w) => w.includes('random token ids')).length, 1);
    assert.equal(server.seen.length, 11);
    assert.ok(server.seen.every((r) => (r.body.sampling_params as Record<string, unknown>).ignore_eos === true));
    // the prompt of each request has exactly its drawn length in tokens
    for (let i = 0; i < 10; i++) {
      const text = server.seen[i + 1].body.text as string;
      assert.equal(text.split(' ').length, result.rows[i].promptLen);
    }
  });
});

test('seed command, 500 prompts at concurrency 100: total input 249831, generated 252662', async () => {
  await withServer({ chunkTokens: 256 }, async (server) => {
    const { result } = await runAgainst(server, [...SEED_ARGS, '--num-prompts', '500', '--max-concurrency', '100']);
    assert.equal(value(result.block, 'Total input tokens:'), '249831');
    assert.equal(value(result.block, 'Total generated tokens:'), '252662');
    assert.equal(value(result.block, 'Total generated tokens (retokenized):'), '252662');
    assert.equal(value(result.block, 'Successful requests:'), '500');
  });
});

test('--disable-ignore-eos sends ignore_eos false and the totals follow what the server generated', async () => {
  await withServer({ eosAfter: 3 }, async (server) => {
    const { result } = await runAgainst(server, [...SEED_ARGS, '--num-prompts', '10', '--disable-ignore-eos']);
    const expected = result.rows.reduce((s, r) => s + Math.min(r.outputLen, 3), 0);
    assert.equal(value(result.block, 'Total generated tokens:'), String(expected));
    assert.equal(value(result.block, 'Total input tokens:'), '6101');
    assert.ok(server.seen.every((r) => (r.body.sampling_params as Record<string, unknown>).ignore_eos === false));
  });
});

// numpy: np.random.seed(1); randint(1, 9, 4) → [6 4 5 1]; randint(1, 9, 4) → [8 2 4 6]
const SMALL = ['--dataset-name', 'random-ids', '--random-input-len', '8', '--random-output-len', '8', '--num-prompts', '4'];

test('exact metrics, native backend, concurrency 1 (fake clock driven by the server)', async () => {
  const clock = new FakeClock(100);
  await withServer({ clock, acceptLength: 2.5 }, async (server) => {
    const { result, printed } = await runAgainst(server, ['--backend', 'sglang', ...SMALL, '--max-concurrency', '1'], clock);
    assert.deepEqual(result.rows.map((r) => r.promptLen), [6, 4, 5, 1]);
    assert.deepEqual(result.rows.map((r) => r.outputLen), [8, 2, 4, 6]);
    // Per request with n tokens: TTFT 0.5 s; a no-new-token event (skipped); chunks of 2 tokens every 0.25 s
    // (two ITL entries of 0.125 s) or a last single token (0.25 s); [DONE] 0.0625 s after the last chunk.
    // Latencies: n=8 1.5625, n=2 0.8125, n=4 1.0625, n=6 1.3125; run back to back → duration 4.75 s.
    const o = result.outputs;
    assert.deepEqual(o.map((x) => x.latency), [1.5625, 0.8125, 1.0625, 1.3125]);
    assert.deepEqual(o.map((x) => x.ttft), [0.5, 0.5, 0.5, 0.5]);
    assert.deepEqual(o[0].itl, [0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.25]);
    assert.deepEqual(o[1].itl, [0.25]);
    assert.deepEqual(o.map((x) => x.startTime - o[0].startTime), [0, 1.5625, 2.375, 3.4375]);
    assert.equal(result.durationS, 4.75);
    const b = result.block;
    const expect: [string, string][] = [
      ['Backend:', 'sglang'],
      ['Traffic request rate:', 'inf'],
      ['Max request concurrency:', '1'],
      ['Successful requests:', '4'],
      ['Benchmark duration (s):', '4.75'],
      ['Total input tokens:', '16'],
      ['Total input text tokens:', '16'],
      ['Total generated tokens:', '20'],
      ['Total generated tokens (retokenized):', '20'],
      ['Request throughput (req/s):', '0.84'], // 4 / 4.75
      ['Input token throughput (tok/s):', '3.37'], // 16 / 4.75
      ['Output token throughput (tok/s):', '4.21'], // 20 / 4.75
      // token buckets from the first start: [4, 4, 3, 4, 5]
      ['Peak output token throughput (tok/s):', '5.00'],
      // request-seconds: b0 1, b1 2, b2 2, b3 2, b4 1
      ['Peak concurrent requests:', '2'],
      ['Total token throughput (tok/s):', '7.58'], // 36 / 4.75
      ['Concurrency:', '1.00'],
      ['Accept length:', '2.50'],
      ['Mean E2E Latency (ms):', '1187.50'],
      ['Median E2E Latency (ms):', '1187.50'],
      ['P90 E2E Latency (ms):', '1487.50'], // 1312.5 + 0.7 · 250
      ['P99 E2E Latency (ms):', '1555.00'], // 1312.5 + 0.97 · 250
      ['Mean TTFT (ms):', '500.00'],
      ['Median TTFT (ms):', '500.00'],
      ['P99 TTFT (ms):', '500.00'],
      // TPOT = (latency − ttft)/(n − 1): 1062.5/7, 312.5, 187.5, 162.5
      ['Mean TPOT (ms):', '203.57'],
      ['Median TPOT (ms):', '175.00'],
      ['P99 TPOT (ms):', '308.75'],
      // ITL: twelve 125 ms entries and four 250 ms entries
      ['Mean ITL (ms):', '156.25'],
      ['Median ITL (ms):', '125.00'],
      ['P95 ITL (ms):', '250.00'],
      ['P99 ITL (ms):', '250.00'],
      ['Max ITL (ms):', '250.00'],
    ];
    for (const [label, v] of expect) assert.equal(value(b, label), v, label);
    // the block is what was printed, after the dataset and warm-up lines
    assert.deepEqual(printed.slice(0, 4), ['#Input tokens: 16', '#Output tokens: 20', 'Starting warmup with 1 sequences...', 'Warmup completed with 1 sequences. Starting main benchmark run...']);
    assert.deepEqual(printed.slice(4), b);
    // warm-up: row 0 with min(8, 32) tokens, before the timed requests
    assert.equal((server.seen[0].body.sampling_params as Record<string, unknown>).max_new_tokens, 8);
  });
});

test('exact metrics, OpenAI completions backend, all requests at once (one ITL entry per chunk)', async () => {
  const clock = new FakeClock(50);
  await withServer({ clock, batches: [1, 4] }, async (server) => {
    const { result } = await runAgainst(server, ['--backend', 'sglang-oai', ...SMALL], clock);
    const b = result.block;
    // all four start together; duration = the longest latency 1.5625 s; Σ latency 4.75 s
    assert.equal(result.durationS, 1.5625);
    assert.equal(value(b, 'Max request concurrency:'), 'not set');
    assert.equal(value(b, 'Total generated tokens:'), '20'); // usage on the last text chunk
    assert.equal(value(b, 'Concurrency:'), '3.04');
    assert.equal(value(b, 'Peak concurrent requests:'), '4');
    assert.equal(value(b, 'Peak output token throughput (tok/s):'), '8.00'); // buckets [8, 6]
    assert.equal(value(b, 'Mean ITL (ms):'), '250.00');
    assert.equal(value(b, 'Max ITL (ms):'), '250.00');
    assert.equal(value(b, 'Mean TPOT (ms):'), '203.57');
    assert.ok(!b.some((l) => l.startsWith('Accept length:')));
    const req = server.seen[1].body;
    assert.equal(req.model, 'fake-model');
    assert.equal(req.best_of, 1);
    assert.equal(req.temperature, 0);
    assert.equal(req.ignore_eos, true);
    assert.equal(req.stream, true);
  });
});

test('chat backend streams delta.content and reads usage from a usage-only chunk; --extra-request-body overrides', async () => {
  const clock = new FakeClock(0);
  await withServer({ clock }, async (server) => {
    const { result } = await runAgainst(
      server,
      ['--backend', 'sglang-oai-chat', ...SMALL, '--max-concurrency', '1', '--extra-request-body', '{"temperature": 0.7, "top_p": 0.9}'],
      clock,
    );
    assert.equal(value(result.block, 'Total generated tokens:'), '20');
    assert.equal(result.outputs[0].generatedText, 'w0 w1 w2 w3 w4 w5 w6 w7 ');
    assert.deepEqual(result.outputs.map((x) => x.latency), [1.5625, 0.8125, 1.0625, 1.3125]);
    const req = server.seen[1].body;
    assert.deepEqual(req.messages, [{ role: 'user', content: result.rows[0].prompt }]);
    assert.equal(req.max_completion_tokens, 8);
    assert.equal(req.temperature, 0.7);
    assert.equal(req.top_p, 0.9);
  });
});

test('--disable-stream: one JSON body, TTFT = latency, no ITL', async () => {
  const clock = new FakeClock(0);
  await withServer({ clock }, async (server) => {
    const { result } = await runAgainst(server, ['--backend', 'sglang', ...SMALL, '--max-concurrency', '1', '--disable-stream'], clock);
    assert.deepEqual(result.outputs.map((x) => x.latency), [1.5625, 0.8125, 1.0625, 1.3125]);
    assert.deepEqual(result.outputs.map((x) => x.ttft), [1.5625, 0.8125, 1.0625, 1.3125]);
    assert.equal(value(result.block, 'Mean ITL (ms):'), '0.00');
    assert.equal(server.seen[1].body.stream, false);
  });
});

/** Seed result blocks: label lists (the seeds collapse the padding; values are ignored). */
function seedBlocks(path: string): string[][] {
  const text = readFileSync(path, 'utf8');
  const blocks: string[][] = [];
  const re = /=+ Serving Benchmark Result =+([\s\S]*?)={50}/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const body = m[1].replace(/-{3,}([^-|\n][^\n]*?)-{3,}/g, '\n§$1\n');
    const labels: string[] = [];
    for (const raw of body.split('\n')) {
      const line = raw.trim();
      if (line === '' || /^\|+$/.test(line)) continue;
      if (line.startsWith('§')) {
        labels.push(line);
        continue;
      }
      for (const lm of line.matchAll(/([A-Za-z][^:]*?:)\s+(not set|\S+)/g)) labels.push(lm[1].trim());
    }
    blocks.push(labels);
  }
  return blocks;
}

function ourLabels(block: string[]): string[] {
  const out: string[] = [];
  for (const l of block.slice(2, -1)) {
    if (/^-+[^-].*-+$/.test(l)) out.push('§' + l.replace(/^-+|-+$/g, ''));
    else out.push(l.slice(0, 40).trimEnd());
  }
  return out;
}

test('result block matches the seed documents line by line (values aside)', NEEDS_SHARED, async () => {
  const withAccept = await withServer({ acceptLength: 3.27 }, (s) =>
    runAgainst(s, ['--backend', 'sglang', ...SMALL, '--max-concurrency', '1', '--request-rate', '64']),
  );
  const noAccept = await withServer({}, (s) => runAgainst(s, ['--backend', 'sglang', ...SMALL, '--max-concurrency', '1']));
  const ours = { with: ourLabels(withAccept.result.block), without: ourLabels(noAccept.result.block) };
  // exact layout rules: title, 40+1+10 rows, centred section titles, closing rule
  const b = withAccept.result.block;
  assert.equal(b[0], '');
  assert.equal(b[1], '============ Serving Benchmark Result ============');
  assert.equal(b[2], 'Backend:                                 sglang    ');
  assert.equal(b[3], 'Traffic request rate:                    64.0      ');
  assert.ok(b.includes('----------------End-to-End Latency----------------'));
  assert.ok(b.includes('---------------Time to First Token----------------'));
  assert.ok(b.includes('-----Time per Output Token (excl. 1st token)------'));
  assert.ok(b.includes('---------------Inter-Token Latency----------------'));
  assert.equal(b[b.length - 1], '='.repeat(50));

  const assertSubsequence = (seed: string[], mine: string[]): void => {
    let k = 0;
    for (const label of seed) {
      while (k < mine.length && mine[k] !== label) k++;
      assert.ok(k < mine.length, `seed row '${label}' missing or out of order`);
    }
  };
  // DeepSeek page, §5.3 (sglang 0.5.9, the doc-era layout): identical rows in identical order.
  // Its two §5.1 blocks come from a 0.5.6-era build that printed `Total input vision tokens` for text datasets
  // (printed for image datasets only since) and, in one block, no P90/P99 E2E rows: every other row matches in order.
  const ds = seedBlocks(SEED_DS);
  assert.equal(ds.length, 5);
  let exact = 0;
  for (const seed of ds) {
    const mine = seed.includes('Accept length:') ? ours.with : ours.without;
    if (seed.includes('Total input vision tokens:')) {
      assertSubsequence(seed.filter((l) => l !== 'Total input vision tokens:'), mine);
    } else {
      assert.deepEqual(mine, seed);
      exact++;
    }
  }
  assert.equal(exact, 3);
  // MiniMax page: blocks trimmed by the page's author — every shown row appears, in our order.
  const mm = seedBlocks(SEED_MM);
  assert.equal(mm.length, 2);
  for (const seed of mm) assertSubsequence(seed, ours.without);
});

test('JSONL record: SGLang key order and Python json.dumps formatting', async () => {
  const clock = new FakeClock(100);
  const out = join(TMP, 'rec.jsonl');
  rmSync(out, { force: true });
  await withServer({ clock }, async (server) => {
    await runAgainst(server, ['--backend', 'sglang', ...SMALL, '--max-concurrency', '1', '--output-details'], clock, out);
    await runAgainst(server, ['--backend', 'sglang', ...SMALL, '--max-concurrency', '1', '--output-details'], clock, out);
  });
  const lines = readFileSync(out, 'utf8').split('\n');
  assert.equal(lines.length, 3); // appended twice, newline-terminated
  assert.equal(lines[0].replace(/"duration": [^,]*,/, ''), lines[1].replace(/"duration": [^,]*,/, ''));
  const last = lines[1];
  assert.ok(last.startsWith('{"tag": null, "backend": "sglang", "dataset_name": "random-ids", "request_rate": Infinity, "max_concurrency": 1, "sharegpt_output_len": null, "random_input_len": 8, "random_output_len": 8, "random_range_ratio": 0.0, "server_info": {"model_path": "fake-model", "internal_states": []}, "duration": 4.75, "completed": 4, "total_input_tokens": 16,'), last.slice(0, 400));
  assert.ok(last.includes('"mean_e2e_latency_ms": 1187.5, "median_e2e_latency_ms": 1187.5,'));
  assert.ok(last.includes('"accept_length": null, "max_output_tokens_per_s": 5.0, "max_concurrent_requests": 2, "input_lens": [6, 4, 5, 1], "output_lens": [8, 2, 4, 6], "ttfts": [0.5, 0.5, 0.5, 0.5], "itls": [[0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.25], [0.25],'));
  assert.ok(last.endsWith('"errors": ["", "", "", ""]}'));
});

test('Poisson arrivals: gaps are numpy exponential(1/rate) draws after the length draws', { skip: spawnSync('python3', ['-c', 'import numpy']).status !== 0 ? 'python3 with numpy not available' : false }, async () => {
  const clock = new FakeClock(0);
  await withServer({}, async (server) => {
    const { result } = await runAgainst(server, ['--backend', 'sglang', ...SMALL, '--request-rate', '2.5', '--seed', '7'], clock);
    const starts = result.outputs.map((o) => o.startTime - result.outputs[0].startTime);
    const py = spawnSync('python3', ['-c', [
      'import numpy as np, json',
      'np.random.seed(7); np.random.randint(1,9,4); np.random.randint(1,9,4); np.random.randint(0,1000,4)',
      'g=[np.random.exponential(1/2.5) for _ in range(3)]',
      'print(json.dumps([0.0, g[0], g[0]+g[1], g[0]+g[1]+g[2]]))',
    ].join('\n')], { encoding: 'utf8' });
    const expected = JSON.parse(py.stdout) as number[];
    starts.forEach((s, i) => assert.ok(Math.abs(s - expected[i]) < 1e-12, `start ${i}: ${s} vs ${expected[i]}`));
    assert.equal(value(result.block, 'Traffic request rate:'), '2.5');
  });
});

test('bad flags are rejected with argparse-style messages naming the flag', () => {
  assert.throws(() => parseBenchServingArgs(['--backend', 'nope']), /argument --backend: invalid choice: 'nope'/);
  assert.throws(() => parseBenchServingArgs(['--num-prompts', 'x']), /argument --num-prompts: invalid int value: 'x'/);
  assert.throws(() => parseBenchServingArgs(['--bogus']), /unrecognized arguments: --bogus/);
  assert.throws(() => parseBenchServingArgs(['--random', '3']), /ambiguous option: --random could match/);
  const a = parseBenchServingArgs(['--num-prom', '7', '--request-rate=inf', '--dataset-name', 'random']);
  assert.ok(a);
  assert.equal(a.numPrompts, 7);
  assert.equal(a.requestRate, Infinity);
  assert.equal(a.seed, 1);
  assert.equal(a.host, '0.0.0.0');
  assert.equal(a.randomInputLen, 1024);
  assert.throws(() => parseBenchServingArgs(['--tokenize-prompt', '--backend', 'vllm']), /--tokenize-prompt/);
});

test('speculative accept length on sglang-oai: each chunk gap is split over its re-tokenized tokens', async () => {
  const { calculateMetrics } = await import('../src/bench/index.js');
  const tok = fakeTokenizer();
  const row = { prompt: 'x', promptLen: 3, outputLen: 4, textPromptLen: 3, visionPromptLen: 0, extraRequestBody: {} };
  const out = {
    generatedText: 't1 t2 t3 t4', success: true, latency: 1, ttft: 0.25, itl: [0.375, 0.375], textChunks: ['t2 t3', 't4'],
    promptLen: 3, error: '', outputLen: 4, startTime: 0,
  };
  const ctx = (backend: string, acceptLength: number | null) => ({ durationS: 1, backend, acceptLength, countTokens: (t: string) => tok.encode(t, false).length });
  const split = calculateMetrics([row], [out], ctx('sglang-oai', 2.5));
  // chunk 't2 t3' → two entries of 0.1875 s; 't4' → one of 0.375 s
  assert.equal(split.meanItlMs, 250);
  assert.equal(split.medianItlMs, 187.5);
  assert.equal(split.maxItlMs, 375);
  const plain = calculateMetrics([row], [out], ctx('sglang', 2.5));
  assert.equal(plain.meanItlMs, 375);
  const failed = calculateMetrics([row, row], [out, { ...out, success: false, outputLen: 0 }], ctx('sglang-oai', null));
  assert.equal(failed.completed, 1);
  assert.deepEqual(failed.outputLens, [4, 0]);
  assert.equal(failed.totalInput, 3);
});

test('a server that rejects every request: the warm-up fails with SGLang message and the HTTP error text', async () => {
  const http = await import('node:http');
  const srv = http.createServer((req, res) => {
    if (req.url === '/v1/models') return res.end(JSON.stringify({ data: [{ id: 'm' }] }));
    res.writeHead(400, 'Bad Request').end('{"error":{"message":"max_new_tokens is too large"}}');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  try {
    await assert.rejects(runAgainst({ url }, ['--backend', 'sglang', ...SMALL]), /Warmup failed - Please make sure benchmark arguments are correctly specified\. Error: Bad Request: \{"error":\{"message":"max_new_tokens is too large"\}\}/);
  } finally {
    srv.closeAllConnections();
    srv.close();
  }
});

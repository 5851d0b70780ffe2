// `npm run bench:router [-- --rate 1000[,200...] --seconds 3 --repeats 3 --num-prompts 16 --input-len 1024 --output-len 1024
// --skip-overhead --skip-serving]`, figures only:
// 1. Router overhead per request: a scripted worker in this process answers POST /generate at once; requests go out
//    open-loop at --rate req/s for --seconds, once straight to the worker and once through `tsglang router` (a child
//    process, regular mode, round_robin and cache_aware), alternating per round. Per reading: achieved rate, latency
//    p50/p99 (µs), the router process's CPU time per request (µs, /proc: what a request costs whatever the machine's
//    load) and the router's extra p50/p99 over the direct run of the same round, with the load average.
// 2. Serving through the router: the DeepSeek-V3.2 page's bench_serving command (`tsglang bench-serving --backend
//    sglang --random-input-len 1024 --random-output-len 1024`, here --max-concurrency 16 and a small --num-prompts)
//    against one plain server and against `tsglang router --pd-disaggregation` over 1 prefill + 1 decode server, same
//    make-tiny MiniMax-M2 checkpoint, each server --num-threads 1; TTFT and TPOT mean/median/p99 per run, alternating.
import http from 'node:http';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort, quantile, startServe, stopServe, type ServeChild } from './serve_child.js';

const { values } = parseArgs({ options: {
  rate: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '3' }, repeats: { type: 'string', default: '3' },
  'num-prompts': { type: 'string', default: '16' }, 'input-len': { type: 'string', default: '1024' }, 'output-len': { type: 'string', default: '1024' },
  'serving-repeats': { type: 'string', default: '1' }, 'skip-overhead': { type: 'boolean' }, 'skip-serving': { type: 'boolean' },
} });

const BIN = fileURLToPath(new URL('../../bin/tsglang.js', import.meta.url));
const la = (): string => loadavg().map((x) => x.toFixed(2)).join(' ');
const out = (s: string): void => { process.stdout.write(s + '\n'); };

/** `tsglang router ARGS` as a child; resolves once it listens. */
async function startRouterChild(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [BIN, 'router', ...args, '--host', '127.0.0.1', '--port', String(port), '--prometheus-port', '-1', '--worker-startup-check-interval', '1', '--log-level', 'warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d: string) => { err += d; });
    child.once('exit', (c) => reject(new Error(`router exited (${c}): ${err}`)));
    const poll = setInterval(() => {
      fetch(`http://127.0.0.1:${port}/liveness`).then((r) => { if (r.ok) { clearInterval(poll); resolve(); } }, () => undefined);
    }, 100);
  });
  return { child, port };
}

/** CPU time (user + system) a process has used, µs (/proc/PID/stat; NaN when unreadable). */
function cpuUs(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1e6) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return NaN;
  }
}

function stopChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null) return Promise.resolve();
  return new Promise((r) => { c.once('exit', () => r()); c.kill('SIGTERM'); setTimeout(() => c.kill('SIGKILL'), 5000).unref(); });
}

const AGENT = new http.Agent({ keepAlive: true, maxSockets: 512 });
const BODY = Buffer.from(JSON.stringify({ text: 'The quick brown fox jumps over the lazy dog. '.repeat(4), sampling_params: { max_new_tokens: 8 } }));

/** One POST /generate; resolves with its latency in µs (NaN on error). */
function once(port: number): Promise<number> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request({ host: '127.0.0.1', port, path: '/generate', method: 'POST', agent: AGENT, headers: { 'content-type': 'application/json', 'content-length': BODY.length } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200 ? (performance.now() - t0) * 1000 : NaN));
    });
    req.on('error', () => resolve(NaN));
    req.end(BODY);
  });
}

/** Open-loop load at `rate` req/s for `seconds`: latencies (µs, the first 10 % dropped as warm-up) and the achieved rate. */
async function openLoop(port: number, rate: number, seconds: number): Promise<{ lat: number[]; achieved: number; errors: number }> {
  const n = Math.round(rate * seconds);
  const lat: number[] = new Array(n);
  const t0 = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(once(port).then((us) => { lat[i] = us; }));
  }
  await Promise.all(pending);
  const elapsed = (performance.now() - t0) / 1000;
  const kept = lat.slice(Math.floor(n / 10));
  return { lat: kept.filter((x) => Number.isFinite(x)), achieved: n / elapsed, errors: lat.filter((x) => !Number.isFinite(x)).length };
}

/** Router vs direct at one rate, per policy, alternating per round. */
async function overheadAt(rate: number, wport: number): Promise<void> {
  const seconds = Number(values.seconds);
  out(`\n# router overhead: scripted in-process worker, open loop ${rate} req/s for ${seconds} s per reading (first 10 % dropped), ${availableParallelism()} cores`);
  for (const policy of ['round_robin', 'cache_aware']) {
    const r = await startRouterChild(['--worker-urls', `http://127.0.0.1:${wport}`, '--policy', policy]);
    await openLoop(r.port, rate, 0.5); // warm both paths' connections
    await openLoop(wport, rate, 0.5);
    for (let round = 0; round < Number(values.repeats); round++) {
      const sides: [string, number][] = round % 2 === 0 ? [['direct', wport], ['router', r.port]] : [['router', r.port], ['direct', wport]];
      const got: Record<string, { p50: number; p99: number }> = {};
      for (const [name, port] of sides) {
        const cpu0 = cpuUs(r.child.pid!);
        const x = await openLoop(port, rate, seconds);
        const cpu = name === 'router' ? ` router CPU ${((cpuUs(r.child.pid!) - cpu0) / Math.round(rate * seconds)).toFixed(0)} µs/request,` : '';
        got[name] = { p50: quantile(x.lat, 0.5), p99: quantile(x.lat, 0.99) };
        out(`${policy.padEnd(12)} round ${round + 1} ${name.padEnd(6)} ${x.achieved.toFixed(0)} req/s, p50 ${got[name].p50.toFixed(0)} µs, p99 ${got[name].p99.toFixed(0)} µs,${cpu} errors ${x.errors}, load average ${la()}`);
      }
      out(`${policy.padEnd(12)} round ${round + 1} router overhead p50 ${(got['router'].p50 - got['direct'].p50).toFixed(0)} µs, p99 ${(got['router'].p99 - got['direct'].p99).toFixed(0)} µs`);
    }
    await stopChild(r.child);
  }
}

async function overhead(): Promise<void> {
  const worker = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = req.url === '/get_load' ? '[{"dp_rank":0,"num_reqs":0,"num_waiting_reqs":0,"num_tokens":0}]' : '{"text":"ok","meta_info":{"finish_reason":{"type":"length","length":8}}}';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((r) => worker.listen(0, '127.0.0.1', () => r()));
  const wport = (worker.address() as AddressInfo).port;
  for (const rate of values.rate!.split(',').map(Number)) await overheadAt(rate, wport);
  worker.closeAllConnections();
  worker.close();
}

interface ServingRecord { mean_ttft_ms: number; median_ttft_ms: number; p99_ttft_ms: number; mean_tpot_ms: number; median_tpot_ms: number; p99_tpot_ms: number; completed: number; duration: number }

function benchServing(port: number, model: string, outFile: string): ServingRecord {
  const args = ['bench-serving', '--backend', 'sglang', '--host', '127.0.0.1', '--port', String(port), '--model', model, '--dataset-name', 'random',
    '--random-input-len', values['input-len']!, '--random-output-len', values['output-len']!, '--num-prompts', values['num-prompts']!,
    '--max-concurrency', '16', '--disable-tqdm', '--output-file', outFile];
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`bench-serving failed (${r.status}): ${r.stderr.slice(-2000)}`);
  const lines = readFileSync(outFile, 'utf8').trim().split('\n');
  // the record is written as Python's json.dumps does (Infinity / NaN literals)
  return JSON.parse(lines.at(-1)!.replace(/-?\bInfinity\b|\bNaN\b/g, 'null')) as ServingRecord;
}

async function serving(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-router-bench-'));
  const model = join(dir, 'tiny-minimax-m2');
  const servers: ServeChild[] = [];
  let router: ChildProcess | null = null;
  try {
    const mk = spawnSync(process.execPath, [BIN, 'make-tiny', '--arch', 'minimax-m2', '--out', model], { encoding: 'utf8' });
    if (mk.status !== 0) throw new Error(`make-tiny failed: ${mk.stderr}`);
    const common = ['--model-path', model, '--host', '127.0.0.1', '--num-threads', '1'];
    const bport = await freePort();
    const started = await Promise.allSettled([
      startServe(common),
      startServe([...common, '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', String(bport)]),
      startServe([...common, '--disaggregation-mode', 'decode']),
    ]);
    for (const s of started) if (s.status === 'fulfilled') servers.push(s.value); // stopped in `finally` even when another failed
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const [plain, prefill, decode] = servers;
    const r = await startRouterChild(['--pd-disaggregation', '--prefill', prefill.base, String(bport), '--decode', decode.base]);
    router = r.child;
    out(`\n# serving: tsglang bench-serving --backend sglang --random-input-len ${values['input-len']} --random-output-len ${values['output-len']} --num-prompts ${values['num-prompts']} --max-concurrency 16 (make-tiny MiniMax-M2, each server --num-threads 1)`);
    for (let round = 0; round < Number(values['serving-repeats']); round++) {
      const sides: [string, number][] = round % 2 === 0 ? [['plain server', plain.port], ['router PD 1P+1D', r.port]] : [['router PD 1P+1D', r.port], ['plain server', plain.port]];
      for (const [name, port] of sides) {
        const before = la();
        const x = benchServing(port, model, join(dir, `${round}-${port}.jsonl`));
        out(`round ${round + 1} ${name.padEnd(16)} TTFT mean ${x.mean_ttft_ms.toFixed(1)} / median ${x.median_ttft_ms.toFixed(1)} / p99 ${x.p99_ttft_ms.toFixed(1)} ms, TPOT mean ${x.mean_tpot_ms.toFixed(2)} / median ${x.median_tpot_ms.toFixed(2)} / p99 ${x.p99_tpot_ms.toFixed(2)} ms, ${x.completed} done in ${x.duration.toFixed(1)} s, load average before ${before} after ${la()}`);
      }
    }
  } finally {
    if (router) await stopChild(router);
    for (const s of servers) await stopServe(s);
    rmSync(dir, { recursive: true, force: true });
  }
}

out(`tsglang bench:router — ${availableParallelism()} cores, load average ${la()}`);
if (!values['skip-overhead']) await overhead();
if (!values['skip-serving']) await serving();
AGENT.destroy();

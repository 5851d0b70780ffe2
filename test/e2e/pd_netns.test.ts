// PD across two "hosts": the prefill server in one network namespace and the decode server in another, joined by a veth
// pair with private addresses inside the namespaces only (test/helpers/netns.ts; skipped where `ip netns` is not
// permitted). The router runs beside the prefill server and the client asks from there (nothing is reachable from
// the host side); the decode server finds the prefill server's bootstrap server and transfer endpoint at its private
// address, the UCX workers are pinned to the veth interfaces. Greedy output equals a single server's on loopback; the
// KV went over the veth (the decode side counted the bytes).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { startServe, stopServe } from '../../bench/serve_child.js';
import { createNetnsPair } from '../helpers/netns.js';
import { TSGLANG_BIN } from '../helpers/paths.js';

const BODY = { input_ids: [11, 22, 33, 44, 55, 66, 77], sampling_params: { max_new_tokens: 10, temperature: 0 } };

/** A child inside a namespace; ready once `ready` appears on stderr. */
function startIn(prefix: string[], args: string[], ready: RegExp): { child: ChildProcess; log: () => string; ready: Promise<void> } {
  const child = spawn(prefix[0], [...prefix.slice(1), process.execPath, TSGLANG_BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.setEncoding('utf8');
  const p = new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d: string) => {
      log += d;
      if (ready.test(log)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`${args[0]} exited (${code}):\n${log.slice(-3000)}`)));
  });
  p.catch(() => undefined);
  return { child, log: () => log, ready: p };
}

/** GET/POST from inside namespace `prefix` (the host side cannot reach the private addresses). */
function fetchIn(prefix: string[], url: string, body?: unknown): string {
  const init = body === undefined ? '{}' : `{method:'POST',headers:{'content-type':'application/json'},body:${JSON.stringify(JSON.stringify(body))}}`;
  const script = `fetch(${JSON.stringify(url)},${init}).then(r=>r.text()).then(t=>process.stdout.write(t),e=>{process.stderr.write(String(e));process.exit(1)})`;
  const r = spawnSync(prefix[0], [...prefix.slice(1), process.execPath, '-e', script], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`fetch ${url} in the namespace failed: ${r.stderr}`);
  return r.stdout;
}

test('PD in two network namespaces (private addresses only): prefill + router in one, decode in the other; greedy output equals a single server', { timeout: 600_000 }, async (t) => {
  const ns = createNetnsPair('pdxfer');
  if ('skip' in ns) return t.skip(ns.skip);
  const kids: ChildProcess[] = [];
  t.after(() => {
    for (const k of kids) if (k.exitCode === null && k.signalCode === null) k.kill('SIGKILL');
    ns.remove();
  });
  const single = await startServe(['--host', '127.0.0.1', '--num-threads', '1']);
  t.after(() => stopServe(single));
  const want = JSON.parse(await (await fetch(`${single.base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(BODY) })).text()) as { output_ids: number[] };
  const [pa, da] = ns.addrs;
  const ready = /ready to roll/;
  const prefill = startIn(ns.prefix(0), ['serve', '--host', pa, '--port', '30100', '--num-threads', '1', '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', '8998'], ready);
  const decode = startIn(ns.prefix(1), ['serve', '--host', da, '--port', '30101', '--num-threads', '1', '--disaggregation-mode', 'decode'], ready);
  kids.push(prefill.child, decode.child);
  await Promise.all([prefill.ready, decode.ready]);
  const router = startIn(ns.prefix(0), ['router', '--pd-disaggregation', '--prefill', `http://${pa}:30100`, '8998', '--decode', `http://${da}:30101`, '--host', pa, '--port', '30000', '--worker-startup-check-interval', '1'], /router listening/);
  kids.push(router.child);
  await router.ready;
  const out = fetchIn(ns.prefix(0), `http://${pa}:30000/generate`, BODY);
  const got = JSON.parse(out) as { output_ids?: number[] };
  assert.deepEqual(got.output_ids, want.output_ids, `${out}\ndecode:\n${decode.log().slice(-3000)}`);
  const info = JSON.parse(fetchIn(ns.prefix(1), `http://${da}:30101/get_server_info`)) as { internal_states: { disaggregation: Record<string, number | string>; num_used_tokens: number }[] };
  const d = info.internal_states[0];
  assert.equal(d.disaggregation['transfers'], 1);
  assert.ok(Number(d.disaggregation['kv_bytes']) > 0);
  assert.equal(d.disaggregation['num_prefill_steps'], 0);
  assert.equal(d.num_used_tokens, 0);
  // (the best backend here: ucx when its addon loads; read from /get_server_info, the start-up lines may come later)
  assert.match(String(d.disaggregation['transfer_backend']), /^(ucx|tcp)$/);
});

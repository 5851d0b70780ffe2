// PD building blocks without a model: loc runs, gather/scatter over every KV layout (MiniMax GQA K/V in f32 and FP8,
// DeepSeek MLA latent + rope key with DSA indexer keys in SGLang's fp8_block rows), a 4 K-token transfer through the
// tcp backend over loopback arriving byte-identical at scattered decode locs, a layout mismatch refused, the bootstrap
// server's routes and answers, the transfer-backend choice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KVPool, type KVPoolLayout } from '../mem_cache/index.js';
import { BootstrapServer } from './bootstrap_server.js';
import { resolveTransferBackend } from './backends.js';
import { gatherKv, layoutFingerprint, locRuns, payloadBytesPerToken, scatterKv } from './kv_pages.js';
import { KVPoll } from './kv_poll.js';
import { TcpDecodeKVManager, TcpPrefillKVManager, type TcpKVReceiver } from './tcp_transfer.js';
import { loadUcxAddon, RangeAllocator } from './ucx_addon.js';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;

const LAYOUTS: Record<string, KVPoolLayout> = {
  'minimax gqa f32': { numLayers: 3, buffers: [{ name: 'k', width: 64 }, { name: 'v', width: 64 }] },
  'minimax gqa fp8_e4m3': { numLayers: 2, buffers: [{ name: 'k', width: 64, codec: { kind: 'fp8_e4m3', scale: 0.5 } }, { name: 'v', width: 64, codec: { kind: 'fp8_e4m3', scale: 2 } }] },
  'deepseek mla + dsa fp8': { numLayers: 2, buffers: [{ name: 'kv', width: 576, codec: { kind: 'fp8_block', fp8Dims: 512 } }, { name: 'index_k', width: 128, codec: { kind: 'fp8_block', fp8Dims: 128 } }] },
};

/** Fills every committed row of the pool with a deterministic byte pattern. */
function fill(pool: KVPool, locs: number, seed: number): void {
  pool.ensureLocs(locs);
  let x = seed;
  for (let l = 0; l < pool.layout.numLayers; l++) {
    for (const b of pool.layout.buffers) {
      const st = pool.store(l, b.name);
      const u = new Uint32Array(st.raw.buffer, st.raw.byteOffset, st.raw.length);
      for (let i = 0; i < u.length; i++) { x = (x * 1103515245 + 12345) >>> 0; u[i] = x; }
    }
  }
}

function rowsEqual(a: KVPool, aLocs: ArrayLike<number>, b: KVPool, bLocs: ArrayLike<number>): void {
  for (let l = 0; l < a.layout.numLayers; l++) {
    for (const buf of a.layout.buffers) {
      const sa = a.store(l, buf.name);
      const sb = b.store(l, buf.name);
      const ua = new Uint8Array(sa.raw.buffer, sa.raw.byteOffset, sa.raw.byteLength);
      const ub = new Uint8Array(sb.raw.buffer, sb.raw.byteOffset, sb.raw.byteLength);
      const row = sa.rowFloats * 4;
      for (let t = 0; t < aLocs.length; t++) {
        const ra = ua.subarray(aLocs[t] * row, (aLocs[t] + 1) * row);
        const rb = ub.subarray(bLocs[t] * row, (bLocs[t] + 1) * row);
        if (!Buffer.from(ra).equals(Buffer.from(rb))) assert.fail(`layer ${l} ${buf.name} token ${t}: rows differ`);
      }
    }
  }
}

test('locRuns collapses consecutive locs', () => {
  assert.deepEqual(locRuns([5, 6, 7, 9, 10, 3]), [{ start: 5, count: 3 }, { start: 9, count: 2 }, { start: 3, count: 1 }]);
  assert.deepEqual(locRuns([]), []);
});

for (const [name, layout] of Object.entries(LAYOUTS)) {
  test(`gather/scatter keeps the rows byte for byte: ${name}`, () => {
    const src = new KVPool(layout, 300, 16);
    const dst = new KVPool(layout, 300, 16);
    fill(src, 300, 7);
    const sLocs = Int32Array.from([10, 11, 12, 13, 40, 41, 200, 7]);
    const dLocs = Int32Array.from([250, 251, 1, 2, 3, 4, 5, 99]);
    const payload = gatherKv(src, sLocs);
    assert.equal(payload.length, sLocs.length * payloadBytesPerToken(src));
    scatterKv(dst, dLocs, payload);
    rowsEqual(src, sLocs, dst, dLocs);
    assert.throws(() => scatterKv(dst, dLocs.subarray(0, 3), payload), /does not fit 3 tokens/);
  });
}

const UCX = loadUcxAddon();
const BACKENDS: { name: string; ucx: boolean; tls?: string; skip: string | false }[] = [
  { name: 'tcp', ucx: false, skip: false },
  { name: 'ucx over tcp (UCX_TLS=tcp, UCX_NET_DEVICES=lo)', ucx: true, tls: 'tcp', skip: UCX.addon ? false : `UCX addon unavailable: ${UCX.reason}` },
  { name: 'ucx over shared memory (UCX_TLS=sm)', ucx: true, tls: 'sm', skip: UCX.addon ? false : `UCX addon unavailable: ${UCX.reason}` },
];

for (const be of BACKENDS) test(`${be.name}: a 4 K-token prompt's KV arrives byte-identical at scattered decode locs; states and aux as SGLang; layout mismatch refused`, { skip: be.skip }, async (t) => {
  const saved = { tls: process.env['UCX_TLS'], dev: process.env['UCX_NET_DEVICES'] };
  if (be.tls) process.env['UCX_TLS'] = be.tls;
  if (be.tls === 'tcp') process.env['UCX_NET_DEVICES'] = 'lo'; // distributed.md §4.4: pin the device
  t.after(() => {
    if (saved.tls === undefined) delete process.env['UCX_TLS']; else process.env['UCX_TLS'] = saved.tls;
    if (saved.dev === undefined) delete process.env['UCX_NET_DEVICES']; else process.env['UCX_NET_DEVICES'] = saved.dev;
  });
  const ucx = be.ucx ? UCX.addon : null;
  const layout = LAYOUTS['minimax gqa f32'];
  const N = 4096;
  const src = new KVPool(layout, N + 1, 64);
  const dst = new KVPool(layout, 2 * N + 1, 64);
  fill(src, N + 1, 3);
  const sLocs = Int32Array.from({ length: N }, (_, i) => 1 + i);
  const dLocs = Int32Array.from({ length: N }, (_, i) => 1 + ((i * 7919) % (2 * N))); // distinct, scattered
  let arrived: TcpKVReceiver | null = null;
  const prefill = new TcpPrefillKVManager(layoutFingerprint(src), () => undefined, ucx);
  const port = await prefill.listen('127.0.0.1');
  const decode = new TcpDecodeKVManager((r) => { if (r && r.state === KVPoll.Success) arrived = r; }, ucx, 64 * 2 ** 20);
  t.after(async () => { decode.close(); await prefill.close(); });
  // the decode side's UCX worker must survive a garbage collection (a collected worker stopped its progress thread and
  // every later TCP put timed out)
  gc();
  const sender = prefill.createSender(42);
  assert.equal(sender.poll(), KVPoll.Bootstrapping);
  const recv = decode.createReceiver(`127.0.0.1:${port}`, 42);
  assert.equal(recv.poll(), KVPoll.Bootstrapping);
  decode.init(recv, { room: 42, numTokens: N, layout: layoutFingerprint(dst), bytes: N * payloadBytesPerToken(dst) });
  assert.equal(recv.poll(), KVPoll.WaitingForInput);
  for (let i = 0; i < 200 && sender.poll() !== KVPoll.WaitingForInput; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(sender.poll(), KVPoll.WaitingForInput);
  const t0 = performance.now();
  const payload = gatherKv(src, sLocs);
  sender.send(payload, { room: 42, firstTokenId: 1234, outputTokenLogprob: [-0.25, 1234], cachedTokens: 0 });
  for (let i = 0; i < 2000 && !arrived; i++) await new Promise((r) => setTimeout(r, 2));
  const got = arrived as TcpKVReceiver | null;
  assert.ok(got, 'the KV never arrived');
  scatterKv(dst, dLocs, got.payload!);
  const ms = performance.now() - t0;
  assert.equal(sender.poll(), KVPoll.Success);
  assert.equal(sender.via, be.ucx ? 'ucx' : 'tcp');
  assert.equal(decode.ucxTransfers, be.ucx ? 1 : 0);
  assert.deepEqual(got.aux, { room: 42, firstTokenId: 1234, outputTokenLogprob: [-0.25, 1234], cachedTokens: 0 });
  rowsEqual(src, sLocs, dst, dLocs);
  process.stderr.write(`# ${be.name}: ${N} tokens x ${payloadBytesPerToken(src)} B = ${(payload.length / 2 ** 20).toFixed(1)} MiB in ${ms.toFixed(1)} ms (gather + send + scatter)\n`);
  // a decode pool of another layout is refused with a message saying why
  const other = new KVPool(LAYOUTS['minimax gqa fp8_e4m3'], 10, 10);
  prefill.createSender(43);
  const bad = decode.createReceiver(`127.0.0.1:${port}`, 43);
  decode.init(bad, { room: 43, numTokens: 4, layout: layoutFingerprint(other), bytes: 4 * payloadBytesPerToken(other) });
  for (let i = 0; i < 200 && bad.poll() !== KVPoll.Failed; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(bad.poll(), KVPoll.Failed);
  assert.match(bad.error ?? '', /KV layouts differ between prefill and decode/);
  // the prefill side going away fails the rooms still waiting
  const waiting = decode.createReceiver(`127.0.0.1:${port}`, 44);
  decode.init(waiting, { room: 44, numTokens: 4, layout: layoutFingerprint(dst), bytes: 4 * payloadBytesPerToken(dst) });
  await prefill.close();
  for (let i = 0; i < 200 && waiting.poll() !== KVPoll.Failed; i++) await new Promise((r) => setTimeout(r, 5));
  assert.match(waiting.error ?? '', /connection to prefill transfer endpoint .* closed/);
});

test('bootstrap server: PUT/GET /route, 503 until every rank registered, 404/400, DP-rank registration and query, /health', async (t) => {
  const bs = new BootstrapServer({});
  const port = await bs.listen('127.0.0.1', 0);
  t.after(() => bs.close());
  const base = `http://127.0.0.1:${port}`;
  const all = '/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1';
  assert.equal((await fetch(`${base}${all}`)).status, 503);
  const reg = (tp: number) => ({ attn_tp_size: 2, attn_tp_rank: tp, attn_cp_size: 1, attn_cp_rank: 0, attn_dp_size: 1, attn_dp_rank: 0, pp_size: 1, pp_rank: 0, system_dp_size: 1, system_dp_rank: 0, rank_ip: '10.0.0.1', rank_port: 5000 + tp, page_size: 64, kv_cache_dtype: 'auto', load_balance_method: 'follow_bootstrap_room' });
  assert.equal((await fetch(`${base}/route`, { method: 'PUT', body: JSON.stringify(reg(0)) })).status, 200);
  assert.equal((await fetch(`${base}${all}`)).status, 503, 'one of two TP ranks registered');
  await fetch(`${base}/route`, { method: 'PUT', body: JSON.stringify(reg(1)) });
  assert.deepEqual(await (await fetch(`${base}${all}`)).json(), { attn_tp_size: 2, attn_cp_size: 1, dp_size: 1, pp_size: 1, page_size: 64, kv_cache_dtype: 'auto', follow_bootstrap_room: true, transfer_backend: null });
  assert.deepEqual(await (await fetch(`${base}/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=1&target_pp_rank=0`)).json(), { rank_ip: '10.0.0.1', rank_port: 5001 });
  assert.equal((await fetch(`${base}/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=5&target_pp_rank=0`)).status, 404);
  assert.equal((await fetch(`${base}/route?prefill_dp_rank=0`)).status, 400);
  assert.equal((await fetch(`${base}/route`, { method: 'PUT', body: '{"rank_ip":"x"}' })).status, 400);
  assert.equal((await fetch(`${base}/register_dp_rank`, { method: 'POST', body: JSON.stringify({ bootstrap_room: 77, dp_rank: 3 }) })).status, 200);
  assert.deepEqual(await (await fetch(`${base}/query_dp_ranks`, { method: 'POST', body: JSON.stringify({ bootstrap_rooms: [77, 78] }) })).json(), { 77: 3 });
  assert.equal(await (await fetch(`${base}/health`)).text(), 'OK');
});

test('transfer backend: the best available when none is given (ucx with its addon, else tcp); SGLang\'s unavailable ones are refused naming what is available', () => {
  assert.equal(resolveTransferBackend('tcp'), 'tcp');
  assert.throws(() => resolveTransferBackend('mooncake'), /--disaggregation-transfer-backend mooncake is not available: .*Mooncake.*Available here: (ucx, )?tcp(, fake)?/);
  assert.throws(() => resolveTransferBackend('nixl'), /NIXL/);
  assert.equal(resolveTransferBackend(null), UCX.addon ? 'ucx' : 'tcp');
  if (UCX.addon) assert.equal(resolveTransferBackend('ucx'), 'ucx');
  else {
    assert.throws(() => resolveTransferBackend('ucx'), /--disaggregation-transfer-backend ucx is not available: the UCX addon/);
  }
});

test('staging range allocator: first fit, 64-byte aligned, coalesces on release', () => {
  const r = new RangeAllocator(1024);
  const a = r.alloc(100)!;
  const b = r.alloc(600)!;
  assert.deepEqual([a, b], [0, 128]);
  assert.equal(r.alloc(400), null);
  r.release(a, 100);
  assert.equal(r.alloc(64), 0);
  r.release(0, 64);
  r.release(b, 600);
  assert.equal(r.available, 1024);
  assert.equal(r.alloc(1024), 0);
});

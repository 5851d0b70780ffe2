// PD building blocks without a model: loc runs, gather/scatter over every KV layout (MiniMax GQA K/V in f32 and FP8,
// DeepSeek MLA latent + rope key with DSA indexer keys in SGLang's fp8_block rows), the wire layout between different
// TP splits of the heads, SGLang's rank mapping, a 4 K-token prompt sent in chunks through each backend (tcp, ucx over
// TCP, ucx over shared memory) arriving byte-identical at scattered decode locs for every layout, the fake backend's
// states, a layout mismatch refused, the bootstrap server's routes and answers, the transfer-backend choice; a failed
// room's UCX staging slot held until no put into it can land.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gatherKvRows, KVPool, kvRowBytesPerToken, locRuns, scatterKvRows, type KVPoolLayout } from '../mem_cache/index.js';
import { BootstrapServer } from './bootstrap_server.js';
import { resolveTransferBackend } from './backends.js';
import { FakeDecodeKVManager, FakePrefillKVManager } from './fake_transfer.js';
import { KvWireLayout } from './kv_layout.js';
import { KVPoll } from './kv_poll.js';
import { DecodeKVManager, type KVReceiverLike } from './kv_receiver.js';
import { PrefillKVManager } from './kv_sender.js';
import { resolveRankMapping } from './rank_mapping.js';
import { loadUcxAddon, RangeAllocator } from './ucx_addon.js';

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;

const LAYOUTS: Record<string, KVPoolLayout> = {
  'minimax gqa f32': { numLayers: 3, buffers: [{ name: 'k', width: 64 }, { name: 'v', width: 64 }] },
  'minimax gqa fp8_e4m3': { numLayers: 2, buffers: [{ name: 'k', width: 64, codec: { kind: 'fp8_e4m3', scale: 0.5 } }, { name: 'v', width: 64, codec: { kind: 'fp8_e4m3', scale: 2 } }] },
  'deepseek mla + dsa fp8': { numLayers: 2, buffers: [{ name: 'kv', width: 576, codec: { kind: 'fp8_block', fp8Dims: 512 } }, { name: 'index_k', width: 128, codec: { kind: 'fp8_block', fp8Dims: 128 } }] },
};
/** KV heads of the GQA layouts above (4 heads of 16 = width 64); null: MLA. */
const HEADS: Record<string, { numKvHeads: number; headDim: number } | null> = {
  'minimax gqa f32': { numKvHeads: 4, headDim: 16 }, 'minimax gqa fp8_e4m3': { numKvHeads: 4, headDim: 16 }, 'deepseek mla + dsa fp8': null,
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
    const payload = gatherKvRows(src, sLocs);
    assert.equal(payload.length, sLocs.length * kvRowBytesPerToken(src));
    scatterKvRows(dst, dLocs, payload);
    rowsEqual(src, sLocs, dst, dLocs);
    assert.throws(() => scatterKvRows(dst, dLocs.subarray(0, 3), payload), /does not fit 3 tokens/);
  });
}

/** A layout's pool as attn_tp rank r of `ranks` holds it (GQA: its heads). */
function rankLayout(name: string, ranks: number): KVPoolLayout {
  const l = LAYOUTS[name];
  const h = HEADS[name];
  if (!h) return l;
  const heads = Math.max(1, h.numKvHeads / ranks);
  return { numLayers: l.numLayers, buffers: l.buffers.map((b) => ({ ...b, width: heads * h.headDim })) };
}

for (const name of Object.keys(LAYOUTS)) {
  test(`wire layout across TP splits (${name}): prefill tp 2 → wire → decode tp 1 and tp 4 give every head's bytes, MLA sent from one rank`, () => {
    const N = 5;
    const locs = Int32Array.from([3, 4, 9, 1, 7]);
    const full = new KVPool(LAYOUTS[name], 16, 16); // tp 1: every head
    fill(full, 16, 11);
    const wire1 = new KvWireLayout(full, { ranks: 1, kvHeads: HEADS[name] });
    const wire = wire1.toWire([gatherKvRows(full, locs)], N);
    // the same KV split over 2 ranks (each holding its heads, or the same MLA replica)
    const p2 = [0, 1].map(() => new KVPool(rankLayout(name, 2), 16, 16));
    const w2 = new KvWireLayout(p2[0], { ranks: 2, kvHeads: HEADS[name] });
    assert.equal(w2.fingerprint, wire1.fingerprint, 'the wire layout does not depend on the TP split');
    w2.fromWire(wire, N).forEach((rows, r) => scatterKvRows(p2[r], locs, rows));
    // prefill tp 2 → wire: rank 1's MLA rows are never read (a dummy rank)
    const rankRows = p2.map((p) => gatherKvRows(p, locs));
    if (!HEADS[name]) rankRows[1] = new Uint8Array(rankRows[1].length);
    assert.ok(Buffer.from(w2.toWire(rankRows, N)).equals(Buffer.from(wire)), 'tp 2 rows → wire differs from tp 1');
    // decode tp 4 (heads 1 each) and back
    const p4 = [0, 1, 2, 3].map(() => new KVPool(rankLayout(name, 4), 16, 16));
    const w4 = new KvWireLayout(p4[0], { ranks: 4, kvHeads: HEADS[name] });
    w4.fromWire(wire, N).forEach((rows, r) => scatterKvRows(p4[r], locs, rows));
    assert.ok(Buffer.from(w4.toWire(p4.map((p) => gatherKvRows(p, locs)), N)).equals(Buffer.from(wire)), 'tp 4 round trip differs');
    const back = new KVPool(LAYOUTS[name], 16, 16);
    scatterKvRows(back, locs, w4.toWire(p4.map((p) => gatherKvRows(p, locs)), N));
    rowsEqual(full, locs, back, locs);
  });
}

test('SGLang rank mapping: equal, decode larger, decode smaller (MHA all targets, MLA one real + dummies)', () => {
  assert.deepEqual(resolveRankMapping(2, 1, 2, false), { targetTpRank: 1, targetTpRanks: [1], requiredDstInfoNum: 1, requiredPrefillResponseNum: 1 });
  assert.deepEqual(resolveRankMapping(4, 3, 2, false), { targetTpRank: 1, targetTpRanks: [1], requiredDstInfoNum: 2, requiredPrefillResponseNum: 1 });
  assert.deepEqual(resolveRankMapping(1, 0, 2, false), { targetTpRank: 0, targetTpRanks: [0, 1], requiredDstInfoNum: 1, requiredPrefillResponseNum: 2 });
  assert.deepEqual(resolveRankMapping(1, 0, 2, true), { targetTpRank: 0, targetTpRanks: [0, 1], requiredDstInfoNum: 1, requiredPrefillResponseNum: 1 });
  assert.deepEqual(resolveRankMapping(2, 1, 8, false).targetTpRanks, [4, 5, 6, 7]);
});

const UCX = loadUcxAddon();
const BACKENDS: { name: string; ucx: boolean; tls?: string; skip: string | false }[] = [
  { name: 'tcp', ucx: false, skip: false },
  { name: 'ucx over tcp (UCX_TLS=tcp, UCX_NET_DEVICES=lo)', ucx: true, tls: 'tcp', skip: UCX.addon ? false : `UCX addon unavailable: ${UCX.reason}` },
  { name: 'ucx over shared memory (UCX_TLS=sm)', ucx: true, tls: 'sm', skip: UCX.addon ? false : `UCX addon unavailable: ${UCX.reason}` },
];

async function until(cond: () => boolean, what: string, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

for (const be of BACKENDS) test(`${be.name}: a 4 K-token prompt's KV, sent in 4 chunks, arrives byte-identical at scattered decode locs for every layout; states and aux as SGLang; layout mismatch refused; abort notification`, { skip: be.skip }, async (t) => {
  const saved = { tls: process.env['UCX_TLS'], dev: process.env['UCX_NET_DEVICES'] };
  if (be.tls) process.env['UCX_TLS'] = be.tls;
  if (be.tls === 'tcp') process.env['UCX_NET_DEVICES'] = 'lo'; // distributed.md §4.4: pin the device
  t.after(() => {
    if (saved.tls === undefined) delete process.env['UCX_TLS']; else process.env['UCX_TLS'] = saved.tls;
    if (saved.dev === undefined) delete process.env['UCX_NET_DEVICES']; else process.env['UCX_NET_DEVICES'] = saved.dev;
  });
  const ucx = be.ucx ? UCX.addon : null;
  const N = 4096;
  const decode = new DecodeKVManager(() => undefined, ucx, 64 * 2 ** 20);
  t.after(() => decode.close());
  // the decode side's UCX worker must survive a garbage collection (a collected worker stopped its progress thread and
  // every later TCP put timed out)
  gc();
  let room = 40;
  for (const [name, layout] of Object.entries(LAYOUTS)) {
    const src = new KVPool(layout, N + 1, 64);
    const dst = new KVPool(layout, 2 * N + 1, 64);
    fill(src, N + 1, 3);
    const wl = new KvWireLayout(src, { ranks: 1, kvHeads: HEADS[name] });
    const prefill = new PrefillKVManager(wl.fingerprint, () => undefined, ucx);
    const port = await prefill.listen('127.0.0.1');
    const sLocs = Int32Array.from({ length: N }, (_, i) => 1 + i);
    const dLocs = Int32Array.from({ length: N }, (_, i) => 1 + ((i * 7919) % (2 * N))); // distinct, scattered
    const r = ++room;
    const sender = prefill.createSender(r);
    assert.equal(sender.poll(), KVPoll.Bootstrapping);
    const recv = decode.createReceiver(`127.0.0.1:${port}`, r);
    assert.equal(recv.poll(), KVPoll.Bootstrapping);
    decode.init(recv, { room: r, numTokens: N, layout: wl.fingerprint, bytesPerToken: wl.bytesPerToken });
    assert.equal(recv.poll(), KVPoll.WaitingForInput);
    await until(() => sender.poll() === KVPoll.WaitingForInput, 'the destination');
    const t0 = performance.now();
    let written = 0;
    const drain = (): void => {
      for (const c of recv.takeChunks()) {
        scatterKvRows(dst, dLocs.subarray(c.start, c.start + c.count), c.data);
        written += c.count;
      }
    };
    for (let s = 0; s < N; s += 1024) {
      sender.sendChunk(gatherKvRows(src, sLocs.subarray(s, s + 1024)), s, 1024);
      drain(); // chunks are written as they arrive
    }
    sender.finish({ room: r, firstTokenId: 1234, outputTokenLogprob: [-0.25, 1234], cachedTokens: 0 });
    await until(() => { drain(); return recv.poll() === KVPoll.Success || recv.poll() === KVPoll.Failed; }, 'the KV');
    drain();
    assert.equal(recv.poll(), KVPoll.Success, recv.error ?? '');
    assert.equal(written, N);
    const ms = performance.now() - t0;
    await until(() => sender.poll() === KVPoll.Success, 'the sender');
    assert.equal(sender.via, be.ucx ? 'ucx' : 'tcp');
    assert.equal(sender.chunks, 4);
    assert.deepEqual(recv.aux, { room: r, firstTokenId: 1234, outputTokenLogprob: [-0.25, 1234], cachedTokens: 0 });
    rowsEqual(src, sLocs, dst, dLocs);
    process.stderr.write(`# ${be.name} ${name}: ${N} tokens x ${wl.bytesPerToken} B = ${(N * wl.bytesPerToken / 2 ** 20).toFixed(1)} MiB in ${ms.toFixed(1)} ms (gather + send + scatter)\n`);
    decode.release(r);
    prefill.release(r);
    // a decode side of another layout is refused with a message saying why
    prefill.createSender(++room);
    const bad = decode.createReceiver(`127.0.0.1:${port}`, room);
    decode.init(bad, { room, numTokens: 4, layout: 'layers=1', bytesPerToken: 4 });
    await until(() => bad.poll() === KVPoll.Failed, 'the refusal');
    assert.match(bad.error ?? '', /KV layouts differ between prefill and decode/);
    // the decode side giving up reaches the prefill side (SGLang's abort notification)
    const s2 = prefill.createSender(++room);
    const r2 = decode.createReceiver(`127.0.0.1:${port}`, room);
    decode.init(r2, { room, numTokens: 4, layout: wl.fingerprint, bytesPerToken: wl.bytesPerToken });
    await until(() => s2.poll() === KVPoll.WaitingForInput, 'the second destination');
    decode.abort(r2, 'Request timed out');
    await until(() => s2.poll() === KVPoll.Failed, 'the abort notification');
    assert.equal(s2.error, 'Request timed out');
    // the prefill side going away fails the rooms still waiting
    const waiting: KVReceiverLike = decode.createReceiver(`127.0.0.1:${port}`, ++room);
    decode.init(waiting, { room, numTokens: 4, layout: wl.fingerprint, bytesPerToken: wl.bytesPerToken });
    await prefill.close();
    await until(() => waiting.poll() === KVPoll.Failed, 'the failure');
    assert.match(waiting.error ?? '', /connection to prefill transfer endpoint .* closed/);
  }
});

test('ucx: a room that did not succeed keeps its staging slot until the prefill side\'s last put into it ended (released), or a while after the connection closed', { skip: UCX.addon ? false : `UCX addon unavailable: ${UCX.reason}` }, async (t) => {
  const STAGING = 64 * 2 ** 20;
  const decode = new DecodeKVManager(() => undefined, UCX.addon, STAGING);
  t.after(() => decode.close());
  const prefill = new PrefillKVManager('L', () => undefined, UCX.addon);
  const port = await prefill.listen('127.0.0.1');
  const N = 4096;
  const BPT = 8192; // 32 MiB: a put that takes a while
  const sender = prefill.createSender(900);
  const recv = decode.createReceiver(`127.0.0.1:${port}`, 900);
  decode.init(recv, { room: 900, numTokens: N, layout: 'L', bytesPerToken: BPT });
  assert.equal(decode.stagingAvailable, STAGING - N * BPT);
  await until(() => sender.poll() === KVPoll.WaitingForInput, 'the destination');
  let putEnded = -1;
  sender.sendChunk(new Uint8Array(N * BPT).fill(7), 0, N);
  void sender.settled().then(() => { putEnded = performance.now(); });
  // the decode side gives up while the put runs: the slot stays taken until the prefill side says the put ended
  decode.abort(recv, 'Aborted by AbortReq.');
  decode.release(900);
  assert.equal(decode.stagingAvailable, STAGING - N * BPT, 'the slot was handed back while a put into it could still land');
  await until(() => decode.stagingAvailable === STAGING, 'the released answer');
  assert.ok(putEnded >= 0, 'the slot was freed before the put into it ended');
  assert.equal(sender.poll(), KVPoll.Failed);
  prefill.release(900);
  // a room whose connection closes: held for holdAfterCloseMs, then free
  const saved = DecodeKVManager.holdAfterCloseMs;
  DecodeKVManager.holdAfterCloseMs = 200;
  t.after(() => { DecodeKVManager.holdAfterCloseMs = saved; });
  prefill.createSender(901);
  const r2 = decode.createReceiver(`127.0.0.1:${port}`, 901);
  decode.init(r2, { room: 901, numTokens: 16, layout: 'L', bytesPerToken: BPT });
  await prefill.close();
  await until(() => r2.poll() === KVPoll.Failed, 'the failure');
  decode.release(901);
  assert.equal(decode.stagingAvailable, STAGING - 16 * BPT);
  await until(() => decode.stagingAvailable === STAGING, 'the hold to end');
  // a room that succeeded hands its slot back at once (covered above per backend: release after Success)
});

test('fake backend (SGLang): sender WaitingForInput at once, Success once finished; receiver WaitingForInput after init, then Success with no KV', () => {
  const p = new FakePrefillKVManager();
  const s = p.createSender(5);
  assert.equal(s.poll(), KVPoll.WaitingForInput);
  s.sendChunk(new Uint8Array(8), 0, 2);
  assert.equal(s.poll(), KVPoll.WaitingForInput);
  s.finish({ room: 5, firstTokenId: 9, cachedTokens: 0 });
  assert.equal(s.poll(), KVPoll.Success);
  const d = new FakeDecodeKVManager();
  const r = d.createReceiver('', 5);
  assert.equal(r.poll(), KVPoll.Bootstrapping);
  d.init(r, { room: 5, numTokens: 2, layout: '', bytesPerToken: 4 });
  assert.equal(r.poll(), KVPoll.Success);
  assert.deepEqual(r.takeChunks(), []);
  assert.equal(r.aux?.room, 5);
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
  assert.deepEqual(await (await fetch(`${base}${all}`)).json(), { attn_tp_size: 2, attn_cp_size: 1, dp_size: 1, pp_size: 1, page_size: 64, kv_cache_dtype: 'auto', follow_bootstrap_room: true, transfer_backend: null, is_mla: null });
  assert.deepEqual(await (await fetch(`${base}/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=1&target_pp_rank=0`)).json(), { rank_ip: '10.0.0.1', rank_port: 5001 });
  assert.equal((await fetch(`${base}/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=5&target_pp_rank=0`)).status, 404);
  assert.equal((await fetch(`${base}/route?prefill_dp_rank=0`)).status, 400);
  assert.equal((await fetch(`${base}/route`, { method: 'PUT', body: '{"rank_ip":"x"}' })).status, 400);
  assert.equal((await fetch(`${base}/register_dp_rank`, { method: 'POST', body: JSON.stringify({ bootstrap_room: 77, dp_rank: 3 }) })).status, 200);
  assert.deepEqual(await (await fetch(`${base}/query_dp_ranks`, { method: 'POST', body: JSON.stringify({ bootstrap_rooms: [77, 78] }) })).json(), { 77: 3 });
  assert.equal(await (await fetch(`${base}/health`)).text(), 'OK');
});

test('transfer backend: the best available when none is given (ucx with its addon, else tcp); fake; SGLang\'s unavailable ones are refused naming what is available', () => {
  assert.equal(resolveTransferBackend('tcp'), 'tcp');
  assert.equal(resolveTransferBackend('fake'), 'fake');
  assert.throws(() => resolveTransferBackend('mooncake'), /--disaggregation-transfer-backend mooncake is not available: tsglang cannot load the Mooncake transfer engine.*Available here: (ucx, )?tcp, fake/);
  assert.throws(() => resolveTransferBackend('nixl'), /NIXL/);
  assert.equal(resolveTransferBackend(null), UCX.addon ? 'ucx' : 'tcp');
  if (UCX.addon) assert.equal(resolveTransferBackend('ucx'), 'ucx');
  else assert.throws(() => resolveTransferBackend('ucx'), /--disaggregation-transfer-backend ucx is not available: the UCX addon/);
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

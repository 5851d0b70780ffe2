// `npm run bench:kv-transfer [-- --iters 5] [--layers-minimax 8] [--chunk 1024]`: PD KV-transfer bandwidth for a
// 4 K-token prompt, per backend — tcp, ucx over TCP (UCX_TLS=tcp, UCX_NET_DEVICES=lo), ucx over shared memory
// (UCX_TLS=sm) — for the MiniMax-M2 layout (8 KV heads x 128, K and V, bf16 rows as with --kv-cache-dtype bf16;
// --layers-minimax of its 62 layers, the rate does not depend on the count) and the DeepSeek-V3.2 layout (61 layers of
// SGLang's fp8_ds_mla latent row + the DSA indexer key in fp8_block rows, as with --kv-cache-dtype fp8_e4m3). The
// prompt goes in chunks of --chunk tokens (chunked prefill sends each finished chunk) and each arriving chunk is
// written into the decode pool. Both managers run in this process over loopback (the sender's and the receiver's UCX
// workers are separate; the receiver progresses on its own thread). Backends are run in turn, round after round, so
// every backend sees the same load; each reading is printed with the load average. GB/s = payload bytes / time of
// gather (prefill pool → payload) + transfer + scatter (payload → decode pool). Figures only; nothing is asserted.
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { gatherKvRows, KVPool, scatterKvRows, type KVPoolLayout } from '../src/mem_cache/index.js';
import { DecodeKVManager, KVPoll, KvWireLayout, loadUcxAddon, PrefillKVManager } from '../src/disagg/index.js';

const { values: opts } = parseArgs({ options: { iters: { type: 'string', default: '5' }, 'layers-minimax': { type: 'string', default: '8' }, tokens: { type: 'string', default: '4096' }, chunk: { type: 'string', default: '1024' } } });
const ITERS = Number(opts.iters);
const N = Number(opts.tokens);
const CHUNK = Number(opts.chunk);
const LAYOUTS: [string, KVPoolLayout][] = [
  [`MiniMax-M2 (${opts['layers-minimax']} of 62 layers, K/V 8x128 bf16)`, { numLayers: Number(opts['layers-minimax']), buffers: [{ name: 'k', width: 1024, codec: { kind: 'bf16', scale: 1 } }, { name: 'v', width: 1024, codec: { kind: 'bf16', scale: 1 } }] }],
  ['DeepSeek-V3.2 (61 layers, fp8_ds_mla latent + DSA indexer key)', { numLayers: 61, buffers: [{ name: 'kv', width: 576, codec: { kind: 'fp8_block', fp8Dims: 512 } }, { name: 'index_k', width: 128, codec: { kind: 'fp8_block', fp8Dims: 128 } }] }],
];

interface Side { name: string; tls?: string; prefill: PrefillKVManager; decode: DecodeKVManager; port: number }

async function once(side: Side, wl: KvWireLayout, src: KVPool, dst: KVPool, room: number): Promise<number> {
  const sLocs = Int32Array.from({ length: N }, (_, i) => 1 + i);
  const dLocs = Int32Array.from({ length: N }, (_, i) => 1 + ((i * 7919) % (2 * N)));
  const sender = side.prefill.createSender(room);
  const recv = side.decode.createReceiver(`127.0.0.1:${side.port}`, room);
  side.decode.init(recv, { room, numTokens: N, layout: wl.fingerprint, bytesPerToken: wl.bytesPerToken });
  while (sender.poll() !== KVPoll.WaitingForInput) await new Promise((r) => setImmediate(r));
  const t0 = performance.now();
  const drain = (): void => {
    for (const c of recv.takeChunks()) scatterKvRows(dst, dLocs.subarray(c.start, c.start + c.count), c.data);
  };
  for (let s = 0; s < N; s += CHUNK) sender.sendChunk(gatherKvRows(src, sLocs.subarray(s, Math.min(N, s + CHUNK))), s, Math.min(CHUNK, N - s));
  sender.finish({ room, firstTokenId: 0, cachedTokens: 0 });
  for (;;) {
    drain();
    const st = recv.poll();
    if (st === KVPoll.Success) break;
    if (st === KVPoll.Failed) throw new Error(recv.error ?? 'failed');
    await new Promise((r) => setImmediate(r));
  }
  drain();
  const ms = performance.now() - t0;
  side.decode.release(room);
  side.prefill.release(room);
  return ms;
}

function setUcxEnv(tls?: string): void {
  if (tls) process.env['UCX_TLS'] = tls;
  else delete process.env['UCX_TLS'];
  if (tls === 'tcp') process.env['UCX_NET_DEVICES'] = 'lo';
  else delete process.env['UCX_NET_DEVICES'];
}

async function main(): Promise<void> {
  const ucx = loadUcxAddon();
  const kinds: { name: string; tls?: string; ucx: boolean }[] = [{ name: 'tcp', ucx: false }];
  if (ucx.addon) kinds.push({ name: 'ucx tcp/lo', tls: 'tcp', ucx: true }, { name: 'ucx sm', tls: 'sm', ucx: true });
  else process.stdout.write(`ucx: skipped (${ucx.reason})\n`);
  process.stdout.write(`# KV transfer of a ${N}-token prompt in chunks of ${CHUNK}, ${ITERS} rounds after 1 warm-up round; backends alternate within each round\n`);
  for (const [lname, layout] of LAYOUTS) {
    const src = new KVPool(layout, N + 1, N + 1);
    const dst = new KVPool(layout, 2 * N + 1, 2 * N + 1);
    const wl = new KvWireLayout(src, { ranks: 1, kvHeads: null });
    const bytes = N * wl.bytesPerToken;
    const sides: Side[] = [];
    for (const k of kinds) {
      setUcxEnv(k.tls); // UCX reads it when the workers are created
      const prefill = new PrefillKVManager(wl.fingerprint, () => undefined, k.ucx ? ucx.addon : null);
      const port = await prefill.listen('127.0.0.1');
      const decode = new DecodeKVManager(() => undefined, k.ucx ? ucx.addon : null, Math.ceil(bytes / 2 ** 20 + 1) * 2 ** 20);
      sides.push({ name: k.name, ...(k.tls ? { tls: k.tls } : {}), prefill, decode, port });
    }
    const times = new Map<string, string[]>();
    let room = 1000;
    for (let i = 0; i <= ITERS; i++) {
      for (const side of sides) {
        const la = loadavg()[0].toFixed(1);
        let cell: string;
        try {
          const ms = await once(side, wl, src, dst, room++);
          cell = `${(bytes / ms / 1e6).toFixed(2)} GB/s (${ms.toFixed(0)} ms, load ${la})`;
        } catch (e) {
          cell = `failed: ${(e as Error).message} (load ${la})`;
        }
        if (i > 0) times.set(side.name, [...(times.get(side.name) ?? []), cell]);
      }
    }
    for (const side of sides) {
      process.stdout.write(`${lname} | ${side.name.padEnd(10)} | ${(bytes / 2 ** 20).toFixed(1)} MiB | ${(times.get(side.name) ?? []).join(' | ')}\n`);
      side.decode.close();
      await side.prefill.close();
    }
  }
  setUcxEnv(undefined);
}

await main();

// `npm run bench:kv-transfer [-- --iters 5] [--layers-minimax 8]`: PD KV-transfer bandwidth for a 4 K-token prompt,
// per backend — tcp, ucx over TCP (UCX_TLS=tcp, UCX_NET_DEVICES=lo), ucx over shared memory (UCX_TLS=sm) — for the
// MiniMax-M2 layout (8 KV heads x 128, K and V, bf16 rows as with --kv-cache-dtype bf16; --layers-minimax of its 62
// layers, the rate does not depend on the count) and the DeepSeek-V3.2 layout (61 layers of SGLang's fp8_ds_mla latent
// row + the DSA indexer key in fp8_block rows, as with --kv-cache-dtype fp8_e4m3). Both managers run in this process
// over loopback (the sender's and the receiver's UCX workers are separate; the receiver progresses on its own thread).
// GB/s = payload bytes / median time of gather (prefill pool → payload) + transfer + scatter (payload → decode pool).
// Every reading is printed with the load average (the machine is shared). Figures only; nothing is asserted.
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { KVPool, type KVPoolLayout } from '../src/mem_cache/index.js';
import { gatherKv, KVPoll, layoutFingerprint, loadUcxAddon, payloadBytesPerToken, scatterKv, TcpDecodeKVManager, TcpPrefillKVManager } from '../src/disagg/index.js';

const { values: opts } = parseArgs({ options: { iters: { type: 'string', default: '5' }, 'layers-minimax': { type: 'string', default: '8' }, tokens: { type: 'string', default: '4096' } } });
const ITERS = Number(opts.iters);
const N = Number(opts.tokens);
const LAYOUTS: [string, KVPoolLayout][] = [
  [`MiniMax-M2 (${opts['layers-minimax']} of 62 layers, K/V 8x128 bf16)`, { numLayers: Number(opts['layers-minimax']), buffers: [{ name: 'k', width: 1024, codec: { kind: 'bf16', scale: 1 } }, { name: 'v', width: 1024, codec: { kind: 'bf16', scale: 1 } }] }],
  ['DeepSeek-V3.2 (61 layers, fp8_ds_mla latent + DSA indexer key)', { numLayers: 61, buffers: [{ name: 'kv', width: 576, codec: { kind: 'fp8_block', fp8Dims: 512 } }, { name: 'index_k', width: 128, codec: { kind: 'fp8_block', fp8Dims: 128 } }] }],
];

async function once(layout: KVPoolLayout, src: KVPool, dst: KVPool, prefill: TcpPrefillKVManager, decode: TcpDecodeKVManager, port: number, room: number, got: Map<number, Buffer>): Promise<number> {
  const sLocs = Int32Array.from({ length: N }, (_, i) => 1 + i);
  const dLocs = Int32Array.from({ length: N }, (_, i) => 1 + ((i * 7919) % (2 * N)));
  const sender = prefill.createSender(room);
  const recv = decode.createReceiver(`127.0.0.1:${port}`, room);
  decode.init(recv, { room, numTokens: N, layout: layoutFingerprint(dst), bytes: N * payloadBytesPerToken(dst) });
  while (sender.poll() !== KVPoll.WaitingForInput) await new Promise((r) => setImmediate(r));
  const t0 = performance.now();
  sender.send(gatherKv(src, sLocs), { room, firstTokenId: 0, cachedTokens: 0 });
  while (!got.has(room)) {
    if (recv.poll() === KVPoll.Failed) throw new Error(recv.error ?? 'failed');
    await new Promise((r) => setImmediate(r));
  }
  scatterKv(dst, dLocs, got.get(room)!);
  const ms = performance.now() - t0;
  got.delete(room);
  decode.release(room);
  prefill.release(room);
  return ms;
}

async function main(): Promise<void> {
  const ucx = loadUcxAddon();
  const backends: { name: string; tls?: string; ucx: boolean }[] = [{ name: 'tcp', ucx: false }];
  if (ucx.addon) backends.push({ name: 'ucx tcp/lo', tls: 'tcp', ucx: true }, { name: 'ucx sm', tls: 'sm', ucx: true });
  else process.stdout.write(`ucx: skipped (${ucx.reason})\n`);
  process.stdout.write(`# KV transfer of a ${N}-token prompt, ${ITERS} timed runs after 1 warm-up, loadavg ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  for (const [lname, layout] of LAYOUTS) {
    const src = new KVPool(layout, N + 1, N + 1);
    const dst = new KVPool(layout, 2 * N + 1, 2 * N + 1);
    const bytes = N * payloadBytesPerToken(src);
    for (const be of backends) {
      if (be.tls) process.env['UCX_TLS'] = be.tls;
      if (be.tls === 'tcp') process.env['UCX_NET_DEVICES'] = 'lo';
      else delete process.env['UCX_NET_DEVICES'];
      const got = new Map<number, Buffer>();
      const prefill = new TcpPrefillKVManager(layoutFingerprint(src), () => undefined, be.ucx ? ucx.addon : null);
      const port = await prefill.listen('127.0.0.1');
      const decode = new TcpDecodeKVManager((r) => { if (r?.state === KVPoll.Success) got.set(r.room, r.payload!); }, be.ucx ? ucx.addon : null, Math.ceil(bytes / 2 ** 20 + 1) * 2 ** 20);
      const times: number[] = [];
      let error: string | null = null;
      for (let i = 0; i <= ITERS && error === null; i++) {
        try {
          const ms = await once(layout, src, dst, prefill, decode, port, 1000 + i, got);
          if (i > 0) times.push(ms);
        } catch (e) {
          error = (e as Error).message;
        }
      }
      decode.close();
      await prefill.close();
      if (error !== null || times.length === 0) {
        process.stdout.write(`${lname.padEnd(62)} ${be.name.padEnd(11)} failed: ${error ?? 'no run'}\n`);
        continue;
      }
      const sorted = [...times].sort((a, b) => a - b);
      const med = sorted[Math.floor(sorted.length / 2)];
      process.stdout.write(`${lname.padEnd(62)} ${be.name.padEnd(11)} ${(bytes / 2 ** 20).toFixed(1).padStart(7)} MiB  median ${med.toFixed(1).padStart(7)} ms  ${(bytes / med / 1e6).toFixed(2).padStart(6)} GB/s   runs ms: ${times.map((t) => t.toFixed(1)).join(' ')}\n`);
    }
  }
  delete process.env['UCX_TLS'];
}

await main();

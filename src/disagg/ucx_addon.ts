// The optional UCX addon (native/ucx → dist_ucx.node, built when Debian libucx-dev is present), loaded in try/catch:
// without it the `ucx` transfer backend is reported unavailable by name and PD runs over `tcp`. Also the decode
// side's staging region: one UCX-mapped (UCP_MEM_MAP_ALLOCATE) block that prefill ranks put KV payloads into,
// handed out per room first-fit.
import { existsSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** A UCX worker (opaque). */
export type UcxWorker = { readonly __ucxWorker: unique symbol };

/**
 * dist_ucx.node's functions (native/ucx/src/ucx_addon.cc). A worker handle must stay referenced while it is used:
 * when it is garbage-collected its progress thread stops (a TCP receiver that stops progressing makes the sender's
 * puts time out).
 */
export interface UcxAddon {
  /** @param settings UCX settings for this worker, without the UCX_ prefix (e.g. { NET_DEVICES: 'lo' }) */
  ucxCreateWorker(settings?: Record<string, string>): UcxWorker;
  ucxWorkerAddress(w: UcxWorker): Buffer;
  ucxMapRegion(w: UcxWorker, bytes: number): { buffer: ArrayBuffer; address: bigint; rkey: Buffer };
  ucxStartProgress(w: UcxWorker): void;
  ucxStopProgress?(w: UcxWorker): void;
  ucxConnect(w: UcxWorker, address: Buffer): number;
  /** Puts `src` at `remote` and flushes the endpoint (remote completion); rejects after `timeoutMs` (default 30 s). */
  ucxPut(w: UcxWorker, ep: number, rkey: Buffer, remote: bigint, src: Uint8Array, timeoutMs?: number): Promise<void>;
  ucxInfo(): { version: string };
}

export const UCX_PACKAGE = 'libucx-dev';

let cached: { addon: UcxAddon | null; reason: string | null } | undefined;

/**
 * UCX settings the process needs before libucm loads (it reads them then): UCX_MEM_EVENTS=no, unless the environment
 * sets it. With memory events on, libucm rewrites the first instructions of libc's mmap / munmap / madvise / brk when
 * the library loads (bistro hooks), while V8's GC and libuv threads may be executing them, and every later munmap of
 * the process goes through UCX. tcp and shared memory need no registration cache; on RDMA each put then registers its
 * source buffer (the payloads are fresh buffers anyway). Applies to the C environment only on the main thread.
 */
export function setUcxProcessEnv(env: NodeJS.ProcessEnv = process.env): void {
  if (env['UCX_MEM_EVENTS'] === undefined) env['UCX_MEM_EVENTS'] = 'no';
}

/**
 * The UCX addon, loaded once per thread; never throws. $TSGLANG_UCX_ADDON overrides the path. Call it on the main
 * thread first (Engine.create does for PD servers): the library loads once per process, and setUcxProcessEnv's
 * settings reach it only from there. Loading it also gives the signal handlers libucs installs back to Node's
 * (native/ucx/src/ucx_addon.cc).
 * @returns the functions, or null with the reason
 */
export function loadUcxAddon(): { addon: UcxAddon | null; reason: string | null } {
  if (cached) return cached;
  const path = process.env['TSGLANG_UCX_ADDON'] || fileURLToPath(new URL('../../../native/ucx/build/Release/dist_ucx.node', import.meta.url));
  if (!existsSync(path)) return (cached = { addon: null, reason: `the UCX addon is not built (${path} missing; install ${UCX_PACKAGE} — apt-get install ${UCX_PACKAGE} — then npm run build:native)` });
  setUcxProcessEnv();
  try {
    const mod = createRequire(import.meta.url)(path) as Partial<UcxAddon>;
    if (typeof mod.ucxCreateWorker !== 'function') return (cached = { addon: null, reason: `${path} is not tsglang's UCX addon` });
    return (cached = { addon: mod as UcxAddon, reason: null });
  } catch (err) {
    return (cached = { addon: null, reason: `the UCX addon failed to load (${(err as Error).message.split('\n')[0]}; is ${UCX_PACKAGE} installed?)` });
  }
}

/**
 * UCX settings for a worker serving on `host` (distributed.md §4.4: pin the network device, else the worker address
 * advertises every interface and TCP may pick another one): NET_DEVICES = the interface holding `host` (lo for
 * 127.0.0.1), unless UCX_NET_DEVICES is set in the environment or the host is a wildcard / not a local address.
 */
export function ucxWorkerSettings(host: string, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  if (env['UCX_NET_DEVICES'] || host === '' || host === '0.0.0.0' || host === '::') return {};
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if (addrs?.some((a) => a.address === host)) return { NET_DEVICES: name };
  }
  return {};
}

/** Bytes of the decode side's UCX staging region ($TSGLANG_UCX_STAGING_MB, default 256 MiB). */
export function ucxStagingBytes(env: NodeJS.ProcessEnv = process.env): number {
  const mb = Number(env['TSGLANG_UCX_STAGING_MB']);
  return (Number.isFinite(mb) && mb > 0 ? mb : 256) * 2 ** 20;
}

/** First-fit allocator of byte ranges in one region (per-room staging slots). */
export class RangeAllocator {
  /** free ranges [start, end), sorted, coalesced */
  private free: [number, number][];
  constructor(readonly size: number) {
    this.free = [[0, size]];
  }
  /** @returns the offset of `n` bytes (64-byte aligned), or null when nothing fits */
  alloc(n: number): number | null {
    const need = Math.ceil(n / 64) * 64;
    for (let i = 0; i < this.free.length; i++) {
      const [s, e] = this.free[i];
      if (e - s < need) continue;
      if (e - s === need) this.free.splice(i, 1);
      else this.free[i] = [s + need, e];
      return s;
    }
    return null;
  }
  /** Returns a range from alloc(n). */
  release(off: number, n: number): void {
    const need = Math.ceil(n / 64) * 64;
    this.free.push([off, off + need]);
    this.free.sort((a, b) => a[0] - b[0]);
    const out: [number, number][] = [];
    for (const r of this.free) {
      const last = out[out.length - 1];
      if (last && last[1] === r[0]) last[1] = r[1];
      else out.push([r[0], r[1]]);
    }
    this.free = out;
  }
  /** Bytes free. */
  get available(): number {
    return this.free.reduce((a, [s, e]) => a + e - s, 0);
  }
}

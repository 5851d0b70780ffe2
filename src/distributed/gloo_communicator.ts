// The cross-process / cross-node Communicator: Gloo (Debian libgloo-dev) through the optional addon
// native/gloo/build/Release/dist_gloo.node, loaded in try/catch so a missing library never affects anything else.
// A group meets through tsglang's TCP store (tcp_store.ts) on `--dist-init-addr`. Every call blocks the calling
// thread: use it on rank threads only, never on the HTTP thread. Sums are taken in rank order by the addon (all-gather
// or all-to-all, then local adds), so the bits equal the shared-memory communicator's for the same inputs.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { DistributedError } from '../common/index.js';
import { readDistEnv } from '../config/index.js';
import type { CommBuffer, Communicator } from './communicator.js';

type GlooHandle = { readonly __glooHandle: unique symbol };

/** The addon's functions (native/gloo/src/gloo_addon.cc); every one throws Error with the reason. timeoutMs < 0 = forever. */
export interface GlooAddon {
  glooCreate(storeHost: string, storePort: number, prefix: string, rank: number, size: number, bindHost: string, timeoutMs: number): GlooHandle;
  glooAllReduceSum(h: GlooHandle, buf: Float32Array, timeoutMs: number): void;
  glooAllGather(h: GlooHandle, src: ArrayBufferView, dst: ArrayBufferView, timeoutMs: number): void;
  glooReduceScatterSum(h: GlooHandle, src: Float32Array, dst: Float32Array, timeoutMs: number): void;
  glooBroadcast(h: GlooHandle, buf: ArrayBufferView, root: number, timeoutMs: number): void;
  glooAllToAll(h: GlooHandle, src: ArrayBufferView, dst: ArrayBufferView, timeoutMs: number): void;
  glooBarrier(h: GlooHandle, timeoutMs: number): void;
  glooClose(h: GlooHandle): void;
  /** Point-to-point: waits for this group's previous sends, then posts header at `slot` and payload at `slot + 1`. */
  glooSendAsync(h: GlooHandle, header: ArrayBufferView, payload: ArrayBufferView, dstRank: number, slot: number, timeoutMs: number): void;
  /** Waits until every posted send was taken by its receiver. */
  glooWaitSends(h: GlooHandle, timeoutMs: number): void;
  /** Blocks until the bytes srcRank sent at `slot` fill `buf` (exactly its length). */
  glooRecvBytes(h: GlooHandle, buf: ArrayBufferView, srcRank: number, slot: number, timeoutMs: number): void;
  /** _exit(code) at once (no worker-thread joins: a rank blocked in Gloo cannot be joined). */
  glooHardExit(code: number): never;
}

/** The package to install when the Gloo addon is missing (named in every "unavailable" message). */
export const GLOO_PACKAGE = 'libgloo-dev';

let cached: { addon: GlooAddon | null; reason: string | null } | undefined;

/**
 * The Gloo addon, loaded once per thread; never throws.
 * @returns the functions, or null with the reason ($TSGLANG_GLOO_ADDON overrides the path)
 */
export function loadGlooAddon(): { addon: GlooAddon | null; reason: string | null } {
  if (cached) return cached;
  const path = readDistEnv().glooAddonPath ?? fileURLToPath(new URL('../../../native/gloo/build/Release/dist_gloo.node', import.meta.url));
  if (!existsSync(path)) {
    return (cached = { addon: null, reason: `the Gloo addon is not built (${path} missing; install ${GLOO_PACKAGE} — apt-get install ${GLOO_PACKAGE} — then npm run build:native)` });
  }
  try {
    const mod = createRequire(import.meta.url)(path) as Partial<GlooAddon>;
    if (typeof mod.glooCreate !== 'function') return (cached = { addon: null, reason: `${path} is not tsglang's Gloo addon` });
    return (cached = { addon: mod as GlooAddon, reason: null });
  } catch (err) {
    return (cached = { addon: null, reason: `the Gloo addon failed to load (${(err as Error).message.split('\n')[0]}; is ${GLOO_PACKAGE} installed?)` });
  }
}

/**
 * Ends the process at once with `code` (after stderr, which is synchronous on Linux pipes and files, is written):
 * the multi-node exit paths use it because Node joins every worker thread on exit, and a rank thread blocked in a Gloo
 * collective with a node that is gone cannot be joined. Falls back to process.exit without the addon.
 */
export function exitProcessNow(code: number): never {
  const { addon } = loadGlooAddon();
  if (addon && typeof addon.glooHardExit === 'function') addon.glooHardExit(code);
  process.exit(code);
}

/** Where and how one rank joins a Gloo group (plain data: pass it in workerData). */
export interface GlooGroupSpec {
  /** Group name for messages ("world", "tp", …). */
  readonly name: string;
  /** The TCP store (node 0's --dist-init-addr). */
  readonly storeHost: string;
  readonly storePort: number;
  /** Key prefix of this group in the store (distinct per group and per start-up). */
  readonly prefix: string;
  readonly rank: number;
  readonly size: number;
  /** The local address this rank's Gloo device binds to (the address peers reach this node at). */
  readonly bindHost: string;
  /** Timeout of the rendezvous and of every collective, ms (`--dist-timeout`; Infinity = none). */
  readonly timeoutMs: number;
  /** Appended to error messages, e.g. "node 1 of 2, --dist-init-addr 10.0.0.1:5000". */
  readonly context?: string;
}

function nativeMs(t: number): number {
  return Number.isFinite(t) ? Math.max(0, Math.round(t)) : -1;
}

/** One rank's end of a Gloo group. Not thread-safe (one thread per rank calls it). */
export class GlooCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;
  readonly name: string;
  private readonly addon: GlooAddon;
  private readonly h: GlooHandle;
  private readonly timeoutMs: number;
  private readonly ctx: string;
  private closed = false;
  private failed = false;

  /**
   * Joins the group (blocks until every rank has joined: the full mesh of TCP pairs is connected).
   * @throws DistributedError when the addon is missing (naming libgloo-dev), the store is unreachable, or the peers do
   *   not all join within the timeout
   */
  constructor(spec: GlooGroupSpec) {
    const { addon, reason } = loadGlooAddon();
    this.ctx = spec.context ? ` (${spec.context})` : '';
    if (!addon) throw new DistributedError(`group '${spec.name}': cross-process collectives unavailable: ${reason}`);
    this.addon = addon;
    this.rank = spec.rank;
    this.size = spec.size;
    this.name = spec.name;
    this.timeoutMs = spec.timeoutMs;
    try {
      this.h = addon.glooCreate(spec.storeHost, spec.storePort, spec.prefix, spec.rank, spec.size, spec.bindHost, nativeMs(spec.timeoutMs));
    } catch (err) {
      throw new DistributedError(`group '${spec.name}' rank ${spec.rank} of ${spec.size}: could not join through the TCP store at ${spec.storeHost}:${spec.storePort}: ${(err as Error).message}${this.ctx}`);
    }
  }

  private run(op: string, fn: () => void): void {
    if (this.closed) throw new DistributedError(`group '${this.name}' rank ${this.rank}: communicator is closed`);
    try {
      fn();
    } catch (err) {
      this.failed = true;
      throw new DistributedError(`group '${this.name}' rank ${this.rank} of ${this.size}: ${op} failed: ${(err as Error).message}${this.ctx}`, { cause: err });
    }
  }

  allReduceSum(buf: Float32Array): void {
    this.run('all-reduce', () => this.addon.glooAllReduceSum(this.h, buf, nativeMs(this.timeoutMs)));
  }

  allGather(src: CommBuffer, dst: CommBuffer): void {
    if (Object.getPrototypeOf(src) !== Object.getPrototypeOf(dst) || dst.length !== src.length * this.size) {
      throw new DistributedError(`group '${this.name}' allGather: dst must be a ${src.constructor.name} of ${this.size}·${src.length} elements`);
    }
    this.run('all-gather', () => this.addon.glooAllGather(this.h, src, dst, nativeMs(this.timeoutMs)));
  }

  reduceScatterSum(src: Float32Array, dst: Float32Array): void {
    if (src.length !== dst.length * this.size) throw new DistributedError(`group '${this.name}' reduceScatterSum: src has ${src.length} elements, expected ${this.size}·${dst.length}`);
    this.run('reduce-scatter', () => this.addon.glooReduceScatterSum(this.h, src, dst, nativeMs(this.timeoutMs)));
  }

  broadcast(buf: CommBuffer, root: number, timeoutMs?: number): void {
    if (!Number.isInteger(root) || root < 0 || root >= this.size) throw new DistributedError(`group '${this.name}' broadcast: root must be in [0, ${this.size}), got ${root}`);
    this.run('broadcast', () => this.addon.glooBroadcast(this.h, buf, root, nativeMs(timeoutMs ?? this.timeoutMs)));
  }

  allToAll(src: CommBuffer, dst: CommBuffer): void {
    if (Object.getPrototypeOf(src) !== Object.getPrototypeOf(dst) || src.length !== dst.length || src.length % this.size !== 0) {
      throw new DistributedError(`group '${this.name}' allToAll: src and dst must be of one type and length, a multiple of ${this.size}`);
    }
    this.run('all-to-all', () => this.addon.glooAllToAll(this.h, src, dst, nativeMs(this.timeoutMs)));
  }

  barrier(): void {
    this.run('barrier', () => this.addon.glooBarrier(this.h, nativeMs(this.timeoutMs)));
  }

  /** True once a collective failed (the group is unusable: Gloo closes a context's pairs on an error). */
  get broken(): boolean {
    return this.failed;
  }

  /** Breaks the group because this rank failed: closes the pairs, so peers in a collective with it fail at once. */
  abort(): void {
    this.failed = true;
    this.close();
  }

  /** Closes the TCP pairs: peers still in a collective with this rank fail with a connection error. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.addon.glooClose(this.h);
  }
}

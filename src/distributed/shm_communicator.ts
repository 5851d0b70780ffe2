// The native in-process Communicator: the rank threads of one process share one SharedArrayBuffer, and the native
// addon's collectives (native/src/shm_comm.h) move data through per-rank slots with spin-then-futex flags, one
// synchronisation per step. Sums are taken by every rank in rank order, so every rank gets the same bits (and the same
// bits as the plain-TypeScript SabCommunicator, which sums in the same order).
import { availableParallelism } from 'node:os';
import { DistributedError } from '../common/index.js';
import { readDistEnv } from '../config/index.js';
import type { CommBuffer, Communicator } from './communicator.js';
import { loadShmAddon, SHM_ABORTED, SHM_MISMATCH, SHM_OK, SHM_TIMEOUT } from './shm_addon.js';
import type { ShmAddon, ShmHandle } from './shm_addon.js';

/** Bytes at the end of the buffer that hold the reason of an abort (UTF-8, length-prefixed). */
const REASON_BYTES = 512;
/** The native layout starts at the first 64-byte boundary; this much slack is allocated for it. */
const ALIGN_SLACK = 64;
/** Abort codes (the group's abort word): 1 + r = rank r died; these two otherwise. */
const ABORT_CLOSED = -1;
const ABORT_OWNER = -2;

/** The plain data each rank needs to attach to a native shm group (structured-clonable: pass it in workerData). */
export interface ShmGroupHandle {
  readonly backend: 'shm';
  readonly sab: SharedArrayBuffer;
  readonly size: number;
  /** Bytes of each rank's slot per buffer parity (a multiple of 64). */
  readonly slotBytes: number;
  readonly name: string;
  /** Default timeout of every call, ms (`--dist-timeout`). */
  readonly timeoutMs: number;
}

/** Options of createShmGroup. */
export interface ShmGroupOptions {
  /** Group name for messages ("tp", "world", …). Default "world". */
  readonly name?: string;
  /** Bytes of each rank's slot (a multiple of 64; default 1 MiB). Larger collectives run in slot-sized chunks. */
  readonly slotBytes?: number;
  /** Timeout of each call in ms (default 1 800 000, torch.distributed's 30 minutes). */
  readonly timeoutMs?: number;
}

/** Byte offset of the slot area (native/src/shm_comm.h shmDataOffset). */
function dataOffset(size: number): number {
  return Math.ceil((64 * (size + 1)) / 4096) * 4096;
}

/**
 * Allocates the shared memory of a native shm group of `size` ranks: 64 + dataOffset(size) + 2·size·slotBytes + 512
 * bytes (two buffer parities of one slot per rank, plus the abort reason).
 * @throws DistributedError for size < 1 or a slot size that is not a positive multiple of 64 (≤ 1 GiB)
 */
export function createShmGroup(size: number, options: ShmGroupOptions = {}): ShmGroupHandle {
  const name = options.name ?? 'world';
  const slotBytes = options.slotBytes ?? 1 << 20;
  if (!Number.isInteger(size) || size < 1 || size > 1024) throw new DistributedError(`group '${name}': size must be in [1, 1024], got ${size}`);
  if (!Number.isInteger(slotBytes) || slotBytes < 64 || slotBytes % 64 !== 0 || slotBytes > 1 << 30) {
    throw new DistributedError(`group '${name}': slotBytes must be a positive multiple of 64 (at most 1 GiB), got ${slotBytes}`);
  }
  const sab = new SharedArrayBuffer(ALIGN_SLACK + dataOffset(size) + 2 * size * slotBytes + REASON_BYTES);
  return { backend: 'shm', sab, size, slotBytes, name, timeoutMs: options.timeoutMs ?? 1_800_000 };
}

/** Writes `reason` into the group's reason area (first writer wins: the area is only written while the word is 0). */
function writeReason(sab: SharedArrayBuffer, reason: string): void {
  const area = new Uint8Array(sab, sab.byteLength - REASON_BYTES, REASON_BYTES);
  const len = new Int32Array(sab, sab.byteLength - REASON_BYTES, 1);
  if (Atomics.load(len, 0) !== 0) return;
  const bytes = new TextEncoder().encode(reason).subarray(0, REASON_BYTES - 8);
  area.set(bytes, 8);
  Atomics.store(len, 0, bytes.length);
}

function readReason(sab: SharedArrayBuffer): string {
  const len = Atomics.load(new Int32Array(sab, sab.byteLength - REASON_BYTES, 1), 0);
  if (len <= 0) return '';
  return new TextDecoder().decode(new Uint8Array(sab, sab.byteLength - REASON_BYTES + 8, len).slice());
}

/**
 * Breaks a group from outside its ranks (the thread that owns the rank threads, when one of them exits or fails):
 * every rank inside or entering a collective throws DistributedError naming `deadRank` and `reason`.
 * @param deadRank the rank that died, or null for a shutdown by the owner
 * @throws Error when the native addon is not loaded (only a group created by createShmGroup can be aborted here)
 */
export function abortShmGroup(handle: ShmGroupHandle, deadRank: number | null, reason: string): void {
  const { addon, reason: why } = loadShmAddon();
  if (!addon) throw new DistributedError(`group '${handle.name}': cannot abort a native shm group (${why})`);
  writeReason(handle.sab, reason);
  addon.shmAbort(new Uint8Array(handle.sab), handle.size, deadRank === null ? ABORT_OWNER : deadRank + 1);
}

/** Busy-wait time before a waiting rank blocks: 50 µs when the ranks fit the cores, else 2 µs ($TSGLANG_SHM_SPIN_US). */
function spinNs(size: number): number {
  const us = readDistEnv().shmSpinUs;
  if (us !== null) return Math.round(us * 1000);
  return size <= availableParallelism() ? 50_000 : 2_000;
}

/** A timeout for the addon: whole ms ≥ 0, or −1 (wait forever) for a non-finite one. */
function nativeMs(t: number): number {
  return Number.isFinite(t) ? Math.max(0, Math.round(t)) : -1;
}

const OP_NAMES = ['', 'all-reduce', 'all-gather', 'reduce-scatter', 'broadcast', 'all-to-all', 'barrier'];

/** One rank's end of a native shm group. Not thread-safe within a rank (one thread per rank calls it). */
export class ShmCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;
  readonly name: string;
  private readonly handle: ShmGroupHandle;
  private readonly addon: ShmAddon;
  private readonly h: ShmHandle;
  private readonly view: Uint8Array;
  private readonly timeoutMs: number;
  /** timeoutMs for the addon: whole ms, −1 = forever. */
  private readonly nativeTimeout: number;
  private closed = false;
  private failed = false;

  /**
   * @param handle the group from createShmGroup (the same object, or its structured clone in a worker)
   * @param rank this rank, 0 ≤ rank < handle.size
   * @throws DistributedError for a rank outside the group or when the native addon (with its shm collectives) is absent
   */
  constructor(handle: ShmGroupHandle, rank: number) {
    if (!Number.isInteger(rank) || rank < 0 || rank >= handle.size) throw new DistributedError(`group '${handle.name}': rank must be in [0, ${handle.size}), got ${rank}`);
    const { addon, reason } = loadShmAddon();
    if (!addon) throw new DistributedError(`group '${handle.name}': the native shm communicator is unavailable (${reason})`);
    this.rank = rank;
    this.size = handle.size;
    this.name = handle.name;
    this.handle = handle;
    this.addon = addon;
    this.timeoutMs = handle.timeoutMs;
    this.nativeTimeout = nativeMs(handle.timeoutMs);
    this.view = new Uint8Array(handle.sab);
    this.h = addon.shmAttach(this.view, rank, handle.size, handle.slotBytes, spinNs(handle.size));
  }

  /** Turns a non-zero status of a call into a DistributedError (the group is unusable afterwards). */
  private check(status: number, op: number, timeoutMs: number): void {
    if (status === SHM_OK) return;
    this.failed = true;
    const info = this.addon.shmLastError(this.h);
    const where = `group '${this.name}' rank ${this.rank}: ${OP_NAMES[op]}`;
    if (status === SHM_TIMEOUT) {
      throw new DistributedError(`${where} timed out after ${timeoutMs} ms waiting for rank(s) ${info.missing.join(', ')} of ${this.size}`);
    }
    if (status === SHM_ABORTED) {
      const reason = readReason(this.handle.sab);
      const code = info.abortCode;
      const who = code > 0 ? `rank ${code - 1} died` : code === ABORT_CLOSED ? 'a rank closed the group' : 'the group was shut down';
      throw new DistributedError(`${where}: the group is broken (${who}${reason ? `: ${reason}` : ''})`);
    }
    if (status === SHM_MISMATCH) throw new DistributedError(`${where}: the ranks called different collectives (${info.detail})`);
    throw new DistributedError(`${where} failed (status ${status})`);
  }

  private guard(): void {
    if (this.closed) throw new DistributedError(`group '${this.name}' rank ${this.rank}: communicator is closed`);
  }

  private static sameType(a: CommBuffer, b: CommBuffer): boolean {
    return Object.getPrototypeOf(a) === Object.getPrototypeOf(b);
  }

  allReduceSum(buf: Float32Array): void {
    this.guard();
    this.check(this.addon.shmAllReduce(this.h, buf, this.nativeTimeout), 1, this.timeoutMs);
  }

  allGather(src: CommBuffer, dst: CommBuffer): void {
    this.guard();
    if (!ShmCommunicator.sameType(src, dst) || dst.length !== src.length * this.size) {
      throw new DistributedError(`group '${this.name}' allGather: dst must be a ${src.constructor.name} of ${this.size}·${src.length} elements, got ${dst.constructor.name}(${dst.length})`);
    }
    this.check(this.addon.shmAllGather(this.h, src, dst, this.nativeTimeout), 2, this.timeoutMs);
  }

  reduceScatterSum(src: Float32Array, dst: Float32Array): void {
    this.guard();
    if (src.length !== dst.length * this.size) throw new DistributedError(`group '${this.name}' reduceScatterSum: src has ${src.length} elements, expected ${this.size}·${dst.length}`);
    this.check(this.addon.shmReduceScatter(this.h, src, dst, this.nativeTimeout), 3, this.timeoutMs);
  }

  broadcast(buf: CommBuffer, root: number, timeoutMs?: number): void {
    this.guard();
    if (!Number.isInteger(root) || root < 0 || root >= this.size) throw new DistributedError(`group '${this.name}' broadcast: root must be in [0, ${this.size}), got ${root}`);
    const t = timeoutMs ?? this.timeoutMs;
    this.check(this.addon.shmBroadcast(this.h, buf, root, nativeMs(t)), 4, t);
  }

  allToAll(src: CommBuffer, dst: CommBuffer): void {
    this.guard();
    if (!ShmCommunicator.sameType(src, dst) || src.length !== dst.length || src.length % this.size !== 0) {
      throw new DistributedError(`group '${this.name}' allToAll: src and dst must be of one type and length, a multiple of ${this.size}`);
    }
    this.check(this.addon.shmAllToAll(this.h, src, dst, this.nativeTimeout), 5, this.timeoutMs);
  }

  barrier(): void {
    this.guard();
    this.check(this.addon.shmBarrier(this.h, this.nativeTimeout), 6, this.timeoutMs);
  }

  /** True once the group is broken (a timeout, a mismatch, an abort or a close on some rank, or the owner's abort). */
  get broken(): boolean {
    return this.failed || this.addon.shmAbortCode(this.view) !== 0;
  }

  /**
   * Marks the group broken because this rank failed: every peer inside or entering a collective throws at once.
   * Idempotent.
   */
  abort(reason = 'aborted'): void {
    writeReason(this.handle.sab, `rank ${this.rank}: ${reason}`);
    this.addon.shmAbort(this.view, this.size, this.rank + 1);
  }

  /** Leaves the group: a peer still waiting in (or entering) a collective throws instead of waiting out its timeout. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.size > 1) {
      writeReason(this.handle.sab, `rank ${this.rank} closed the group`);
      this.addon.shmAbort(this.view, this.size, ABORT_CLOSED);
    }
  }
}

// The plain-TypeScript in-process Communicator: ranks are worker threads of one process sharing one
// SharedArrayBuffer; synchronization is a sense-reversing barrier on Atomics (spin briefly, then Atomics.wait, a
// futex), data moves through one staging slot per rank. It is the fallback where the native addon's shared-memory
// communicator is not built, and the oracle the native one is tested against (same results, bit for bit).
//
// Layout of the SharedArrayBuffer: a control block of CTRL_INTS i32 (barrier count and generation, poison state,
// per-rank arrival generations), then `size` staging slots of `slotBytes` each. A collective larger than a slot runs
// in chunks. Every sum is computed by every rank in rank order 0, 1, …, size−1 with f32 rounding after each add, so all
// ranks get the same bits whatever the thread timing.
//
// Faults: a rank that does not reach a barrier within the timeout poisons the group (every waiting rank throws
// DistributedError naming the missing ranks); `abort(reason)` and `close()` poison it too, so a rank that fails or
// leaves wakes its peers at once instead of letting them wait out the timeout.
import { availableParallelism } from 'node:os';
import { DistributedError } from '../common/index.js';
import type { CommBuffer, Communicator } from './communicator.js';

/** i32 words of the control block. */
const CTRL_INTS = 64;
/** Control words. */
const COUNT = 0;
const GEN = 1;
const POISON = 2; // 0 = healthy; POISON_* otherwise
const POISON_RANK = 3;
const ARRIVED = 16; // ARRIVED + r: the barrier generation rank r last arrived at (+1)
/** Most ranks a group holds (ARRIVED.. must fit the control block). */
export const SAB_MAX_RANKS = CTRL_INTS - ARRIVED;

const POISON_TIMEOUT = 1;
const POISON_ABORT = 2;
const POISON_CLOSED = 3;

/** The plain data that lets each rank attach to one group (structured-clonable: pass it in workerData). */
export interface SabGroupHandle {
  readonly sab: SharedArrayBuffer;
  readonly size: number;
  readonly slotBytes: number;
  readonly name: string;
  /** Default timeout of every call, ms (`--dist-timeout`). */
  readonly timeoutMs: number;
}

/** Options of createSabGroup. */
export interface SabGroupOptions {
  /** Group name for messages ("tp", "world", …). Default "world". */
  readonly name?: string;
  /** Bytes of each rank's staging slot (a multiple of 8; default 4 MiB). Larger collectives run in chunks. */
  readonly slotBytes?: number;
  /** Timeout of each call in ms (default 1 800 000, torch.distributed's 30 minutes). */
  readonly timeoutMs?: number;
}

/**
 * Allocates the shared memory of a group of `size` ranks.
 * @throws DistributedError for size < 1 or > SAB_MAX_RANKS, or a slot size that is not a positive multiple of 8
 */
export function createSabGroup(size: number, options: SabGroupOptions = {}): SabGroupHandle {
  const name = options.name ?? 'world';
  const slotBytes = options.slotBytes ?? 4 << 20;
  if (!Number.isInteger(size) || size < 1 || size > SAB_MAX_RANKS) throw new DistributedError(`group '${name}': size must be in [1, ${SAB_MAX_RANKS}], got ${size}`);
  if (!Number.isInteger(slotBytes) || slotBytes < 8 || slotBytes % 8 !== 0) throw new DistributedError(`group '${name}': slotBytes must be a positive multiple of 8, got ${slotBytes}`);
  const sab = new SharedArrayBuffer(CTRL_INTS * 4 + size * slotBytes);
  return { sab, size, slotBytes, name, timeoutMs: options.timeoutMs ?? 1_800_000 };
}

type Ctor = Float32ArrayConstructor | Int32ArrayConstructor | Uint8ArrayConstructor;

/** One rank's end of a SharedArrayBuffer group. Not thread-safe within a rank (one thread per rank calls it). */
export class SabCommunicator implements Communicator {
  readonly rank: number;
  readonly size: number;
  readonly name: string;
  private readonly ctrl: Int32Array;
  private readonly timeoutMs: number;
  private readonly slotBytes: number;
  private readonly sab: SharedArrayBuffer;
  /** Busy-poll iterations before Atomics.wait (few when ranks outnumber cores: spinning would steal a peer's core). */
  private readonly spins: number;
  private readonly views = new Map<Ctor, CommBuffer[]>();
  private closed = false;

  /**
   * @param handle the group from createSabGroup (the same object, or its structured clone in a worker)
   * @param rank this rank, 0 ≤ rank < handle.size
   * @param spins busy-poll iterations before blocking (default: 20 000 when the ranks fit the cores, else 50)
   * @throws DistributedError for a rank outside the group
   */
  constructor(handle: SabGroupHandle, rank: number, spins?: number) {
    if (!Number.isInteger(rank) || rank < 0 || rank >= handle.size) throw new DistributedError(`group '${handle.name}': rank must be in [0, ${handle.size}), got ${rank}`);
    this.rank = rank;
    this.size = handle.size;
    this.name = handle.name;
    this.sab = handle.sab;
    this.slotBytes = handle.slotBytes;
    this.timeoutMs = handle.timeoutMs;
    this.ctrl = new Int32Array(handle.sab, 0, CTRL_INTS);
    this.spins = spins ?? (handle.size <= availableParallelism() ? 20_000 : 50);
  }

  /** Rank r's staging slot as `ctor` elements. */
  private slot<T extends CommBuffer>(ctor: Ctor, r: number): T {
    let v = this.views.get(ctor);
    if (!v) {
      v = [];
      for (let i = 0; i < this.size; i++) v.push(new ctor(this.sab as unknown as ArrayBuffer, CTRL_INTS * 4 + i * this.slotBytes, this.slotBytes / ctor.BYTES_PER_ELEMENT));
      this.views.set(ctor, v);
    }
    return v[r] as T;
  }

  private ctorOf(buf: CommBuffer): Ctor {
    if (buf instanceof Float32Array) return Float32Array;
    if (buf instanceof Int32Array) return Int32Array;
    return Uint8Array;
  }

  private throwIfPoisoned(): void {
    const p = Atomics.load(this.ctrl, POISON);
    if (p === 0 && !this.closed) return;
    if (this.closed) throw new DistributedError(`group '${this.name}' rank ${this.rank}: communicator is closed`);
    const who = Atomics.load(this.ctrl, POISON_RANK);
    const why = p === POISON_TIMEOUT ? `rank ${who} timed out waiting for its peers` : p === POISON_CLOSED ? `rank ${who} closed the group` : `rank ${who} failed`;
    throw new DistributedError(`group '${this.name}' rank ${this.rank}: the group is broken (${why})`);
  }

  private poison(code: number): void {
    if (Atomics.compareExchange(this.ctrl, POISON, 0, code) === 0) Atomics.store(this.ctrl, POISON_RANK, this.rank);
    Atomics.add(this.ctrl, GEN, 0); // a fence, then wake everyone
    Atomics.notify(this.ctrl, GEN);
  }

  /**
   * Marks the group broken because this rank failed: every peer inside or entering a collective throws
   * DistributedError at once. Idempotent; the group is unusable afterwards.
   */
  abort(): void {
    this.poison(POISON_ABORT);
  }

  /** True once the group is poisoned (a timeout, an abort or a close on some rank). */
  get broken(): boolean {
    return Atomics.load(this.ctrl, POISON) !== 0;
  }

  /**
   * The group barrier (sense-reversing: the last rank to arrive resets the count and bumps the generation).
   * @throws DistributedError on timeout (naming the ranks that did not arrive) or a poisoned group
   */
  private sync(timeoutMs = this.timeoutMs): void {
    this.throwIfPoisoned();
    if (this.size === 1) return;
    const ctrl = this.ctrl;
    const g = Atomics.load(ctrl, GEN);
    Atomics.store(ctrl, ARRIVED + this.rank, g + 1);
    if (Atomics.add(ctrl, COUNT, 1) + 1 === this.size) {
      Atomics.store(ctrl, COUNT, 0);
      Atomics.add(ctrl, GEN, 1);
      Atomics.notify(ctrl, GEN);
      return;
    }
    for (let i = 0; i < this.spins; i++) if (Atomics.load(ctrl, GEN) !== g) return;
    const deadline = Number.isFinite(timeoutMs) ? Date.now() + timeoutMs : Infinity;
    while (Atomics.load(ctrl, GEN) === g) {
      if (Atomics.load(ctrl, POISON) !== 0) this.throwIfPoisoned();
      const left = deadline - Date.now();
      if (left <= 0) {
        const missing: number[] = [];
        for (let r = 0; r < this.size; r++) if (Atomics.load(ctrl, ARRIVED + r) !== g + 1) missing.push(r);
        if (Atomics.load(ctrl, GEN) !== g) return;
        this.poison(POISON_TIMEOUT);
        throw new DistributedError(`group '${this.name}' rank ${this.rank}: timed out after ${timeoutMs} ms waiting for rank(s) ${missing.join(', ')} of ${this.size}`);
      }
      Atomics.wait(ctrl, GEN, g, left);
    }
  }

  allReduceSum(buf: Float32Array): void {
    const chunk = this.slotBytes / 4;
    const mine = this.slot<Float32Array>(Float32Array, this.rank);
    for (let c0 = 0; c0 < buf.length || (c0 === 0 && buf.length === 0); c0 += chunk) {
      const n = Math.min(chunk, buf.length - c0);
      const part = buf.subarray(c0, c0 + n);
      mine.set(part);
      this.sync();
      part.set(this.slot<Float32Array>(Float32Array, 0).subarray(0, n));
      for (let r = 1; r < this.size; r++) {
        const s = this.slot<Float32Array>(Float32Array, r);
        for (let i = 0; i < n; i++) part[i] += s[i]; // a Float32Array store rounds each partial sum to f32
      }
      this.sync();
      if (buf.length === 0) break;
    }
  }

  allGather(src: CommBuffer, dst: CommBuffer): void {
    const n = src.length;
    if (dst.length !== n * this.size) throw new DistributedError(`group '${this.name}' allGather: dst has ${dst.length} elements, expected ${this.size}·${n}`);
    const ctor = this.ctorOf(src);
    const chunk = this.slotBytes / ctor.BYTES_PER_ELEMENT;
    for (let c0 = 0; c0 < n || (c0 === 0 && n === 0); c0 += chunk) {
      const m = Math.min(chunk, n - c0);
      this.slot<CommBuffer>(ctor, this.rank).set(src.subarray(c0, c0 + m));
      this.sync();
      for (let r = 0; r < this.size; r++) dst.set(this.slot<CommBuffer>(ctor, r).subarray(0, m), r * n + c0);
      this.sync();
      if (n === 0) break;
    }
  }

  reduceScatterSum(src: Float32Array, dst: Float32Array): void {
    const m = dst.length;
    if (src.length !== m * this.size) throw new DistributedError(`group '${this.name}' reduceScatterSum: src has ${src.length} elements, expected ${this.size}·${m}`);
    const chunk = Math.max(1, Math.floor(this.slotBytes / 4 / this.size));
    const mine = this.slot<Float32Array>(Float32Array, this.rank);
    for (let c0 = 0; c0 < m || (c0 === 0 && m === 0); c0 += chunk) {
      const k = Math.min(chunk, m - c0);
      for (let j = 0; j < this.size; j++) mine.set(src.subarray(j * m + c0, j * m + c0 + k), j * chunk);
      this.sync();
      const part = dst.subarray(c0, c0 + k);
      const base = this.rank * chunk;
      part.set(this.slot<Float32Array>(Float32Array, 0).subarray(base, base + k));
      for (let r = 1; r < this.size; r++) {
        const s = this.slot<Float32Array>(Float32Array, r);
        for (let i = 0; i < k; i++) part[i] += s[base + i];
      }
      this.sync();
      if (m === 0) break;
    }
  }

  broadcast(buf: CommBuffer, root: number, timeoutMs?: number): void {
    if (!Number.isInteger(root) || root < 0 || root >= this.size) throw new DistributedError(`group '${this.name}' broadcast: root must be in [0, ${this.size}), got ${root}`);
    const ctor = this.ctorOf(buf);
    const chunk = this.slotBytes / ctor.BYTES_PER_ELEMENT;
    const rootSlot = this.slot<CommBuffer>(ctor, root);
    let first = true;
    for (let c0 = 0; c0 < buf.length || (c0 === 0 && buf.length === 0); c0 += chunk) {
      const m = Math.min(chunk, buf.length - c0);
      if (this.rank === root) rootSlot.set(buf.subarray(c0, c0 + m));
      this.sync(first ? timeoutMs ?? this.timeoutMs : this.timeoutMs);
      first = false;
      if (this.rank !== root) buf.set(rootSlot.subarray(0, m), c0);
      this.sync();
      if (buf.length === 0) break;
    }
  }

  allToAll(src: CommBuffer, dst: CommBuffer): void {
    if (src.length !== dst.length || src.length % this.size !== 0) throw new DistributedError(`group '${this.name}' allToAll: src and dst must have the same length, a multiple of ${this.size}`);
    const n = src.length / this.size;
    const ctor = this.ctorOf(src);
    const chunk = Math.max(1, Math.floor(this.slotBytes / ctor.BYTES_PER_ELEMENT / this.size));
    const mine = this.slot<CommBuffer>(ctor, this.rank);
    for (let c0 = 0; c0 < n || (c0 === 0 && n === 0); c0 += chunk) {
      const k = Math.min(chunk, n - c0);
      for (let j = 0; j < this.size; j++) mine.set(src.subarray(j * n + c0, j * n + c0 + k), j * chunk);
      this.sync();
      for (let r = 0; r < this.size; r++) dst.set(this.slot<CommBuffer>(ctor, r).subarray(this.rank * chunk, this.rank * chunk + k), r * n + c0);
      this.sync();
      if (n === 0) break;
    }
  }

  barrier(): void {
    this.sync();
  }

  close(): void {
    if (this.closed) return;
    if (this.size > 1) this.poison(POISON_CLOSED);
    this.closed = true;
  }
}

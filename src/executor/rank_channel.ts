// How a step reaches a TP rank, and how ranks report their start-up. StepChannel is the seam: in one process it is a
// broadcast on the in-process "world" Communicator (CommStepChannel over SabCommunicator or the native one); across
// processes the same CommStepChannel runs over a Gloo world group. RankBoard is the in-process start-up board: each
// rank's state, weight bytes and error text in shared memory, readable while rank 0 blocks in a barrier.
import type { Communicator } from '../distributed/index.js';

/** Carries step descriptors (step_codec.ts) from rank 0 to every other rank of the world group. */
export interface StepChannel {
  /** Rank 0: hands `step` to every other rank (returns once they all have it). @throws DistributedError */
  send(step: Uint8Array): void;
  /** Ranks ≥ 1: blocks until rank 0 sends the next step (no timeout: an idle server waits). @throws DistributedError */
  receive(): Uint8Array;
}

/** A StepChannel over a world Communicator: the step's length, then its bytes, both broadcast from rank 0. */
export class CommStepChannel implements StepChannel {
  private readonly len = new Int32Array(1);

  constructor(private readonly world: Communicator) {}

  send(step: Uint8Array): void {
    this.len[0] = step.length;
    this.world.broadcast(this.len, 0);
    this.world.broadcast(step, 0);
  }

  receive(): Uint8Array {
    this.world.broadcast(this.len, 0, Infinity);
    const buf = new Uint8Array(this.len[0]);
    this.world.broadcast(buf, 0);
    return buf;
  }
}

/** A rank's start-up state on the board. */
export type RankState = 'loading' | 'ready' | 'failed' | 'exited';
const STATES: readonly RankState[] = ['loading', 'ready', 'failed', 'exited'];
/** Bytes of error text per rank. */
const MSG_BYTES = 4096;

/** The structured-clonable storage of a RankBoard. */
export interface RankBoardHandle {
  readonly sab: SharedArrayBuffer;
  readonly size: number;
  /** Set for a tp × pp layout: ranks are then named "PP stage s TP rank t (rank g)" (ppRankName). */
  readonly ppTpSize?: number;
}

/**
 * Per-rank start-up state, weight bytes, last error and busy time, in shared memory (written by each rank, read by
 * rank 0).
 */
export class RankBoard {
  private readonly state: Int32Array;
  private readonly bytes: Float64Array;
  private readonly busy: Float64Array;
  private readonly msg: Uint8Array;

  /**
   * A new board for `size` ranks.
   * @param ppTpSize the TP size of a tp × pp layout (ranks named by stage), omitted for TP only
   */
  static create(size: number, ppTpSize?: number): RankBoard {
    return new RankBoard({ sab: new SharedArrayBuffer(size * (8 + 8 + 8 + MSG_BYTES)), size, ...(ppTpSize ? { ppTpSize } : {}) });
  }

  constructor(readonly handle: RankBoardHandle) {
    const n = handle.size;
    this.bytes = new Float64Array(handle.sab as unknown as ArrayBuffer, 0, n);
    this.busy = new Float64Array(handle.sab as unknown as ArrayBuffer, n * 8, n);
    this.state = new Int32Array(handle.sab as unknown as ArrayBuffer, n * 16, n * 2);
    this.msg = new Uint8Array(handle.sab as unknown as ArrayBuffer, n * 24, n * MSG_BYTES);
  }

  /** How messages name rank r: "TP rank r", or "PP stage s TP rank t (rank r)" under PP. */
  nameOf(rank: number): string {
    const t = this.handle.ppTpSize;
    return t ? `PP stage ${Math.floor(rank / t)} TP rank ${rank % t} (rank ${rank})` : `TP rank ${rank}`;
  }

  /** Adds `ms` of forward time to rank r (its own thread writes it: pipeline bubble statistics). */
  addBusy(rank: number, ms: number): void {
    this.busy[rank] += ms;
  }

  /** Forward time of rank r so far, ms (read from any thread; a torn read only blurs a statistic). */
  busyMsOf(rank: number): number {
    return this.busy[rank];
  }

  /** Rank r loaded its shard of `weightBytes` bytes. */
  ready(rank: number, weightBytes: number): void {
    this.bytes[rank] = weightBytes;
    Atomics.store(this.state, rank * 2, 1);
  }

  /** Rank r failed with `message` (truncated to 4 KiB). */
  fail(rank: number, message: string): void {
    const enc = new TextEncoder().encode(message).subarray(0, MSG_BYTES - 1);
    this.msg.fill(0, rank * MSG_BYTES, (rank + 1) * MSG_BYTES);
    this.msg.set(enc, rank * MSG_BYTES);
    Atomics.store(this.state, rank * 2 + 1, enc.length);
    Atomics.store(this.state, rank * 2, 2);
  }

  /** Rank r left its loop. */
  exited(rank: number): void {
    if (Atomics.load(this.state, rank * 2) !== 2) Atomics.store(this.state, rank * 2, 3);
  }

  stateOf(rank: number): RankState {
    return STATES[Atomics.load(this.state, rank * 2)] ?? 'loading';
  }

  weightBytesOf(rank: number): number {
    return this.bytes[rank];
  }

  /** The error a failed rank wrote ('' when none). */
  errorOf(rank: number): string {
    const n = Atomics.load(this.state, rank * 2 + 1);
    return new TextDecoder().decode(this.msg.slice(rank * MSG_BYTES, rank * MSG_BYTES + n));
  }

  /** "rank r: message" for every failed rank, '' when none. */
  failures(): string {
    const out: string[] = [];
    for (let r = 0; r < this.handle.size; r++) if (this.stateOf(r) === 'failed') out.push(`${this.nameOf(r)}: ${this.errorOf(r)}`);
    return out.join('; ');
  }
}

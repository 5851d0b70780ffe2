// The lockstep of attention-DP groups (SGLang --enable-dp-attention; serving-spec §7.2): before every forward the
// group leaders (attn_tp rank 0 of each group) exchange [tokens, has-work, message seq, stopping] over the whole TP
// group (SGLang prepare_mlp_sync_batch: every group's batch size, each step), so a group with nothing to run steps
// with an idle batch while another runs, and every collective of the step meets on every rank — within one process
// or across nodes (the TP group is then a Gloo group). Shutdown is part of the lockstep too: a leader that stops
// keeps joining the exchange (idle) until every leader has said it stops, so no group is left waiting in a collective
// of a group that already left; a broken group (a failed rank, a lost node) is left at once instead.
import { DistributedError } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import type { Communicator } from '../distributed/index.js';
import type { DpAttention, ForwardBatch, ForwardOutput } from '../layers/index.js';
import { KVPool, type KVPoolLayout } from '../mem_cache/index.js';
import type { ForwardModel } from './model_runner.js';
import type { StepChannel } from './rank_channel.js';
import { encodeForwardStep, encodeShutdownStep } from './step_codec.js';
import { leaderGatherKv, leaderScatterKv } from './kv_steps.js';

/** Int32 values each rank contributes to the step exchange. */
const SYNC_FIELDS = 4;

/** The per-step exchange result: every group's token count and whether any group still has work. */
export interface LockstepSync {
  /** [dpSize] token rows of each group this step. */
  readonly counts: readonly number[];
  readonly anyTokens: boolean;
  /** Whether the groups should keep stepping (tokens, work, or a message not yet seen by every group). */
  readonly again: boolean;
  /** Every group's leader is shutting down (the last exchange: the groups may now leave together). */
  readonly allStopping: boolean;
}

/**
 * Exchanges [numTokens, hasWork, seq, stopping] over the TP group (one all-gather) and reads each group's values from
 * its leader (attn_tp rank 0). `seq` is the count of controller messages the group has handled: groups stop stepping
 * only when every group has seen the same messages, so a request that reaches one group while the others stop still
 * runs. Non-leader ranks pass zeros (only leaders' values are read).
 * @param tp the whole TP group (null: a single group, nothing to exchange)
 * @throws DistributedError when a peer fails or the group is broken
 */
export function lockstepSync(tp: Communicator | null, dpSize: number, numTokens: number, hasWork: boolean, seq: number, stopping = false): LockstepSync {
  if (tp === null) return { counts: [numTokens], anyTokens: numTokens > 0, again: numTokens > 0 || hasWork, allStopping: stopping };
  const attnTp = tp.size / dpSize;
  const mine = Int32Array.of(numTokens, hasWork ? 1 : 0, seq, stopping ? 1 : 0);
  const all = new Int32Array(SYNC_FIELDS * tp.size);
  tp.allGather(mine, all);
  const counts: number[] = [];
  let anyWork = false;
  let allStopping = true;
  let seqMin = Infinity;
  let seqMax = -Infinity;
  for (let g = 0; g < dpSize; g++) {
    const o = SYNC_FIELDS * g * attnTp;
    counts.push(all[o]);
    anyWork ||= all[o + 1] !== 0;
    seqMin = Math.min(seqMin, all[o + 2]);
    seqMax = Math.max(seqMax, all[o + 2]);
    allStopping &&= all[o + 3] !== 0;
  }
  const anyTokens = counts.some((c) => c > 0);
  return { counts, anyTokens, again: anyTokens || anyWork || seqMin !== seqMax, allStopping };
}

/** An empty forward (an idle batch: no requests, no tokens) over `kvPool`. */
export function idleBatch(kvPool: KVPool): ForwardBatch {
  const z = new Int32Array(0);
  return {
    forwardMode: 'idle', numReqs: 0, numTokens: 0, inputIds: z, positions: z, outCacheLoc: z, extendPrefixLens: z, extendSeqLens: z,
    seqLens: z, extendStartLoc: z, reqPoolIndices: z, reqToToken: z, reqToTokenStride: 1, logitRows: z, kvPool,
  };
}

/** What an engine core needs of a model that steps in lockstep with other groups. */
export interface LockstepModel {
  /** Records the seq of a controller message this core handled. */
  noteSeq(seq: number): void;
  /**
   * Called after every scheduler step: when the step ran no forward, joins the step exchange with no tokens and runs
   * an idle batch if another group runs. @returns whether to step again
   * @throws DistributedError when a peer failed
   */
  afterIteration(hasWork: boolean): boolean;
}

/** True when `m` steps in lockstep (DpAttnForwardModel). */
export function isLockstepModel(m: unknown): m is LockstepModel & ForwardModel {
  return typeof (m as Partial<LockstepModel>)?.afterIteration === 'function';
}

/** What the leader's model does with its group's ranks and communicators. */
export interface DpAttnGroupControl {
  /** Breaks every group this rank belongs to, so peers blocked in a collective fail at once (a failed step). */
  readonly abort: (reason: string) => void;
  /**
   * Closes this rank's communicators and lets the rank threads go (after the shutdown step was sent); `together`:
   * every group left in the same exchange, else the TP group is broken first (peers still in it leave at once).
   */
  readonly release: (together: boolean) => void;
}

/** A group leader's model (attn_tp rank 0 of attention-DP group `dp.dpRank`). */
export class DpAttnForwardModel implements ForwardModel, LockstepModel {
  private closed = false;
  private seq = 0;
  private synced = false;
  private last: LockstepSync | null = null;
  private readonly poolIds = new WeakMap<KVPool, number>();
  private nextPoolId = 0;
  private idlePool: KVPool | null = null;
  /** Set by the first failed step (the groups are then broken): every later step throws at once. */
  private broken: string | null = null;

  constructor(
    readonly local: ForwardModel,
    private readonly dp: DpAttention,
    private readonly tp: Communicator,
    /** The group's step channel (null when attn_tp = 1). */
    private readonly channel: StepChannel | null,
    private readonly control: DpAttnGroupControl,
    /** The communicator under `channel` (PD's KV steps gather over it); null when attn_tp = 1. */
    private readonly stepComm: Communicator | null = null,
  ) {}

  /** Ranks whose KV pools hold this group's KV (its attn_tp ranks; PD reaches them through gatherRankKv / scatterRankKv). */
  get kvRanks(): number {
    return this.stepComm?.size ?? 1;
  }

  /**
   * PD: the KV rows of `locs` of every attn_tp rank of the group, rank order, layer-major as gatherKvRows packs them.
   * @throws DistributedError when a rank fails (the groups are then broken)
   */
  gatherRankKv(pool: KVPool, locs: Int32Array): Uint8Array[] {
    return this.kvStep(() => leaderGatherKv(this.channel!, this.stepComm!, pool, this.poolId(pool), locs));
  }

  /** PD: writes rows[r] into attn_tp rank r's pool at `locs`. @throws DistributedError when a rank fails */
  scatterRankKv(pool: KVPool, locs: Int32Array, rows: readonly Uint8Array[]): void {
    this.kvStep(() => leaderScatterKv(this.channel!, this.stepComm!.size, pool, this.poolId(pool), locs, rows));
  }

  private poolId(pool: KVPool): number {
    let id = this.poolIds.get(pool);
    if (id === undefined) this.poolIds.set(pool, (id = this.nextPoolId++));
    return id;
  }

  private kvStep<T>(run: () => T): T {
    if (this.closed) throw new DistributedError('attention-DP ranks are shut down');
    if (this.broken !== null) throw new DistributedError(`attention-DP ranks are broken by an earlier failed step: ${this.broken}`);
    if (!this.channel || !this.stepComm) throw new DistributedError('this attention-DP group has one rank: no KV step');
    try {
      return run();
    } catch (e) {
      const why = `attention-DP group ${this.dp.dpRank} failed in a KV step: ${(e as Error).message}`;
      this.broken = why;
      this.control.abort(why);
      throw e instanceof DistributedError ? e : new DistributedError(why, { cause: e });
    }
  }

  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout {
    return this.local.kvPoolLayout(kvCacheDtype);
  }

  noteSeq(seq: number): void {
    this.seq = Math.max(this.seq, seq);
  }

  /** @throws DistributedError when a peer fails (the groups are then broken) */
  forward(batch: ForwardBatch): ForwardOutput {
    if (this.closed) throw new DistributedError('attention-DP ranks are shut down');
    return this.run(batch, true, false);
  }

  afterIteration(hasWork: boolean): boolean {
    if (this.closed) return false;
    if (!this.synced) this.run(idleBatch(this.idle()), hasWork, false);
    this.synced = false;
    return this.last?.again ?? false;
  }

  /** Non-null once a step failed (this group's or another's): the groups are broken. */
  brokenReason(): string | null {
    return this.broken;
  }

  private idle(): KVPool {
    this.idlePool ??= new KVPool(this.local.kvPoolLayout(), 1, 1);
    return this.idlePool;
  }

  private run(batch: ForwardBatch, hasWork: boolean, stopping: boolean): ForwardOutput {
    if (this.broken !== null) throw new DistributedError(`attention-DP ranks are broken by an earlier failed step: ${this.broken}`);
    try {
      this.synced = true;
      if (this.channel) {
        const id = batch.numTokens > 0 ? this.poolId(batch.kvPool) : this.poolIds.get(batch.kvPool);
        this.channel.send(encodeForwardStep(batch, batch.kvPool.maxLocs, id ?? -1));
      }
      const s = lockstepSync(this.tp, this.dp.dpSize, batch.numTokens, hasWork, this.seq, stopping);
      this.last = s;
      if (!s.anyTokens) return { logits: new Float32Array(0) };
      this.dp.setCounts(s.counts);
      return this.local.forward(batch);
    } catch (e) {
      const why = `attention-DP group ${this.dp.dpRank} failed: ${(e as Error).message}`;
      // another group's shutdown (the server is stopping) is not a failure of the model
      if (!/attention-DP shutdown/.test(why)) this.broken = why;
      this.control.abort(why);
      throw e instanceof DistributedError ? e : new DistributedError(`attention-DP step failed: ${(e as Error).message}`, { cause: e });
    }
  }

  /**
   * Leaves the lockstep: joins the step exchange (idle batches, taking part in other groups' forwards) until every
   * leader stops, then sends the group's ranks the shutdown step and releases the communicators. A broken group is
   * left at once. Idempotent.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    let together = false;
    if (this.broken === null) {
      try {
        for (;;) {
          this.run(idleBatch(this.idle()), false, true);
          if (this.last!.allStopping) break;
        }
        together = true;
      } catch {
        // a group failed or left while stopping: the groups are broken (run aborted them)
      }
    }
    try {
      this.channel?.send(encodeShutdownStep());
    } catch {
      // a broken group: the ranks have failed already
    }
    this.control.release(together);
  }
}

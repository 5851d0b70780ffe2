// Attention data parallelism on rank threads (SGLang --enable-dp-attention; serving-spec §7.2). The TP group of tp
// ranks forms dp attention-DP groups of attn_tp = tp / dp ranks. Each group has its own engine core (scheduler,
// requests, radix cache, KV pool) on the thread of its attn_tp rank 0, the group leader; the leader's model is a
// DpAttnForwardModel: it sends each step to the group's other ranks (threads it starts, over the group's step channel),
// exchanges [tokens, has-work, message seq] with every rank of the TP group (SGLang prepare_mlp_sync_batch: the
// batch sizes of every group, each step), and runs its shard; the per-layer dp_gather / dp_scatter around the MLPs
// (layers/dp_attention.ts) then meet on every rank. A group with nothing to run while another runs steps with an idle
// batch (no tokens) so every collective meets: the engine core calls afterIteration() after every scheduler step.
import { Worker } from 'node:worker_threads';
import { DistributedError, ModelLoadError, SILENT_LOGGER } from '../common/index.js';
import type { KvCacheDtype, Logger } from '../common/index.js';
import type { KernelEnv } from '../config/index.js';
import { openGroup, type Communicator, type GroupRef } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { dpAttentionGroups, type DpAttention, type ForwardBatch, type ForwardOutput } from '../layers/index.js';
import { KVPool, type KVPoolLayout } from '../mem_cache/index.js';
import { loadModel, type LoadedModel } from '../models/index.js';
import type { ForwardModel } from './model_runner.js';
import { CommStepChannel, RankBoard, type RankBoardHandle, type StepChannel } from './rank_channel.js';
import { decodeStep, encodeForwardStep, encodeShutdownStep } from './step_codec.js';
import { breakGroups } from './tp_runner.js';

/** The groups of a DP-attention layout, made once on the thread that starts the group leaders (plain data). */
export interface DpAttnGroupRefs {
  /** The whole TP group (tp ranks): the step sync, the MLPs' collectives and dp_gather. */
  readonly tp: GroupRef;
  /** Per group: its attn_tp group (attention, embedding, LM head) and its step channel; null when attn_tp = 1. */
  readonly attn: readonly (GroupRef | null)[];
  readonly step: readonly (GroupRef | null)[];
}

/** One rank's start-up data (a group leader's engine core, or a rank thread it starts). */
export interface DpAttnRankInit {
  /** Global TP rank. */
  readonly rank: number;
  readonly tpSize: number;
  readonly epSize: number;
  readonly dpSize: number;
  readonly modelPath: string;
  readonly overrides: Record<string, unknown> | string;
  readonly threads: number;
  readonly kernelEnv?: KernelEnv;
  readonly kvCacheDtype?: KvCacheDtype;
  readonly groups: DpAttnGroupRefs;
  /** The group's start-up board (attn_tp entries), when the rank is not a leader. */
  readonly board?: RankBoardHandle;
}

/** The per-step exchange result: every group's token count and whether any group still has work. */
export interface LockstepSync {
  /** [dpSize] token rows of each group this step. */
  readonly counts: readonly number[];
  readonly anyTokens: boolean;
  /** Whether the groups should keep stepping (tokens, work, or a message not yet seen by every group). */
  readonly again: boolean;
}

/**
 * Exchanges [numTokens, hasWork, seq] over the TP group (one all-gather) and reads each group's values from its leader
 * (attn_tp rank 0). `seq` is the count of controller messages the group has handled: groups stop stepping only when
 * every group has seen the same messages, so a request that reaches one group while the others stop still runs.
 * @throws DistributedError when a peer fails or the group is broken
 */
export function lockstepSync(tp: Communicator | null, dpSize: number, numTokens: number, hasWork: boolean, seq: number): LockstepSync {
  if (tp === null) return { counts: [numTokens], anyTokens: numTokens > 0, again: numTokens > 0 || hasWork };
  const attnTp = tp.size / dpSize;
  const mine = Int32Array.of(numTokens, hasWork ? 1 : 0, seq);
  const all = new Int32Array(3 * tp.size);
  tp.allGather(mine, all);
  const counts: number[] = [];
  let anyWork = false;
  let seqMin = Infinity;
  let seqMax = -Infinity;
  for (let g = 0; g < dpSize; g++) {
    const o = 3 * g * attnTp;
    counts.push(all[o]);
    anyWork ||= all[o + 1] !== 0;
    seqMin = Math.min(seqMin, all[o + 2]);
    seqMax = Math.max(seqMax, all[o + 2]);
  }
  const anyTokens = counts.some((c) => c > 0);
  return { counts, anyTokens, again: anyTokens || anyWork || seqMin !== seqMax };
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

/** A group leader's model (attn_tp rank 0 of attention-DP group `dpRank`). */
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
    private readonly abort: (reason: string) => void,
    private readonly onClose: () => void,
  ) {}

  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout {
    return this.local.kvPoolLayout(kvCacheDtype);
  }

  noteSeq(seq: number): void {
    this.seq = Math.max(this.seq, seq);
  }

  /** @throws DistributedError when a peer fails (the groups are then broken) */
  forward(batch: ForwardBatch): ForwardOutput {
    if (this.closed) throw new DistributedError('attention-DP ranks are shut down');
    return this.run(batch, true);
  }

  afterIteration(hasWork: boolean): boolean {
    if (this.closed) return false;
    if (!this.synced) {
      this.idlePool ??= new KVPool(this.local.kvPoolLayout(), 1, 1);
      this.run(idleBatch(this.idlePool), hasWork);
    }
    this.synced = false;
    return this.last?.again ?? false;
  }

  /** Non-null once a step failed (this group's or another's): the groups are broken. */
  brokenReason(): string | null {
    return this.broken;
  }

  private run(batch: ForwardBatch, hasWork: boolean): ForwardOutput {
    if (this.broken !== null) throw new DistributedError(`attention-DP ranks are broken by an earlier failed step: ${this.broken}`);
    try {
      this.synced = true;
      if (this.channel) {
        let id = this.poolIds.get(batch.kvPool);
        if (id === undefined && batch.numTokens > 0) this.poolIds.set(batch.kvPool, (id = this.nextPoolId++));
        this.channel.send(encodeForwardStep(batch, batch.kvPool.maxLocs, id ?? -1));
      }
      const s = lockstepSync(this.tp, this.dp.dpSize, batch.numTokens, hasWork, this.seq);
      this.last = s;
      if (!s.anyTokens) return { logits: new Float32Array(0) };
      this.dp.setCounts(s.counts);
      return this.local.forward(batch);
    } catch (e) {
      const why = `attention-DP group ${this.dp.dpRank} failed: ${(e as Error).message}`;
      // another group's shutdown (the server is stopping) is not a failure of the model
      if (!/attention-DP shutdown/.test(why)) this.broken = why;
      this.abort(why);
      throw e instanceof DistributedError ? e : new DistributedError(`attention-DP step failed: ${(e as Error).message}`, { cause: e });
    }
  }

  /** Sends the group's ranks the shutdown step and breaks the TP group (peers waiting in a step exchange leave). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.channel?.send(encodeShutdownStep());
    } catch {
      // a broken group: the ranks have failed already
    }
    this.onClose();
  }
}

/** The leader's launch result. */
export interface DpAttnLaunch {
  readonly model: DpAttnForwardModel;
  readonly rank0: LoadedModel;
  readonly allocKv: (floats: number) => Float32Array;
}

/**
 * Starts attention-DP group `dpRank`: its attn_tp ranks 1..attn_tp-1 as worker threads, the leader's shard on this
 * thread; waits on the TP group until every rank of every group has loaded.
 * @throws ModelLoadError naming a failed rank; InvalidRequestError for a layout the model does not split into
 */
export function launchDpAttnGroup(init: DpAttnRankInit, logger: Logger = SILENT_LOGGER): DpAttnLaunch {
  const a = init.tpSize / init.dpSize;
  const g = Math.floor(init.rank / a);
  const attnRef = init.groups.attn[g];
  const stepRef = init.groups.step[g];
  const refs = [init.groups.tp, ...(attnRef ? [attnRef] : []), ...(stepRef ? [stepRef] : [])];
  const board = RankBoard.create(a);
  const comms: Communicator[] = [];
  const workers: Worker[] = [];
  try {
    for (let r = 1; r < a; r++) workers.push(spawnDpRank({ ...init, rank: init.rank + r, board: board.handle }, board, refs, logger));
    const ops = createOps({ threads: init.threads, ...(init.kernelEnv ? { env: init.kernelEnv } : {}) });
    const { model: loaded, tp, step, dp } = openAndLoad(init, ops, comms);
    board.ready(0, loaded.weightBytes);
    try {
      tp.barrier();
    } catch (e) {
      const why = board.failures();
      throw why ? new ModelLoadError(`attention-DP group ${g} start-up failed: ${why}`, {}, { cause: e }) : e;
    }
    logger.info(`[DP${g} TP${init.rank}] Load weight end. weight bytes=${loaded.weightBytes}, tp_size=${init.tpSize}, dp_size=${init.dpSize}, attn_tp_size=${a}, ep_size=${init.epSize}, threads=${init.threads}`);
    const abort = (reason: string): void => {
      if (board.failures() === '') board.fail(0, reason);
      breakGroups(refs, comms, null, reason);
    };
    const model = new DpAttnForwardModel(loaded.model, dp, tp, step ? new CommStepChannel(step) : null, abort, () => {
      breakGroups([init.groups.tp], comms, null, 'attention-DP shutdown');
      for (const c of comms) c.close();
      for (const w of workers) w.unref();
    });
    return { model, rank0: loaded, allocKv: (n) => ops.allocateKvBuffer(n) };
  } catch (e) {
    breakGroups(refs, comms, null, `attention-DP start-up failed: ${(e as Error).message}`);
    for (const w of workers) void w.terminate();
    throw e;
  }
}

/** Opens a rank's groups and loads its shard. */
function openAndLoad(init: DpAttnRankInit, ops: ReturnType<typeof createOps>, comms: Communicator[]): { model: LoadedModel; tp: Communicator; step: Communicator | null; dp: DpAttention } {
  const a = init.tpSize / init.dpSize;
  const g = Math.floor(init.rank / a);
  const tp = openGroup(init.groups.tp, init.rank);
  comms.push(tp);
  const attnRef = init.groups.attn[g];
  const stepRef = init.groups.step[g];
  const attn = attnRef ? openGroup(attnRef, init.rank % a) : null;
  if (attn) comms.push(attn);
  const step = stepRef ? openGroup(stepRef, init.rank % a) : null;
  if (step) comms.push(step);
  const parallel = dpAttentionGroups(init.rank, init.tpSize, init.epSize, init.dpSize, tp, attn);
  const model = loadModel(init.modelPath, { ops, overrides: init.overrides, parallel });
  return { model, tp, step, dp: parallel.dp! };
}

function spawnDpRank(init: DpAttnRankInit, board: RankBoard, refs: readonly GroupRef[], logger: Logger): Worker {
  const a = init.tpSize / init.dpSize;
  const local = init.rank % a;
  const w = new Worker(new URL('./dp_attention_worker_main.js', import.meta.url), { workerData: init });
  w.on('error', (e) => logger.error(`TP rank ${init.rank} thread died: ${e.message}`));
  w.on('exit', (code) => {
    const st = board.stateOf(local);
    if (st === 'exited' || st === 'failed') return;
    board.fail(local, `thread exited (code ${code}) before leaving its step loop`);
    breakGroups(refs, [], init.rank, `TP rank ${init.rank} thread exited with code ${code}`);
  });
  return w;
}

/**
 * A non-leader rank's life (its worker thread): opens its groups, loads its shard, then follows its leader's steps:
 * each step, the exchange with the TP group, then the forward (an idle one when its group has no tokens but another
 * has) until the shutdown step.
 * @throws what the load or a forward throws (the caller reports it and breaks the groups)
 */
export function runDpAttnRank(init: DpAttnRankInit, board: RankBoard, comms: Communicator[]): void {
  const a = init.tpSize / init.dpSize;
  const ops = createOps({ threads: init.threads, ...(init.kernelEnv ? { env: init.kernelEnv } : {}) });
  const { model: loaded, tp, step, dp } = openAndLoad(init, ops, comms);
  board.ready(init.rank % a, loaded.weightBytes);
  tp.barrier();
  const channel = new CommStepChannel(step!);
  const layout = loaded.model.kvPoolLayout(init.kvCacheDtype ?? 'auto');
  const pools = new Map<number, KVPool>();
  const idle = new KVPool(layout, 1, 1);
  for (;;) {
    const st = decodeStep(channel.receive());
    if (st.kind === 'shutdown') return;
    let pool = idle;
    if (st.kvPoolId >= 0) {
      pool = pools.get(st.kvPoolId) ?? new KVPool(layout, st.kvMaxLocs, Math.min(st.kvMaxLocs, 64), (n) => ops.allocateKvBuffer(n));
      if (pools.size >= 4 && !pools.has(st.kvPoolId)) pools.delete(pools.keys().next().value!);
      pools.set(st.kvPoolId, pool);
    }
    const batch = st.build(pool);
    const s = lockstepSync(tp, init.dpSize, batch.numTokens, false, 0);
    if (!s.anyTokens) continue;
    dp.setCounts(s.counts);
    let maxLoc = -1;
    for (let t = 0; t < batch.numTokens; t++) maxLoc = Math.max(maxLoc, batch.outCacheLoc[t]);
    if (maxLoc >= 0) pool.ensureLocs(maxLoc + 1);
    loaded.model.forward(batch);
  }
}

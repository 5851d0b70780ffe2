// Tensor/expert parallelism on worker threads (SGLang's TP workers, one per rank; serving-spec §7.1). Rank 0 runs on
// the engine-core thread: its model is wrapped in TpForwardModel, which first sends the step descriptor to every rank
// through the world StepChannel and then runs its own shard; ranks 1..N-1 are worker threads (tp_worker_main.ts) that
// each hold their shard and their own KV pool (their heads, the same token index space) and loop in runRankLoop:
// receive step → forward (the collectives inside the model meet rank 0's) → next step. Nothing crosses postMessage
// on the per-step or per-layer path. The scheduler never knows: ModelRunner calls forward() as on one rank.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { DistributedError, InvalidRequestError, ModelLoadError, SILENT_LOGGER, UnsupportedFeatureError } from '../common/index.js';
import type { Logger } from '../common/index.js';
import { loadModelConfig, type KernelEnv } from '../config/index.js';
import { abortLocalGroup, createLocalGroup, openLocalCommunicator, type Communicator, type LocalGroupHandle } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { parallelGroups, type ForwardBatch, type ForwardOutput } from '../layers/index.js';
import { KVPool, type KVPoolLayout } from '../mem_cache/index.js';
import { getModelDefinition, loadModel, type LoadedModel } from '../models/index.js';
import type { ForwardModel } from './model_runner.js';
import { CommStepChannel, RankBoard, type RankBoardHandle, type StepChannel } from './rank_channel.js';
import { decodeStep, encodeForwardStep, encodeShutdownStep } from './step_codec.js';

/** Threads per rank by default: max(1, ⌊cores / ranks on this node⌋), so ranks never oversubscribe the machine. */
export function defaultThreadsPerRank(ranksOnNode: number, cores = availableParallelism()): number {
  return Math.max(1, Math.floor(cores / Math.max(1, ranksOnNode)));
}

/** What a rank worker thread gets in workerData. */
export interface TpRankInit {
  readonly rank: number;
  readonly tpSize: number;
  readonly epSize: number;
  readonly modelPath: string;
  readonly overrides: Record<string, unknown> | string;
  readonly threads: number;
  readonly kernelEnv?: KernelEnv;
  readonly world: LocalGroupHandle;
  readonly tp: LocalGroupHandle;
  readonly board: RankBoardHandle;
}

/**
 * A rank's step loop: receives each step, runs the forward over this rank's shard and KV pool (created on the first
 * step, sized from the step's kvMaxLocs), drops the output (rank 0 samples); returns on the shutdown step.
 * @param allocKv KV storage allocator (Ops.allocateKvBuffer)
 * @throws whatever the forward throws (DistributedError when a peer failed); the caller aborts the groups
 */
export function runRankLoop(model: ForwardModel, channel: StepChannel, allocKv?: (n: number) => Float32Array): void {
  let pool: KVPool | null = null;
  for (;;) {
    const step = decodeStep(channel.receive());
    if (step.kind === 'shutdown') return;
    pool ??= new KVPool(model.kvPoolLayout(), step.kvMaxLocs, Math.min(step.kvMaxLocs, 64), allocKv);
    const batch = step.build(pool);
    let maxLoc = 0;
    for (let t = 0; t < batch.numTokens; t++) maxLoc = Math.max(maxLoc, batch.outCacheLoc[t]);
    pool.ensureLocs(maxLoc + 1);
    model.forward(batch);
  }
}

/** How rank 0 reaches and controls the other ranks (in-process threads here; processes over Gloo for multi-node). */
export interface TpRanksControl {
  /** Carries the step descriptors to every other rank. */
  readonly channel: StepChannel;
  /** The groups rank 0 holds (world, tp, …): closed at shutdown. */
  readonly groups: readonly Communicator[];
  /** Breaks every group so ranks blocked in a collective throw at once (rank 0's step failed). */
  readonly abort: (reason: string) => void;
  /** "TP rank r: cause" of every rank that reported a failure ('' when none). */
  readonly failures?: () => string;
  /** Runs after the shutdown step was sent and the groups closed (e.g. unref the rank threads). */
  readonly onClose?: () => void;
}

/** Rank 0's model: broadcasts each step, then runs its shard; fans the same ForwardBatch out to every rank. */
export class TpForwardModel implements ForwardModel {
  private closed = false;

  constructor(
    /** Rank 0's shard of the model. */
    readonly local: ForwardModel,
    readonly tpSize: number,
    private readonly ranks: TpRanksControl,
  ) {}

  kvPoolLayout(): KVPoolLayout {
    return this.local.kvPoolLayout();
  }

  /**
   * @returns rank 0's output (full logits: the LM head all-gathers; hidden states when captured are rank 0's, the
   *   same on every rank)
   * @throws DistributedError naming the failed rank when a peer fails (the groups are then broken: later steps throw too)
   */
  forward(batch: ForwardBatch): ForwardOutput {
    if (this.closed) throw new DistributedError('tensor-parallel ranks are shut down');
    try {
      this.ranks.channel.send(encodeForwardStep(batch, batch.kvPool.maxLocs));
      return this.local.forward(batch);
    } catch (e) {
      const why = this.ranks.failures?.() ?? '';
      this.ranks.abort(why || `TP rank 0 failed: ${(e as Error).message}`); // wake every rank still in a collective
      if (why) throw new DistributedError(`tensor-parallel step failed: ${why}`, { cause: e });
      throw e;
    }
  }

  /** Sends the shutdown step and releases the groups (idempotent); the ranks leave their loops and exit. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.ranks.channel.send(encodeShutdownStep());
    } catch {
      // a broken group: the ranks have failed already
    }
    for (const g of this.ranks.groups) g.close();
    this.ranks.onClose?.();
  }
}

/** Options of launchTpRanks. */
export interface TpLaunchOptions {
  readonly modelPath: string;
  readonly overrides?: Record<string, unknown> | string;
  readonly tpSize: number;
  readonly epSize: number;
  /** Compute threads per rank (default defaultThreadsPerRank(tpSize)). */
  readonly threadsPerRank?: number;
  readonly kernelEnv?: KernelEnv;
  /** --dist-timeout in ms: how long a collective (and start-up) waits for a rank (default 30 minutes). */
  readonly timeoutMs?: number;
  readonly logger?: Logger;
}

/** The launched ranks: rank 0's wrapped model and what it loaded. */
export interface TpLaunch {
  readonly model: TpForwardModel;
  /** Rank 0's load (its config, definition and shard). */
  readonly rank0: LoadedModel;
  /** Weight bytes each rank read, by rank. */
  readonly weightBytes: readonly number[];
  readonly threadsPerRank: number;
  /** KV storage of rank 0's pool (its backend's Ops.allocateKvBuffer). */
  readonly allocKv: (floats: number) => Float32Array;
}

/**
 * Starts ranks 1..tpSize-1 as worker threads, loads rank 0's shard on this thread, and waits (a barrier on the world
 * group) until every rank has loaded its shard. Each rank reads only its slices of the checkpoint.
 * @throws InvalidRequestError for a layout the model does not split into (from rank 0's shard plan); ModelLoadError
 *   naming the rank when another rank cannot load; DistributedError when a rank never reports within the timeout
 */
export function launchTpRanks(o: TpLaunchOptions): TpLaunch {
  const logger = o.logger ?? SILENT_LOGGER;
  if (o.epSize < 1 || o.tpSize % o.epSize !== 0) throw new InvalidRequestError(`--ep-size (${o.epSize}) must divide --tp-size (${o.tpSize})`, 'ep_size');
  const threads = o.threadsPerRank ?? defaultThreadsPerRank(o.tpSize);
  const timeoutMs = o.timeoutMs ?? 1_800_000;
  const world = createLocalGroup(o.tpSize, { name: 'world', timeoutMs });
  const tp = createLocalGroup(o.tpSize, { name: 'tp', timeoutMs });
  const board = RankBoard.create(o.tpSize);
  const worldComm = openLocalCommunicator(world, 0);
  const tpComm = openLocalCommunicator(tp, 0);
  const groups = [worldComm, tpComm];
  const workers: Worker[] = [];
  const overrides = o.overrides ?? {};
  let rank0: LoadedModel;
  let allocKv: (floats: number) => Float32Array;
  try {
    // Rank 0 first plans its shard, so a layout the model cannot split stops start-up before any thread starts.
    const parallel = parallelGroups(0, o.tpSize, o.epSize, tpComm);
    const ops = createOps({ threads, ...(o.kernelEnv ? { env: o.kernelEnv } : {}) });
    allocKv = (n) => ops.allocateKvBuffer(n);
    const init = (rank: number): TpRankInit => ({ rank, tpSize: o.tpSize, epSize: o.epSize, modelPath: o.modelPath, overrides, threads, ...(o.kernelEnv ? { kernelEnv: o.kernelEnv } : {}), world, tp, board: board.handle });
    const config = loadModelConfig(o.modelPath, overrides);
    const definition = getModelDefinition(config);
    if (!definition.shardTensors) throw new UnsupportedFeatureError(`architecture ${config.architectures[0] ?? '?'} has no tensor-parallel layout (--tp-size ${o.tpSize})`);
    definition.shardTensors(config, definition.expectedTensors(config), parallel); // a layout error stops here, before any thread
    for (let r = 1; r < o.tpSize; r++) {
      const w = new Worker(new URL('./tp_worker_main.js', import.meta.url), { workerData: init(r) });
      w.on('error', (e) => logger.error(`TP rank ${r} thread died: ${e.message}`));
      workers.push(w);
    }
    rank0 = loadModel(o.modelPath, { ops, overrides, logger, parallel }); // the workers load their shards meanwhile
    board.ready(0, rank0.weightBytes);
    try {
      worldComm.barrier(); // every rank has loaded (or one failed and aborted the group)
    } catch (e) {
      const why = board.failures();
      throw why ? new ModelLoadError(`tensor-parallel start-up failed: ${why}`, {}, { cause: e }) : e;
    }
  } catch (e) {
    for (const h of [world, tp]) abortLocalGroup(h, null, `TP start-up failed: ${(e as Error).message}`);
    for (const w of workers) void w.terminate();
    throw e;
  }
  const weightBytes = Array.from({ length: o.tpSize }, (_, r) => board.weightBytesOf(r));
  for (let r = 0; r < o.tpSize; r++) logger.info(`[TP${r}] Load weight end. weight bytes=${weightBytes[r]} (${(weightBytes[r] / 2 ** 20).toFixed(2)} MiB), tp_size=${o.tpSize}, ep_size=${o.epSize}, threads=${threads}, comm=${tp.backend}`);
  const control: TpRanksControl = {
    channel: new CommStepChannel(worldComm),
    groups,
    abort: (reason) => {
      if (board.failures() === '') board.fail(0, reason); // the peers then know the cause is not theirs
      for (const h of [world, tp]) abortLocalGroup(h, null, reason);
    },
    failures: () => board.failures(),
    onClose: () => { for (const w of workers) w.unref(); },
  };
  return { model: new TpForwardModel(rank0.model, o.tpSize, control), rank0, weightBytes, threadsPerRank: threads, allocKv };
}

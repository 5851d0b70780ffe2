// Tensor/expert parallelism on worker threads (SGLang's TP workers, one per rank; serving-spec §7.1). Rank 0 runs on
// the engine-core thread: its model is wrapped in TpForwardModel, which first sends the step descriptor to every rank
// through the world StepChannel and then runs its own shard; ranks 1..N-1 are worker threads (tp_worker_main.ts) that
// each hold their shard and their own KV pool (their heads, the same token index space) and loop in runRankLoop:
// receive step → forward (the collectives inside the model meet rank 0's) → next step. Nothing crosses postMessage
// on the per-step or per-layer path. The scheduler never knows: ModelRunner calls forward() as on one rank.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { DistributedError, InvalidRequestError, ModelLoadError, SILENT_LOGGER, UnsupportedFeatureError } from '../common/index.js';
import type { KvCacheDtype, Logger } from '../common/index.js';
import { loadModelConfig, type KernelEnv } from '../config/index.js';
import { abortCommunicator, abortLocalGroup, abortLocalLink, createLocalGroup, glooSubgroupRef, openGroup, type Communicator, type GlooGroupRef, type GroupRef } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { contextParallelGroups, parallelGroups, parallelLayout, type ForwardBatch, type ForwardOutput, type ParallelGroups } from '../layers/index.js';
import { KVPool, type KVPoolLayout } from '../mem_cache/index.js';
import { getModelDefinition, loadModel, type LoadedModel } from '../models/index.js';
import type { ForwardModel } from './model_runner.js';
import { CommStepChannel, RankBoard, type RankBoardHandle, type StepChannel } from './rank_channel.js';
import { decodeStep, encodeForwardStep, encodeShutdownStep } from './step_codec.js';
import { ppLinkEnds, ppPorts, ppRankCp, ppRankInit, type PpLayout, type PpRankInit } from './pp_layout.js';
import { planStages } from './pp_runner.js';
import { leaderGatherKv, leaderScatterKv, runKvStep } from './kv_steps.js';

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
  /** --kv-cache-dtype of the KV pool every rank holds (default 'auto'). */
  readonly kvCacheDtype?: KvCacheDtype;
  /** The world group (in-process, or Gloo across nodes: then `rank` is the global rank). */
  readonly world: GroupRef;
  readonly tp: GroupRef;
  readonly board: RankBoardHandle;
  /** --attn-cp-size > 1 (prefill CP): the CP size and this rank's attn_tp group (null when attn_tp = 1) and CP group. */
  readonly cp?: { readonly size: number; readonly attn: GroupRef | null; readonly group: GroupRef };
  /**
   * --pp-size > 1: this rank's stage and links (pp_layout.ts). `rank` is then the global rank (stage · tpSize + TP
   * rank), `tp` its stage's TP group, `world` every rank of every stage.
   */
  readonly pp?: PpRankInit;
}

/** The groups of a prefill-CP layout: per CP rank its attn_tp group (null when attn_tp = 1), per attn_tp rank its CP group. */
export interface CpGroupRefs {
  readonly size: number;
  readonly attn: readonly (GroupRef | null)[];
  readonly cp: readonly GroupRef[];
}

/**
 * The groups of `--attn-cp-size cpSize` over tpSize ranks (attn_cp_rank = rank // attn_tp, attn_tp_rank = rank %
 * attn_tp, attn_tp = tp / cp): in-process groups on one node; across nodes (`gloo`: the TP group of the cluster)
 * Gloo groups named attn_tp<k> / attn_cp<i>, derived the same way on every node.
 * @param timeoutMs --dist-timeout in ms (in-process groups)
 */
export function cpGroupRefs(tpSize: number, cpSize: number, timeoutMs: number, gloo?: GlooGroupRef): CpGroupRefs {
  const a = tpSize / cpSize;
  const make = (name: string, size: number): GroupRef => (gloo ? glooSubgroupRef(gloo, name, size) : createLocalGroup(size, { name, timeoutMs }));
  return {
    size: cpSize,
    attn: Array.from({ length: cpSize }, (_, k) => (a > 1 ? make(`attn_tp${k}`, a) : null)),
    cp: Array.from({ length: a }, (_, i) => make(`attn_cp${i}`, cpSize)),
  };
}

/** Every group of a CP layout (to break them all on a failure). */
function cpRefsList(refs: CpGroupRefs | null): GroupRef[] {
  return refs ? [...refs.attn.filter((r): r is GroupRef => r !== null), ...refs.cp] : [];
}

/** The groups a rank belongs to (world, tp, its CP groups, stage 0's step channel). */
export function rankGroupRefs(init: TpRankInit): GroupRef[] {
  return [init.world, init.tp, ...(init.cp ? [init.cp.group, ...(init.cp.attn ? [init.cp.attn] : [])] : []), ...(init.pp?.step0 ? [init.pp.step0] : [])];
}

/** Breaks a rank's in-process links (its own ends: the neighbours blocked on them throw at once). */
export function breakRankLinks(init: TpRankInit, reason: string): void {
  for (const e of ppLinkEnds(init.pp)) if (e.backend === 'port') abortLocalLink(e, reason);
}

/** Rank `rank`'s part of the CP groups. */
function cpInitOf(refs: CpGroupRefs | null, rank: number, tpSize: number): TpRankInit['cp'] {
  if (!refs) return undefined;
  const a = tpSize / refs.size;
  return { size: refs.size, attn: refs.attn[Math.floor(rank / a)], group: refs.cp[rank % a] };
}

/**
 * Opens a rank's CP groups (when any) and returns its layout: plain TP/EP, or prefill CP (context_parallel.ts).
 * @param comms receives the opened communicators (closed by the caller)
 */
export function rankParallel(rank: number, tpSize: number, epSize: number, tp: Communicator, cp: TpRankInit['cp'], comms: Communicator[]): ParallelGroups {
  if (!cp) return parallelGroups(rank, tpSize, epSize, tp);
  const a = tpSize / cp.size;
  const attn = cp.attn ? openGroup(cp.attn, rank % a) : null;
  if (attn) comms.push(attn);
  const group = openGroup(cp.group, Math.floor(rank / a));
  comms.push(group);
  return contextParallelGroups(rank, tpSize, epSize, cp.size, tp, attn, group);
}

/** KV pools a rank keeps at once (one per KV pool of rank 0 in recent steps; the engine uses one). */
const MAX_RANK_POOLS = 4;

/**
 * A rank's step loop: receives each step, runs the forward over this rank's shard and its own KV pool for the step's
 * kvPoolId (created on first use, sized from kvMaxLocs; a tool or test that makes a new pool on rank 0 gets a new one
 * here), drops the output (rank 0 samples); returns on the shutdown step.
 * @param allocKv KV storage allocator (Ops.allocateKvBuffer)
 * @param kvComm the world group, for PD's KV steps (kv_steps.ts; rank 0 gathers over it)
 * @throws whatever the forward throws (DistributedError when a peer failed); the caller aborts the groups
 */
export function runRankLoop(model: ForwardModel, channel: StepChannel, allocKv?: (n: number) => Float32Array, kvCacheDtype: KvCacheDtype = 'auto', kvComm?: Communicator): void {
  const pools = new Map<number, KVPool>();
  for (;;) {
    const step = decodeStep(channel.receive());
    if (step.kind === 'shutdown') return;
    let pool = pools.get(step.kvPoolId);
    if (!pool) {
      if (pools.size >= MAX_RANK_POOLS) pools.delete(pools.keys().next().value!);
      pool = new KVPool(model.kvPoolLayout(kvCacheDtype), step.kvMaxLocs, Math.min(step.kvMaxLocs, 64), allocKv);
      pools.set(step.kvPoolId, pool);
    }
    if (step.kind !== 'forward') {
      if (!kvComm) throw new DistributedError('a PD KV step reached a rank without its group');
      runKvStep(step, pool, kvComm);
      continue;
    }
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
  /** The group `channel` runs over (the world group): PD's KV steps gather over it. */
  readonly kvComm?: Communicator;
}

/** Rank 0's model: broadcasts each step, then runs its shard; fans the same ForwardBatch out to every rank. */
export class TpForwardModel implements ForwardModel {
  private closed = false;
  /** Set by the first failed step: the groups are broken from then on. */
  private broken: string | null = null;
  /** Ids of rank 0's KV pools (the ranks keep a pool of their own per id). */
  private readonly poolIds = new WeakMap<KVPool, number>();
  private nextPoolId = 0;

  constructor(
    /** Rank 0's shard of the model. */
    readonly local: ForwardModel,
    readonly tpSize: number,
    private readonly ranks: TpRanksControl,
  ) {}

  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout {
    return this.local.kvPoolLayout(kvCacheDtype);
  }

  /**
   * @returns rank 0's output (full logits: the LM head all-gathers; hidden states when captured are rank 0's, the
   *   same on every rank)
   * @throws DistributedError naming the failed rank when a peer fails (the groups are then broken: later steps throw too)
   */
  forward(batch: ForwardBatch): ForwardOutput {
    if (this.closed) throw new DistributedError('tensor-parallel ranks are shut down');
    if (this.broken !== null) throw new DistributedError(`tensor-parallel ranks are broken by an earlier failed step: ${this.broken}`);
    try {
      this.ranks.channel.send(encodeForwardStep(batch, batch.kvPool.maxLocs, this.poolId(batch.kvPool)));
      return this.local.forward(batch);
    } catch (e) {
      const why = this.ranks.failures?.() ?? '';
      this.broken = why || `TP rank 0 failed: ${(e as Error).message}`;
      this.ranks.abort(this.broken); // wake every rank still in a collective
      if (why) throw new DistributedError(`tensor-parallel step failed: ${why}`, { cause: e });
      throw e;
    }
  }

  /** Non-null once a step failed: the rank groups are broken and every later step throws at once. */
  brokenReason(): string | null {
    return this.broken;
  }

  /** Ranks whose KV pools hold this model's KV (PD reaches them through gatherRankKv / scatterRankKv). */
  get kvRanks(): number {
    return this.ranks.kvComm ? this.tpSize : 1;
  }

  /**
   * PD: the KV rows of `locs` of every rank's pool (their heads), rank order, layer-major as gatherKvRows packs them.
   * @throws DistributedError when a rank fails (the groups are then broken)
   */
  gatherRankKv(pool: KVPool, locs: Int32Array): Uint8Array[] {
    return this.kvStep(() => leaderGatherKv(this.ranks.channel, this.ranks.kvComm!, pool, this.poolId(pool), locs));
  }

  /** PD: writes rows[r] into rank r's pool at `locs`. @throws DistributedError when a rank fails */
  scatterRankKv(pool: KVPool, locs: Int32Array, rows: readonly Uint8Array[]): void {
    this.kvStep(() => leaderScatterKv(this.ranks.channel, this.tpSize, pool, this.poolId(pool), locs, rows));
  }

  private poolId(pool: KVPool): number {
    let id = this.poolIds.get(pool);
    if (id === undefined) this.poolIds.set(pool, (id = this.nextPoolId++));
    return id;
  }

  private kvStep<T>(run: () => T): T {
    if (this.closed) throw new DistributedError('tensor-parallel ranks are shut down');
    if (this.broken !== null) throw new DistributedError(`tensor-parallel ranks are broken by an earlier failed step: ${this.broken}`);
    if (!this.ranks.kvComm) throw new DistributedError('the tensor-parallel ranks have no KV step group');
    try {
      return run();
    } catch (e) {
      const why = this.ranks.failures?.() ?? '';
      this.broken = why || `TP rank 0 failed in a KV step: ${(e as Error).message}`;
      this.ranks.abort(this.broken);
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
  /** --kv-cache-dtype of every rank's KV pool (default 'auto'); rank 0's pool is the caller's (kvPoolLayout(dtype)). */
  readonly kvCacheDtype?: KvCacheDtype;
  /** --dist-timeout in ms: how long a collective (and start-up) waits for a rank (default 30 minutes). */
  readonly timeoutMs?: number;
  readonly logger?: Logger;
  /** Multi-node (--nnodes > 1): this node's ranks and the Gloo groups spanning every node; absent on one node. */
  readonly nodes?: TpNodes;
  /** Prefill context parallelism (--enable-prefill-cp / --attn-cp-size): CP group size, dividing tpSize (default 1). */
  readonly attnCpSize?: number;
}

/** A node's part of a multi-node layout (plain data: crosses into the engine's worker thread). */
export interface TpNodes {
  /** Gloo world group of all tp ranks (every node). */
  readonly world: GlooGroupRef;
  /** Gloo TP group (the same ranks as world while pp = 1). */
  readonly tp: GlooGroupRef;
  /** Global rank of this node's first rank (node_rank × ranksPerNode). */
  readonly firstRank: number;
  /** Ranks on this node (tp_size · pp_size / nnodes), all threads of this process. */
  readonly ranksPerNode: number;
  /** --pp-size > 1: every group and link of the tp × pp layout as Gloo refs (pp_layout.ts); `world` is its world. */
  readonly pp?: PpLayout;
}

/**
 * Breaks the groups so every rank blocked in them throws at once: in-process groups through their shared memory
 * (naming `deadRank` and `reason`), Gloo groups by closing this rank's pairs (`comms`, the communicators held here).
 */
export function breakGroups(refs: readonly GroupRef[], comms: readonly Communicator[], deadRank: number | null, reason: string): void {
  for (const h of refs) if (h.backend !== 'gloo') abortLocalGroup(h, deadRank, reason);
  if (refs.some((h) => h.backend === 'gloo')) for (const c of comms) abortCommunicator(c);
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
  const nodes = o.nodes ?? null;
  if (nodes && nodes.firstRank !== 0) throw new DistributedError('launchTpRanks runs on node 0 (global rank 0); other nodes use runNodeRanks');
  const localRanks = nodes ? nodes.ranksPerNode : o.tpSize;
  const threads = o.threadsPerRank ?? defaultThreadsPerRank(localRanks);
  const timeoutMs = o.timeoutMs ?? 1_800_000;
  // In one process: native shared memory when the addon has it, else SharedArrayBuffer; across nodes: Gloo.
  const world: GroupRef = nodes ? nodes.world : createLocalGroup(o.tpSize, { name: 'world', timeoutMs });
  const tp: GroupRef = nodes ? nodes.tp : createLocalGroup(o.tpSize, { name: 'tp', timeoutMs });
  const board = RankBoard.create(o.tpSize);
  const cpSize = o.attnCpSize ?? 1;
  if (cpSize > 1 && o.tpSize % cpSize !== 0) throw new InvalidRequestError(`--attn-cp-size (${cpSize}) must divide --tp-size (${o.tpSize})`, 'attn_cp_size');
  // across nodes every node derives the same Gloo CP groups from the cluster's TP group
  const cpRefs: CpGroupRefs | null = cpSize > 1 ? cpGroupRefs(o.tpSize, cpSize, timeoutMs, nodes?.tp) : null;
  const groups: Communicator[] = [];
  const workers: Worker[] = [];
  const overrides = o.overrides ?? {};
  let rank0: LoadedModel;
  let allocKv: (floats: number) => Float32Array;
  let worldComm: Communicator;
  try {
    const ops = createOps({ threads, ...(o.kernelEnv ? { env: o.kernelEnv } : {}) });
    allocKv = (n) => ops.allocateKvBuffer(n);
    const init = (rank: number): TpRankInit => ({ rank, tpSize: o.tpSize, epSize: o.epSize, modelPath: o.modelPath, overrides, threads, ...(o.kernelEnv ? { kernelEnv: o.kernelEnv } : {}), ...(o.kvCacheDtype ? { kvCacheDtype: o.kvCacheDtype } : {}), world, tp, board: board.handle, ...(cpRefs ? { cp: cpInitOf(cpRefs, rank, o.tpSize) } : {}) });
    const config = loadModelConfig(o.modelPath, overrides);
    const definition = getModelDefinition(config);
    if (!definition.shardTensors) throw new UnsupportedFeatureError(`architecture ${config.architectures[0] ?? '?'} has no tensor-parallel layout (--tp-size ${o.tpSize})`);
    if (cpSize > 1 && !/^Deepseek/.test(config.architectures[0] ?? '')) {
      throw new UnsupportedFeatureError(`prefill context parallelism (--attn-cp-size ${cpSize}) is built for DeepSeek's MLA attention, not ${config.architectures[0] ?? '?'}`);
    }
    // Rank 0 first plans its shard, so a layout the model cannot split stops start-up before any thread starts.
    definition.shardTensors(config, definition.expectedTensors(config), parallelLayout(0, o.tpSize, o.epSize));
    for (let r = 1; r < localRanks; r++) workers.push(spawnRank(init(r), board, logger));
    // Opening a Gloo group blocks until every rank of every node has joined (the workers join on their threads).
    worldComm = openGroup(world, 0);
    groups.push(worldComm);
    const tpComm = openGroup(tp, 0);
    groups.push(tpComm);
    const parallel = rankParallel(0, o.tpSize, o.epSize, tpComm, cpInitOf(cpRefs, 0, o.tpSize), groups);
    rank0 = loadModel(o.modelPath, { ops, overrides, logger, parallel }); // the workers load their shards meanwhile
    board.ready(0, rank0.weightBytes);
    try {
      worldComm.barrier(); // every rank has loaded (or one failed and aborted the group)
    } catch (e) {
      const why = board.failures();
      throw why ? new ModelLoadError(`tensor-parallel start-up failed: ${why}`, {}, { cause: e }) : e;
    }
  } catch (e) {
    breakGroups([world, tp, ...cpRefsList(cpRefs)], groups, null, `TP start-up failed: ${(e as Error).message}`);
    for (const w of workers) void w.terminate();
    throw e;
  }
  const weightBytes = Array.from({ length: localRanks }, (_, r) => board.weightBytesOf(r));
  for (let r = 0; r < localRanks; r++) logger.info(`[TP${r}] Load weight end. weight bytes=${weightBytes[r]} (${(weightBytes[r] / 2 ** 20).toFixed(2)} MiB), tp_size=${o.tpSize}, ep_size=${o.epSize}${cpSize > 1 ? `, attn_cp_size=${cpSize} (attn_cp_rank ${Math.floor(r / (o.tpSize / cpSize))})` : ''}, threads=${threads}, comm=${tp.backend}`);
  const control: TpRanksControl = {
    channel: new CommStepChannel(worldComm),
    kvComm: worldComm,
    groups,
    abort: (reason) => {
      if (board.failures() === '') board.fail(0, reason); // the peers then know the cause is not theirs
      breakGroups([world, tp, ...cpRefsList(cpRefs)], groups, null, reason);
    },
    failures: () => board.failures(),
    onClose: () => { for (const w of workers) w.unref(); },
  };
  return { model: new TpForwardModel(rank0.model, o.tpSize, control), rank0, weightBytes, threadsPerRank: threads, allocKv };
}

/**
 * Starts one rank's worker thread. A thread that exits without leaving its loop (a crash, process.exit, a throw
 * outside the loop) breaks the in-process groups, so its peers fail at once instead of waiting out the timeout (across
 * nodes, Gloo sees the closed pairs itself).
 */
export function spawnRank(init: TpRankInit, board: RankBoard, logger: Logger): Worker {
  const r = init.rank;
  const w = new Worker(new URL('./tp_worker_main.js', import.meta.url), { workerData: init, transferList: ppPorts(init.pp) });
  w.on('error', (e) => logger.error(`${board.nameOf(r)} thread died: ${e.message}`));
  w.on('exit', (code) => {
    const st = board.stateOf(r);
    if (st === 'exited' || st === 'failed') return;
    board.fail(r, `thread exited (code ${code}) before leaving its step loop`);
    const why = `${board.nameOf(r)} thread exited with code ${code}`;
    breakGroups(rankGroupRefs(init), [], r, why);
    breakRankLinks(init, why);
  });
  return w;
}

/**
 * A node > 0 of a multi-node layout: runs this node's ranks (global ranks firstRank..firstRank+ranksPerNode-1) as
 * worker threads; they join the Gloo groups, load their shards and follow global rank 0's steps until the shutdown
 * step.
 * @returns once every rank has left its loop; rejects with the first rank failure (DistributedError naming it)
 */
export function runNodeRanks(o: TpLaunchOptions & { readonly nodes: TpNodes }): Promise<void> {
  const logger = o.logger ?? SILENT_LOGGER;
  const { nodes } = o;
  const threads = o.threadsPerRank ?? defaultThreadsPerRank(nodes.ranksPerNode);
  const pp = nodes.pp ?? null;
  const board = pp ? RankBoard.create(o.tpSize * pp.ppSize, o.tpSize) : RankBoard.create(o.tpSize);
  const overrides = o.overrides ?? {};
  const stages = pp ? planStages(o.modelPath, overrides, pp.ppSize) : [];
  const ranks = Array.from({ length: nodes.ranksPerNode }, (_, i) => nodes.firstRank + i);
  return new Promise<void>((resolve, reject) => {
    let left = ranks.length;
    const workers = ranks.map((rank) => {
      const cp = !pp && (o.attnCpSize ?? 1) > 1 ? cpInitOf(cpGroupRefs(o.tpSize, o.attnCpSize!, o.timeoutMs ?? 1_800_000, nodes.tp), rank, o.tpSize) : undefined;
      const init: TpRankInit = {
        rank, tpSize: o.tpSize, epSize: o.epSize, modelPath: o.modelPath, overrides, threads, ...(o.kernelEnv ? { kernelEnv: o.kernelEnv } : {}), ...(o.kvCacheDtype ? { kvCacheDtype: o.kvCacheDtype } : {}),
        world: nodes.world, tp: pp ? pp.tp[Math.floor(rank / o.tpSize)] : nodes.tp, board: board.handle, ...(cp ? { cp } : {}),
        ...(pp ? { pp: ppRankInit(pp, rank, stages), ...(pp.cp ? { cp: ppRankCp(pp, rank) } : {}) } : {}),
      };
      const w = spawnRank(init, board, logger);
      w.on('exit', () => {
        if (board.stateOf(rank) === 'failed') {
          for (const x of workers) void x.terminate();
          reject(new DistributedError(board.failures() || `${board.nameOf(rank)} failed`));
          return;
        }
        if (--left === 0) resolve();
      });
      return w;
    });
    logger.info(`node ranks ${ranks[0]}..${ranks[ranks.length - 1]} started (threads per rank ${threads}${(o.attnCpSize ?? 1) > 1 ? `, attn_cp_size ${o.attnCpSize}` : ''})`);
  });
}

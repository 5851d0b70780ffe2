// Attention data parallelism on rank threads (SGLang --enable-dp-attention; serving-spec §7.2). The TP group of tp
// ranks forms dp attention-DP groups of attn_tp = tp / dp ranks (attn_dp_rank = tp_rank // attn_tp_size; ranks laid
// over nodes in order, tp_size / nnodes per node, as SGLang's launch_tensor_parallel_group). Each group has its own
// engine core (scheduler, requests, radix cache, KV pool) on the thread of its attn_tp rank 0, the group leader, on the
// node holding that rank; the leader's model is a DpAttnForwardModel (dp_lockstep.ts): it sends each step to the
// group's other ranks (threads it starts, or threads of another node when the group spans nodes, over the group's step
// channel), joins the step exchange with every rank of the TP group and runs its shard; the per-layer dp_gather /
// dp_scatter around the MLPs (layers/dp_attention.ts) then meet on every rank. A group with nothing to run while
// another runs steps with an idle batch (no tokens) so every collective meets: the engine core calls afterIteration()
// after every scheduler step. Groups inside one process use shared-memory communicators; the TP group across nodes,
// and a group spanning nodes, use Gloo.
import { Worker } from 'node:worker_threads';
import { DistributedError, ModelLoadError, SILENT_LOGGER } from '../common/index.js';
import type { KvCacheDtype, Logger } from '../common/index.js';
import type { KernelEnv } from '../config/index.js';
import { createLocalGroup, glooSubgroupRef, openGroup, type Communicator, type GlooGroupRef, type GroupRef } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { dpAttentionGroups, type DpAttention } from '../layers/index.js';
import { KVPool } from '../mem_cache/index.js';
import { loadModel, type LoadedModel } from '../models/index.js';
import { DpAttnForwardModel, lockstepSync } from './dp_lockstep.js';
import { CommStepChannel, RankBoard, type RankBoardHandle, type StepChannel } from './rank_channel.js';
import { decodeStep } from './step_codec.js';
import { breakGroups } from './tp_runner.js';
import { runKvStep } from './kv_steps.js';

/** The groups of a DP-attention layout, made once per process on the thread that starts its ranks (plain data). */
export interface DpAttnGroupRefs {
  /** The whole TP group (tp ranks): the step sync, the MLPs' collectives and dp_gather. */
  readonly tp: GroupRef;
  /**
   * Per group: its attn_tp group (attention, embedding, LM head) and its step channel; null when attn_tp = 1 or when
   * no rank of the group runs in this process.
   */
  readonly attn: readonly (GroupRef | null)[];
  readonly step: readonly (GroupRef | null)[];
}

/** A node's place in a multi-node DP-attention layout (--nnodes > 1; plain data). */
export interface DpAttnNodes {
  /** The Gloo TP group over every node. */
  readonly tp: GlooGroupRef;
  readonly nodeRank: number;
  /** TP ranks per node (tp_size / nnodes): node k runs global ranks k·ranksPerNode … (k+1)·ranksPerNode − 1. */
  readonly ranksPerNode: number;
}

/** The ranks [first, first + count) that run in this process. */
export interface RankRange {
  readonly first: number;
  readonly count: number;
}

/** The node of global rank `rank` (0 on one node). */
export function nodeOfRank(rank: number, nodes: DpAttnNodes | null | undefined): number {
  return nodes ? Math.floor(rank / nodes.ranksPerNode) : 0;
}

/**
 * The groups of a DP-attention layout as seen from this process: on one node every group is in-process; across
 * nodes the TP group is Gloo, a group inside this node is in-process, a group spanning nodes is Gloo (named
 * attn_tp<g> / dp<g>_step, the same on every node) and a group wholly on another node is null here.
 * @param timeoutMs --dist-timeout in ms (in-process groups' collective timeout)
 */
export function dpAttnGroupRefs(tpSize: number, dpSize: number, timeoutMs: number, nodes?: DpAttnNodes | null): DpAttnGroupRefs {
  const a = tpSize / dpSize;
  const attn: (GroupRef | null)[] = [];
  const step: (GroupRef | null)[] = [];
  for (let g = 0; g < dpSize; g++) {
    const [first, last] = [nodeOfRank(g * a, nodes), nodeOfRank((g + 1) * a - 1, nodes)];
    const one = (name: string): GroupRef | null => {
      if (a === 1) return null;
      if (nodes && first !== last) return glooSubgroupRef(nodes.tp, name, a);
      return first === (nodes?.nodeRank ?? 0) ? createLocalGroup(a, { name, timeoutMs }) : null;
    };
    attn.push(one(`attn_tp${g}`));
    step.push(one(`dp${g}_step`));
  }
  return { tp: nodes ? nodes.tp : createLocalGroup(tpSize, { name: 'tp', timeoutMs }), attn, step };
}

/** One rank's start-up data (a group leader's engine core, or a rank thread). */
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
  /** The ranks of this process (default: every rank); a leader starts only its group's ranks among them. */
  readonly localRanks?: RankRange;
  /** The start-up board (attn_tp entries, by attn_tp rank) of the process's ranks of the group, when not a leader. */
  readonly board?: RankBoardHandle;
}

/** The group refs a rank belongs to (to break them on a failure). */
export function dpAttnRankRefs(init: DpAttnRankInit): GroupRef[] {
  const g = Math.floor(init.rank / (init.tpSize / init.dpSize));
  return [init.groups.tp, init.groups.attn[g], init.groups.step[g]].filter((r): r is GroupRef => r !== null);
}

/** Whether rank r runs in this process. */
function isLocal(r: number, range: RankRange | undefined): boolean {
  return !range || (r >= range.first && r < range.first + range.count);
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
    for (let r = 1; r < a; r++) if (isLocal(init.rank + r, init.localRanks)) workers.push(spawnDpRank({ ...init, rank: init.rank + r, board: board.handle }, board, refs, logger));
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
    let released = false;
    // The leader's thread ending without a shutdown (a crash, process.exit) breaks its groups from its own exit hook:
    // across nodes nothing else would tell the peers blocked in a Gloo collective.
    process.on('exit', () => {
      if (!released) breakGroups(refs, comms, init.rank, `attention-DP group ${g} leader (TP rank ${init.rank}) thread exited`);
    });
    const model = new DpAttnForwardModel(loaded.model, dp, tp, step ? new CommStepChannel(step) : null, {
      abort: (reason) => {
        if (board.failures() === '') board.fail(0, reason);
        breakGroups(refs, comms, null, reason);
      },
      release: (together) => {
        released = true;
        if (!together) breakGroups([init.groups.tp], comms, null, 'attention-DP shutdown');
        for (const c of comms) c.close();
        for (const w of workers) w.unref();
      },
    }, step);
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
 * Fault injection for tests (TSGLANG_TEST_RANK_EXIT="rank:steps", as tp_worker_main.ts): that rank's thread exits
 * abruptly (process.exit(70), no report) when it receives its steps-th step.
 */
function withInjectedExit(channel: StepChannel, rank: number): StepChannel {
  const m = /^(\d+):(\d+)$/.exec(process.env['TSGLANG_TEST_RANK_EXIT'] ?? '');
  if (!m || Number(m[1]) !== rank) return channel;
  let left = Number(m[2]);
  return { send: (s) => channel.send(s), receive: () => (--left <= 0 ? process.exit(70) : channel.receive()) };
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
  const channel = withInjectedExit(new CommStepChannel(step!), init.rank);
  const layout = loaded.model.kvPoolLayout(init.kvCacheDtype ?? 'auto');
  const pools = new Map<number, KVPool>();
  const idle = new KVPool(layout, 1, 1);
  for (;;) {
    const st = decodeStep(channel.receive());
    if (st.kind === 'shutdown') return;
    if (st.kind === 'kv_gather' || st.kind === 'kv_scatter') {
      // PD KV steps are the group's own (no step exchange with the other groups)
      const pool = pools.get(st.kvPoolId) ?? new KVPool(layout, st.kvMaxLocs, Math.min(st.kvMaxLocs, 64), (n) => ops.allocateKvBuffer(n));
      pools.set(st.kvPoolId, pool);
      runKvStep(st, pool, step!);
      continue;
    }
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

/**
 * A node of a multi-node DP-attention layout: starts, as worker threads, this node's ranks of the groups whose leader
 * runs on another node (groups spanning nodes; a group's other ranks are started by its leader, launchDpAttnGroup).
 * @param base every rank's start-up data but its rank (localRanks: this node's ranks)
 * @returns once every such rank has left its loop (at once when there is none); rejects with the first failure
 */
export function runRemoteLedDpAttnRanks(base: Omit<DpAttnRankInit, 'rank' | 'board'>, nodes: DpAttnNodes, logger: Logger = SILENT_LOGGER): Promise<void> {
  const a = base.tpSize / base.dpSize;
  const boards = new Map<number, RankBoard>();
  const ranks: number[] = [];
  for (let r = nodes.nodeRank * nodes.ranksPerNode; r < (nodes.nodeRank + 1) * nodes.ranksPerNode; r++) {
    if (r % a !== 0 && nodeOfRank(r - (r % a), nodes) !== nodes.nodeRank) ranks.push(r);
  }
  if (ranks.length === 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    let left = ranks.length;
    const workers = ranks.map((rank) => {
      const g = Math.floor(rank / a);
      const board = boards.get(g) ?? RankBoard.create(a);
      boards.set(g, board);
      const init: DpAttnRankInit = { ...base, rank, board: board.handle };
      const w = spawnDpRank(init, board, dpAttnRankRefs(init), logger);
      w.on('exit', () => {
        if (board.stateOf(rank % a) === 'failed') {
          for (const x of workers) void x.terminate();
          reject(new DistributedError(`TP rank ${rank}: ${board.errorOf(rank % a)}`));
        } else if (--left === 0) resolve();
      });
      return w;
    });
    logger.info(`attention-DP ranks ${ranks.join(', ')} of groups led by another node started`);
  });
}

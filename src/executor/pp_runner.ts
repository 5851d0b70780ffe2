// Pipeline parallelism on rank threads (SGLang --pp-size; serving-spec §7.4). The model's decoder layers are split into
// pp stages (layers/pipeline.ts: SGLang's get_pp_indices), each stage a TP group of tp ranks; world = tp · pp ranks,
// global rank = stage · tp + tp rank. Global rank 0 runs on the engine-core thread: its model is a PpForwardModel that
// launches each micro-batch — the step to stage 0's TP peers over their step channel, stage 0's layers here, the
// residual stream (and the step, and the sample plan) to stage 1 over a point-to-point link, sent asynchronously — and
// returns, so the scheduler can launch the next micro-batch while later stages compute; the last stage samples and
// sends the tokens back, collected in launch order. The other ranks are worker threads in pp_stage.ts's loop.
import { DistributedError, InternalError, InvalidRequestError, ModelLoadError, SILENT_LOGGER, UnsupportedFeatureError } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import { loadModelConfig, readDistEnv } from '../config/index.js';
import { abortLocalLink, createLocalGroup, createLocalLink, openGroup, openLink, type Communicator, type LinkEnd, type P2pLink } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { parallelLayout, pipelineStage, type ForwardBatch, type ForwardOutput, type PipelineStage } from '../layers/index.js';
import type { KVPool, KVPoolLayout } from '../mem_cache/index.js';
import { getModelDefinition, loadModel, type LoadedModel } from '../models/index.js';
import type { ForwardModel, PipelinedModel, RunResult, SampleRowRequest, ScoreRowRequest } from './model_runner.js';
import { makePpLayout, ppLayoutGroups, ppRankCp, ppRankInit } from './pp_layout.js';
import { decodeStageResult, encodeSamplePlan, encodeStageMessage, encodeStageShutdown } from './pp_protocol.js';
import { CommStepChannel, RankBoard, type StepChannel } from './rank_channel.js';
import { encodeForwardStep } from './step_codec.js';
import { breakGroups, defaultThreadsPerRank, rankParallel, spawnRank, type TpLaunchOptions, type TpRankInit } from './tp_runner.js';

/** How global rank 0 reaches the pipeline. */
export interface PpRanksControl {
  /** Stage 0's step channel to its TP peers (null when tp = 1). */
  readonly stepChannel: StepChannel | null;
  /** To stage 1's TP rank 0. */
  readonly next: P2pLink;
  /** From the last stage's TP rank 0. */
  readonly results: P2pLink;
  /** What rank 0 holds (closed at shutdown). */
  readonly groups: readonly Communicator[];
  readonly links: readonly P2pLink[];
  /** Breaks every group and link so every rank blocked in one throws at once. */
  readonly abort: (reason: string) => void;
  /** "PP stage s TP rank t (rank g): cause" of every rank that reported a failure ('' when none). */
  readonly failures: () => string;
  /** Forward time of each stage's TP rank 0 so far, ms (NaN for a stage on another node). */
  readonly stageBusyMs: () => number[];
  readonly onClose?: () => void;
}

const EMPTY = new Uint8Array(0);

/** Global rank 0's model: launches micro-batches into the pipeline and collects their samples (PipelinedModel). */
export class PpForwardModel implements PipelinedModel {
  private closed = false;
  private broken: string | null = null;
  private inFlight = 0;
  private readonly poolIds = new WeakMap<KVPool, number>();
  private nextPoolId = 0;

  constructor(
    /** Stage 0's shard on this thread. */
    readonly local: ForwardModel,
    readonly tpSize: number,
    readonly ppSize: number,
    /** pp_size + pp_async_batch_depth. */
    readonly loopSize: number,
    private readonly ctl: PpRanksControl,
  ) {}

  /** Stage 0's KV pool (its layers); the other stages keep pools of their own layers, the same token slots. */
  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout {
    return this.local.kvPoolLayout(kvCacheDtype);
  }

  /** Forward time of each stage so far, ms (pipeline bubble statistics). */
  stageBusyMs(): number[] {
    return this.ctl.stageBusyMs();
  }

  launch(batch: ForwardBatch, sample: readonly SampleRowRequest[], score: readonly ScoreRowRequest[]): void {
    this.send(batch, encodeSamplePlan(sample, score, false));
  }

  private send(batch: ForwardBatch, plan: Uint8Array): void {
    this.guard();
    try {
      let id = this.poolIds.get(batch.kvPool);
      if (id === undefined) this.poolIds.set(batch.kvPool, (id = this.nextPoolId++));
      const step = encodeForwardStep(batch, batch.kvPool.maxLocs, id);
      this.ctl.stepChannel?.send(encodeStageMessage(step, EMPTY, null));
      const out = this.local.forward(batch);
      this.ctl.next.send(encodeStageMessage(step, plan, out.ppHiddenOut ?? new Float32Array(0)));
      this.inFlight++;
    } catch (e) {
      throw this.fail(e as Error);
    }
  }

  collect(): RunResult {
    this.guard();
    if (this.inFlight === 0) throw new InternalError('PpForwardModel.collect: no micro-batch in flight');
    try {
      const r = decodeStageResult(this.ctl.results.recv());
      this.inFlight--;
      return r;
    } catch (e) {
      throw this.fail(e as Error);
    }
  }

  /**
   * A whole forward (tools, tests): every stage, the logits sent back from the last one.
   * @throws InternalError while micro-batches are in flight; DistributedError naming the failed stage and rank
   */
  forward(batch: ForwardBatch): ForwardOutput {
    if (this.inFlight > 0) throw new InternalError('PpForwardModel.forward while micro-batches are in flight');
    this.send(batch, encodeSamplePlan([], [], true));
    const r = this.collect() as RunResult & { logits?: Float32Array };
    return { logits: r.logits ?? new Float32Array(0) };
  }

  brokenReason(): string | null {
    return this.broken;
  }

  private guard(): void {
    if (this.closed) throw new DistributedError('pipeline-parallel ranks are shut down');
    if (this.broken !== null) throw new DistributedError(`pipeline-parallel ranks are broken by an earlier failed step: ${this.broken}`);
  }

  /** Marks the pipeline broken, wakes every rank, and names the failed stage/rank when one reported. */
  private fail(e: Error): Error {
    const why = this.ctl.failures();
    // nothing on this node's board and a link or group broke: a rank on another node (the error names the link's peer
    // and its node, or the group and this node); else rank 0's own failure
    const remote = why === '' && e.name === 'DistributedError';
    this.broken = why || (remote ? e.message : `PP stage 0 TP rank 0 (rank 0) failed: ${e.message}`);
    this.ctl.abort(this.broken);
    return why || remote ? new DistributedError(`pipeline-parallel step failed: ${why || e.message}`, { cause: e }) : e;
  }

  /** Sends the shutdown through the pipeline and releases the groups and links (idempotent). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.ctl.stepChannel?.send(encodeStageShutdown());
      this.ctl.next.send(encodeStageShutdown());
      this.ctl.next.flush();
    } catch {
      // a broken pipeline: the ranks have failed already
    }
    for (const g of this.ctl.groups) g.close();
    for (const l of this.ctl.links) l.close();
    this.ctl.onClose?.();
  }
}

/** Options of launchPpRanks: the TP options plus the pipeline's. */
export interface PpLaunchOptions extends TpLaunchOptions {
  /** --pp-size (≥ 2). */
  readonly ppSize: number;
  /** --pp-async-batch-depth: extra micro-batches in flight (default 0). */
  readonly asyncBatchDepth?: number;
}

/** The launched pipeline: rank 0's model and what it loaded. */
export interface PpLaunch {
  readonly model: PpForwardModel;
  readonly rank0: LoadedModel;
  readonly weightBytes: readonly number[];
  readonly threadsPerRank: number;
  readonly allocKv: (floats: number) => Float32Array;
  /** The stages' layer ranges. */
  readonly stages: readonly PipelineStage[];
}

/**
 * The stages of a `ppSize`-stage split of the model at `modelPath` (SGLANG_PP_LAYER_PARTITION honoured).
 * @throws InvalidRequestError for a bad partition; UnsupportedFeatureError for an architecture without stages
 */
export function planStages(modelPath: string, overrides: Record<string, unknown> | string, ppSize: number): PipelineStage[] {
  const config = loadModelConfig(modelPath, overrides);
  if (!getModelDefinition(config).pipelineStages) throw new UnsupportedFeatureError(`architecture ${config.architectures[0] ?? '?'} has no pipeline-parallel layout (--pp-size ${ppSize})`);
  const partition = readDistEnv().ppLayerPartition;
  return Array.from({ length: ppSize }, (_, s) => pipelineStage(config.numHiddenLayers, s, ppSize, partition));
}

/**
 * Starts ranks 1..tp·pp−1 as worker threads (this node's, under --nnodes), loads stage 0's TP rank 0 shard here and
 * waits until every rank has loaded its stage's shard (a barrier on the world group).
 * @throws InvalidRequestError for a layout the model does not split into; ModelLoadError naming the stage and rank that
 *   cannot load; DistributedError when a rank never reports within the timeout
 */
export function launchPpRanks(o: PpLaunchOptions): PpLaunch {
  const logger = o.logger ?? SILENT_LOGGER;
  const tp = o.tpSize;
  const pp = o.ppSize;
  if (o.epSize < 1 || tp % o.epSize !== 0) throw new InvalidRequestError(`--ep-size (${o.epSize}) must divide --tp-size (${tp})`, 'ep_size');
  const cpSize = o.attnCpSize ?? 1;
  if (cpSize > 1 && tp % cpSize !== 0) throw new InvalidRequestError(`--attn-cp-size (${cpSize}) must divide --tp-size (${tp})`, 'attn_cp_size');
  const nodes = o.nodes ?? null;
  if (nodes && nodes.firstRank !== 0) throw new DistributedError('launchPpRanks runs on node 0 (global rank 0); other nodes use runNodeRanks');
  const localRanks = nodes ? nodes.ranksPerNode : tp * pp;
  const threads = o.threadsPerRank ?? defaultThreadsPerRank(localRanks);
  const timeoutMs = o.timeoutMs ?? 1_800_000;
  const overrides = o.overrides ?? {};
  const stages = planStages(o.modelPath, overrides, pp);
  const config = loadModelConfig(o.modelPath, overrides);
  const definition = getModelDefinition(config);
  if (tp > 1) {
    if (!definition.shardTensors) throw new UnsupportedFeatureError(`architecture ${config.architectures[0] ?? '?'} has no tensor-parallel layout (--tp-size ${tp})`);
    definition.shardTensors(config, definition.expectedTensors(config), parallelLayout(0, tp, o.epSize));
  }
  // across nodes: the Gloo refs every node derived alike (cli/multinode.ts); in one process: shm groups and MessagePorts
  const layout = nodes?.pp ?? makePpLayout(tp, pp, (name, size) => createLocalGroup(size, { name, timeoutMs }), (name) => createLocalLink(name, timeoutMs), cpSize);
  if ((layout.cp?.size ?? 1) !== cpSize) throw new InvalidRequestError(`the node layout's prefill CP size (${layout.cp?.size ?? 1}) differs from --attn-cp-size (${cpSize})`, 'attn_cp_size');
  if (cpSize > 1 && !/^Deepseek/.test(config.architectures[0] ?? '')) {
    throw new UnsupportedFeatureError(`prefill context parallelism (--attn-cp-size ${cpSize}) is built for DeepSeek's MLA attention, not ${config.architectures[0] ?? '?'}`);
  }
  const board = RankBoard.create(tp * pp, tp);
  const allEnds = (): LinkEnd[] => [...layout.links.flat().flatMap((l) => [l.send, l.recv]), layout.results.send, layout.results.recv];
  const breakAll = (reason: string, groups: readonly Communicator[], links: readonly P2pLink[]): void => {
    breakGroups(ppLayoutGroups(layout), groups, null, reason);
    for (const e of allEnds()) if (e.backend === 'port') abortLocalLink(e, reason);
    for (const l of links) l.close();
  };
  const groups: Communicator[] = [];
  const links: P2pLink[] = [];
  const workers: ReturnType<typeof spawnRank>[] = [];
  let rank0: LoadedModel;
  let allocKv: (floats: number) => Float32Array;
  let ctl: PpRanksControl;
  try {
    const ops = createOps({ threads, ...(o.kernelEnv ? { env: o.kernelEnv } : {}) });
    allocKv = (n) => ops.allocateKvBuffer(n);
    const init = (rank: number): TpRankInit => ({
      rank, tpSize: tp, epSize: o.epSize, modelPath: o.modelPath, overrides, threads,
      ...(o.kernelEnv ? { kernelEnv: o.kernelEnv } : {}), ...(o.kvCacheDtype ? { kvCacheDtype: o.kvCacheDtype } : {}),
      world: layout.world, tp: layout.tp[Math.floor(rank / tp)], board: board.handle, pp: ppRankInit(layout, rank, stages),
      ...(layout.cp ? { cp: ppRankCp(layout, rank) } : {}),
    });
    for (let r = 1; r < localRanks; r++) workers.push(spawnRank(init(r), board, logger));
    const mine = ppRankInit(layout, 0, stages);
    const worldComm = openGroup(layout.world, 0);
    groups.push(worldComm);
    const tpComm = openGroup(layout.tp[0], 0);
    groups.push(tpComm);
    const step0 = layout.step0 ? openGroup(layout.step0, 0) : null;
    if (step0) groups.push(step0);
    const next = openLink(mine.next!);
    links.push(next);
    const results = openLink(layout.results.recv);
    links.push(results);
    rank0 = loadModel(o.modelPath, { ops, overrides, logger, parallel: rankParallel(0, tp, o.epSize, tpComm, ppRankCp(layout, 0), groups), stage: stages[0] });
    board.ready(0, rank0.weightBytes);
    try {
      worldComm.barrier();
    } catch (e) {
      const why = board.failures();
      throw why ? new ModelLoadError(`pipeline-parallel start-up failed: ${why}`, {}, { cause: e }) : e;
    }
    ctl = {
      stepChannel: step0 ? new CommStepChannel(step0) : null,
      next, results, groups, links,
      abort: (reason) => {
        if (board.failures() === '') board.fail(0, reason);
        breakAll(reason, groups, links);
      },
      failures: () => board.failures(),
      stageBusyMs: () => stages.map((_, s) => (s * tp < localRanks ? board.busyMsOf(s * tp) : NaN)),
      onClose: () => { for (const w of workers) w.unref(); },
    };
  } catch (e) {
    breakAll(`PP start-up failed: ${(e as Error).message}`, groups, links);
    for (const w of workers) void w.terminate();
    throw e;
  }
  const weightBytes = Array.from({ length: localRanks }, (_, r) => board.weightBytesOf(r));
  for (let r = 0; r < localRanks; r++) {
    const st = stages[Math.floor(r / tp)];
    logger.info(`[PP${st.ppRank} TP${r % tp}] Load weight end. layers [${st.startLayer}, ${st.endLayer}), weight bytes=${weightBytes[r]} (${(weightBytes[r] / 2 ** 20).toFixed(2)} MiB), tp_size=${tp}, pp_size=${pp}, ep_size=${o.epSize}${cpSize > 1 ? `, attn_cp_size=${cpSize}` : ''}, threads=${threads}`);
  }
  const local = new StageBusyModel(rank0.model, board);
  return { model: new PpForwardModel(local, tp, pp, pp + (o.asyncBatchDepth ?? 0), ctl), rank0, weightBytes, threadsPerRank: threads, allocKv, stages };
}

/** Rank 0's stage-0 shard, its forward time counted on the board (as the other stages count theirs). */
class StageBusyModel implements ForwardModel {
  constructor(private readonly inner: ForwardModel, private readonly board: RankBoard) {}

  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout {
    return this.inner.kvPoolLayout(kvCacheDtype);
  }

  forward(batch: ForwardBatch): ForwardOutput {
    const t0 = performance.now();
    try {
      return this.inner.forward(batch);
    } finally {
      this.board.addBusy(0, performance.now() - t0);
    }
  }
}

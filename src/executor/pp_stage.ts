// A pipeline stage's rank loop (SGLang event_loop_pp on a stage > 0, and the TP peers of every stage): receive a
// micro-batch (stage 0's TP peers from the stage's step channel, later stages from the previous stage's same TP rank),
// run this stage's layers over the received residual stream, then either send the residual stream on to the next
// stage (asynchronously: the link returns at once) or, on the last stage, compute the logits and — TP rank 0 only —
// sample and score them and send the result back to global rank 0. Every stage runs micro-batches in the order
// global rank 0 launched them, so a micro-batch's KV writes on a stage precede every later micro-batch's reads there.
import type { KvCacheDtype } from '../common/index.js';
import type { P2pLink } from '../distributed/index.js';
import { KVPool } from '../mem_cache/index.js';
import { ModelRunner, type ForwardModel } from './model_runner.js';
import { decodeSamplePlan, decodeStageMessage, encodeStageMessage, encodeStageResult, encodeStageShutdown } from './pp_protocol.js';
import { decodeStep } from './step_codec.js';

/** Where a stage rank gets its micro-batches and where it sends what it made. */
export interface StageIo {
  /** Blocks until the next stage message (no timeout: an idle server waits). @throws DistributedError */
  receive(): Uint8Array;
  /** To the next stage's rank of the same TP rank (null on the last stage). */
  readonly next: P2pLink | null;
  /** Last stage, TP rank 0: to global rank 0 (null elsewhere). */
  readonly results: P2pLink | null;
  /** Called with the wall time of each forward, ms (the stage's busy time: pipeline bubble statistics). */
  readonly onBusy?: (ms: number) => void;
}

/** KV pools a rank keeps at once (one per KV pool of rank 0 in recent steps; the engine uses one). */
const MAX_STAGE_POOLS = 4;

/**
 * Runs micro-batches until the shutdown message (which it passes on to the next stage).
 * @param vocabSize logits row width (the last stage's runner)
 * @param allocKv KV storage allocator (Ops.allocateKvBuffer)
 * @throws whatever the forward or the links throw (DistributedError when a peer failed); the caller breaks the groups
 */
export function runStageLoop(model: ForwardModel, io: StageIo, vocabSize: number, allocKv?: (n: number) => Float32Array, kvCacheDtype: KvCacheDtype = 'auto'): void {
  const runners = new Map<number, ModelRunner>();
  for (;;) {
    const msg = decodeStageMessage(io.receive());
    if (msg.kind === 'shutdown') {
      if (io.next) {
        io.next.send(encodeStageShutdown());
        io.next.flush();
      }
      return;
    }
    const step = decodeStep(msg.step);
    if (step.kind !== 'forward') continue;
    let runner = runners.get(step.kvPoolId);
    if (!runner) {
      if (runners.size >= MAX_STAGE_POOLS) runners.delete(runners.keys().next().value!);
      const pool = new KVPool(model.kvPoolLayout(kvCacheDtype), step.kvMaxLocs, Math.min(step.kvMaxLocs, 64), allocKv);
      runner = new ModelRunner(model, pool, vocabSize);
      runners.set(step.kvPoolId, runner);
    }
    const built = step.build(runner.kvPool);
    const batch = msg.hidden ? { ...built, ppHiddenIn: msg.hidden } : built;
    let maxLoc = 0;
    for (let t = 0; t < batch.numTokens; t++) maxLoc = Math.max(maxLoc, batch.outCacheLoc[t]);
    runner.kvPool.ensureLocs(maxLoc + 1);
    const t0 = performance.now();
    if (io.next) {
      const out = model.forward(batch);
      io.onBusy?.(performance.now() - t0);
      io.next.send(encodeStageMessage(msg.step, msg.plan, out.ppHiddenOut ?? new Float32Array(0)));
    } else if (io.results) {
      // the last stage's TP rank 0: logits → the same scoring and sampling as a one-rank ModelRunner
      const plan = decodeSamplePlan(msg.plan);
      if (plan.wantLogits) {
        const out = runner.forwardRaw(batch);
        io.onBusy?.(performance.now() - t0);
        io.results.send(encodeStageResult([], [], [], out.logits.slice(0, batch.logitRows.length * vocabSize)));
      } else {
        const r = runner.run(batch, plan.sample, plan.score);
        io.onBusy?.(performance.now() - t0);
        io.results.send(encodeStageResult(r.samples, r.scores, plan.sample.map((s) => s.info.rng.getState()), null));
      }
    } else {
      runner.forwardRaw(batch); // the last stage's other TP ranks: their share of the collectives (LM head all-gather included)
      io.onBusy?.(performance.now() - t0);
    }
  }
}

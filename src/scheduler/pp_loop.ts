// The scheduler's pipeline-parallel loop (SGLang scheduler_pp_mixin.py event_loop_pp): up to pp_size +
// pp_async_batch_depth micro-batches in flight. Each step launches the next micro-batch — the stage-0 forward runs on
// this thread, later stages overlap with what happens here next — and, once the ring is full (or nothing more can be
// launched), collects the oldest micro-batch's tokens from the last stage and processes them. A request is in one
// micro-batch at a time (its next decode needs its last token), except a long prompt whose chunks may be in several:
// its KV is committed at launch, so the next chunk can follow at once. Every stage runs micro-batches in launch order,
// so a later micro-batch always reads KV the earlier ones wrote, on every stage.
import type { ReqTokenOutput } from './io.js';
import type { Req } from './req.js';
import { applyStepResult, commitStepKv, type LaunchedStep } from './batch_result.js';
import { recoverFromFailedStep } from './failure_recovery.js';
import type { Scheduler } from './scheduler.js';
import type { StepResult } from './scheduler_types.js';

/** A micro-batch in flight: the step and what its launch committed. */
interface InFlight {
  readonly step: LaunchedStep;
  readonly committed: ReturnType<typeof commitStepKv>;
  readonly reqs: readonly Req[];
}

/** The micro-batches of a pipelined runner (ModelRunner.pipeline) and the order they come back in. */
export class MicroBatchLoop {
  private readonly ring: InFlight[] = [];
  /** Most micro-batches in flight at once so far, and most of one request's (chunks of a prompt) — statistics. */
  peakInFlight = 0;
  peakReqInFlight = 0;

  /**
   * @param loopSize micro-batches in flight at most: pp_size + pp_async_batch_depth
   * @param maxMicroBatchSize requests per micro-batch (SGLang pp_max_micro_batch_size)
   */
  constructor(private readonly s: Scheduler, readonly loopSize: number, readonly maxMicroBatchSize: number) {}

  /** Micro-batches launched and not yet collected. */
  get inFlight(): number {
    return this.ring.length;
  }

  /**
   * One iteration: launch a micro-batch if a slot is free and something can run; collect the oldest when the ring is
   * full or nothing was launched. A failure (a stage died: the pipeline is broken) fails every micro-batch in flight.
   * @param outputs outputs gathered so far this step (aborts); the collected micro-batch's are added
   */
  step(outputs: ReqTokenOutput[]): StepResult {
    let launched = false;
    let launching: readonly Req[] = [];
    try {
      if (this.ring.length < this.loopSize) {
        const plan = this.s.planStep(outputs, this.maxMicroBatchSize);
        if (plan) {
          launching = [...plan.extends_.map((it) => it.req), ...plan.decodes];
          this.launch(this.s.lowerStep(plan), launching, plan.tStart);
          launched = true;
        }
      }
      if (this.ring.length > 0 && (this.ring.length >= this.loopSize || !launched)) return this.complete(outputs);
      return { stats: null, outputs, launched };
    } catch (e) {
      const reqs = new Set<Req>([...this.ring.flatMap((m) => m.reqs), ...launching]);
      this.ring.length = 0;
      for (const r of reqs) r.inFlight = 0;
      return recoverFromFailedStep(this.s, [...reqs], e instanceof Error ? e : new Error(String(e)), outputs);
    }
  }

  /** Commits the step's KV, marks its requests in flight, runs stage 0 and sends the micro-batch on. */
  private launch(step: LaunchedStep, reqs: readonly Req[], tStart: number): void {
    const s = this.s;
    const committed = commitStepKv(s, step);
    // a request whose fill is complete belongs to the running batch from now on (counted against the limits)
    for (const r of committed.touched) if (!s.running.includes(r)) s.running.push(r);
    for (const r of reqs) this.peakReqInFlight = Math.max(this.peakReqInFlight, ++r.inFlight);
    this.ring.push({ step, committed, reqs });
    this.peakInFlight = Math.max(this.peakInFlight, this.ring.length);
    s.scheduleTimeMs += performance.now() - tStart;
    s.runner.launch(step.batch, step.lowered.sample, step.lowered.score);
  }

  /** Collects the oldest micro-batch's samples and processes them; applies the aborts that waited for it. */
  private complete(outputs: ReqTokenOutput[]): StepResult {
    const s = this.s;
    const m = this.ring[0];
    const result = s.runner.collect();
    this.ring.shift();
    const tPost = performance.now();
    for (const r of m.reqs) r.inFlight--;
    const out = applyStepResult(s, m.step, m.committed, result, outputs);
    for (const r of m.reqs) {
      if (r.inFlight > 0 || !r.toFinish) continue;
      const reason = r.toFinish;
      r.toFinish = null;
      if (s.live.get(r.rid) === r) s.finishReq(r.rid, reason);
    }
    outputs.push(...s.pendingOutputs.splice(0));
    s.postprocessTimeMs += performance.now() - tPost;
    return out;
  }

}

// Processing a step's result (SGLang scheduler_output_processor_mixin.py process_batch_result_prefill / _decode):
// commit the step's KV, record prompt logprobs, append the sampled tokens (stop rules, grammar), hand the finished
// requests' KV to the prefix cache and emit every touched request's output.
import type { ForwardBatch } from '../layers/index.js';
import type { RunResult } from '../executor/index.js';
import type { ReqTokenOutput } from './io.js';
import type { Req } from './req.js';
import type { ExtendItem, LoweredBatch } from './schedule_batch.js';
import type { Scheduler } from './scheduler.js';
import type { StepResult } from './scheduler_types.js';

/** A step scheduled, its KV allocated and lowered to a ForwardBatch, before its result (scheduler/ internal). */
export interface LaunchedStep {
  readonly extends_: readonly ExtendItem[];
  readonly decodes: readonly Req[];
  readonly lowered: LoweredBatch;
  readonly batch: ForwardBatch;
  /** Prefix-cache hits of the requests admitted for it. */
  readonly numCachedTokens: number;
  readonly numRetracted: number;
  /** Running requests when it was scheduled. */
  readonly numRunningBefore: number;
}

/**
 * Commits the KV of a launched step's tokens: a chunk that does not complete its request's fill makes it the chunked
 * request again and hands its computed prefix to the cache (SGLang process_prefill_chunk); the others are done
 * computing their fill.
 * @returns the requests that now get a token (completed extends, decodes) and whether an unfinished chunk ran
 */
export function commitStepKv(s: Scheduler, step: LaunchedStep): { touched: Req[]; hasUnfinishedChunk: boolean } {
  let hasUnfinishedChunk = false;
  const touched: Req[] = [];
  for (const it of step.extends_) {
    const req = it.req;
    req.kvCommittedLen += it.n;
    if (req.kvCommittedLen < req.seqLen) {
      req.isChunked = true;
      s.chunkedReq = req;
      hasUnfinishedChunk = true;
      s.prefillChunkDone?.(req); // PD prefill: this chunk's pages go out now
      s.mem.cacheUnfinished(req);
    } else {
      req.isChunked = false;
      if (s.chunkedReq === req) s.chunkedReq = null;
      if (req.maxNewTokens === 0) req.finishReason = { type: 'length', length: 0 };
      touched.push(req);
    }
  }
  for (const req of step.decodes) {
    req.kvCommittedLen += 1;
    touched.push(req);
  }
  return { touched, hasUnfinishedChunk };
}

/**
 * The postprocess of a step whose forward returned `result`: KV committed, prompt logprobs recorded, sampled tokens
 * appended (with their logprobs), the EAGLE draft seeded, finished requests settled, every touched request's output
 * pushed to `outputs`.
 */
export function processBatchResult(s: Scheduler, step: LaunchedStep, result: RunResult, outputs: ReqTokenOutput[]): StepResult {
  return applyStepResult(s, step, commitStepKv(s, step), result, outputs);
}

/**
 * The part of processBatchResult after the KV commit (pipeline parallelism commits at launch and applies the result
 * when the last stage sends it).
 * @param committed what commitStepKv returned for this step
 */
export function applyStepResult(s: Scheduler, step: LaunchedStep, committed: { touched: Req[]; hasUnfinishedChunk: boolean }, result: RunResult, outputs: ReqTokenOutput[]): StepResult {
  const { sampled, scoreOwners, entries, numExtendTokens } = step.lowered;
  const { touched, hasUnfinishedChunk } = committed;
  result.scores.forEach((sc, i) => {
    const { req, pos } = scoreOwners[i];
    req.inputTokenLogprobs!.push([sc.logprob, req.originInputIds[pos + 1]]);
    req.inputTopLogprobs!.push(sc.topLogprobs);
  });
  result.samples.forEach((smp, i) => {
    const req = sampled[i];
    if (result.rngStates) req.rng.setState(result.rngStates[i]); // sampled on the pipeline's last stage
    s.appendSampled(req, smp.tokenId);
    if (req.returnLogprob) {
      req.outputTokenLogprobs.push([smp.logprob, smp.tokenId]);
      req.outputTopLogprobs.push(smp.topLogprobs);
    }
  });
  if (s.spec) s.spec.afterExtend(step.extends_, result.allHiddenStates, s.mem);
  // A suspect that ran a decode step alone has shown it runs: it is scheduled with the others again.
  if (step.decodes.length === 1 && step.extends_.length === 0) step.decodes[0].isolate = false;
  const numFinished = settle(s, touched, outputs);
  const stats = s.recordStepStats(step.batch.forwardMode, entries.length, step.extends_.length, step.decodes.length, numExtendTokens,
    step.numCachedTokens, hasUnfinishedChunk, step.numRetracted, numFinished, step.numRunningBefore);
  return { stats, outputs };
}

/** Finished requests release their KV (to the prefix cache); the others (re)join the running batch. @returns finished count */
export function settle(s: Scheduler, touched: readonly Req[], outputs: ReqTokenOutput[]): number {
  let numFinished = 0;
  for (const req of touched) {
    if (req.isFinished) {
      numFinished++;
      const ri = s.running.indexOf(req);
      if (ri >= 0) s.running.splice(ri, 1);
      s.live.delete(req.rid);
      if (req.grammar) s.grammar?.close(req.rid);
      s.prefillFinished?.(req);
      s.mem.releaseFinished(req);
    } else if (!s.running.includes(req)) {
      s.running.push(req);
    }
    outputs.push(req.takeOutput());
  }
  return numFinished;
}

// The scheduler's configuration slice and what a step reports (StepStats / StepResult / StepFailure), plus the
// request checks done at admission. Plain data: the engine logs and meters from these.
import { InvalidRequestError, pyListRepr } from '../common/index.js';
import type { ForwardMode } from '../layers/index.js';
import type { ReqTokenOutput } from './io.js';
import type { SchedulePolicy } from './schedule_policy.js';

/** The scheduler's configuration slice. */
export interface SchedulerConfig {
  readonly pageSize: number;
  readonly maxRunningRequests: number;
  readonly maxPrefillTokens: number;
  /** null = chunked prefill disabled. */
  readonly chunkedPrefillSize: number | null;
  readonly schedulePolicy: SchedulePolicy;
  readonly scheduleConservativeness: number;
  readonly enableMixedChunk: boolean;
  readonly contextLength: number;
  /** KV pool token capacity. */
  readonly maxTotalNumTokens: number;
  readonly eosTokenIds: readonly number[];
  /** Keep every StepStats in `statsHistory` (tests). */
  readonly recordStats?: boolean;
  /**
   * Pipeline parallelism (a pipelined runner): requests per micro-batch, SGLang --pp-max-micro-batch-size (default
   * max(max_running_requests // pp_size, 1), set by the engine).
   */
  readonly ppMaxMicroBatchSize?: number;
}

/** What one step did (asserted by tests; feeds metrics). */
export interface StepStats {
  readonly step: number;
  readonly forwardMode: ForwardMode;
  /** Requests in the forward. */
  readonly numReqs: number;
  readonly numExtendReqs: number;
  readonly numDecodeReqs: number;
  /** Token rows of extend entries. */
  readonly numExtendTokens: number;
  /** Prefix-cache hits (tokens) of requests admitted this step. */
  readonly numCachedTokens: number;
  /** True when a prefill chunk ran that is not its request's last. */
  readonly hasUnfinishedChunk: boolean;
  /** Requests retracted this step. */
  readonly numRetracted: number;
  readonly numFinished: number;
  /** Running (decode) requests before the step. */
  readonly numRunningBefore: number;
  /** Running (decode) requests after the step. */
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly availableTokens: number;
  readonly evictableTokens: number;
  readonly newTokenRatio: number;
}

/** A step that threw, and what the scheduler did about it (see Scheduler.step). */
export interface StepFailure {
  /** What the step threw. */
  readonly error: Error;
  /** Requests finished with an abort because of it (their outputs are in StepResult.outputs). */
  readonly failedRids: readonly string[];
  /** Requests of the failed batch put back in the waiting queue, to be run alone. */
  readonly retriedRids: readonly string[];
}

/** Result of one step. */
export interface StepResult {
  /** null when there was nothing to run (or the step failed). */
  readonly stats: StepStats | null;
  /** Token outputs (also those of aborts since the last step). */
  readonly outputs: ReqTokenOutput[];
  /** Set when the step threw; the scheduler has recovered (every request is running, queued or finished). */
  readonly failure?: StepFailure;
  /** Pipeline parallelism: a micro-batch was launched (its result comes with a later step). */
  readonly launched?: boolean;
}

/**
 * SGLang's check that a prompt's ids lie inside the model's vocabulary (tokenizer_manager.py
 * `_validate_input_ids_in_vocab`, same message; the list is printed as Python prints it).
 * @throws InvalidRequestError when an id is ≥ vocabSize
 */
export function validateInputIdsInVocab(ids: readonly number[], vocabSize: number): void {
  for (const id of ids) {
    if (id >= vocabSize) {
      throw new InvalidRequestError(`The input_ids ${pyListRepr(ids)} contains values greater than the vocab size (${vocabSize}).`, null);
    }
  }
}

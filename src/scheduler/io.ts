// Plain-data messages in and out of the scheduler (SGLang io_struct.py TokenizedGenerateReqInput /
// BatchTokenIDOutput). Structured-clonable: they cross the worker-thread boundary unchanged.
import type { SamplingParams } from '../sampling/index.js';

/** Finish reason (SGLang meta_info.finish_reason JSON form). */
export type FinishReasonData =
  | { readonly type: 'stop'; readonly matched: number | string }
  | { readonly type: 'length'; readonly length: number }
  | { readonly type: 'abort'; readonly message: string; readonly statusCode?: number; readonly errType?: string };

/** Where a PD request's prefill server is, and its room (the router's bootstrap_host / _port / _room). */
export interface BootstrapInfo {
  readonly host: string;
  /** null when the router was given `none` (no bootstrap server). */
  readonly port: number | null;
  readonly room: number;
}

/** A tokenized, validated request for the scheduler (one choice). */
export interface TokenizedReq {
  readonly rid: string;
  readonly inputIds: readonly number[];
  readonly params: SamplingParams;
  /** Seed of this request's RNG (params.seed or one derived from --random-seed). */
  readonly rngSeed: number;
  readonly returnLogprob: boolean;
  /** First prompt position whose logprob is returned, or −1. */
  readonly logprobStartLen: number;
  readonly topLogprobsNum: number;
  /** Stream outputs (else only the final output is needed downstream). */
  readonly stream: boolean;
  /** Arrival time, ms (metrics only). */
  readonly arrivalMs: number;
  /**
   * The grammar constraint starts after the reasoning section (a reasoning parser is on and the request thinks):
   * tokens up to the think-end token are free (SGLang require_reasoning).
   */
  readonly requireReasoning?: boolean;
  /** PD disaggregation: this choice's prefill server and room (absent outside PD). */
  readonly bootstrap?: BootstrapInfo;
  /** --dp-size > 1: the DP rank asked for (data_parallel_rank); the DP controller's load balancer picks otherwise. */
  readonly dataParallelRank?: number;
}

/** Tokens and state one request produced in one step (SGLang BatchTokenIDOutput, one row). */
export interface ReqTokenOutput {
  readonly rid: string;
  /** Token ids appended this step (0 or more). */
  readonly newIds: number[];
  readonly finishReason: FinishReasonData | null;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
  readonly numRetractions: number;
  /** Speculative decoding counters (present when it is on): verify steps, accepted drafts, tokens per verify. */
  readonly spec?: { readonly verifyCt: number; readonly acceptedTokens: number; readonly numDraftTokens: number };
  /** Per new id: [logprob, id] (when returnLogprob). */
  readonly outputTokenLogprobs?: [number, number][];
  readonly outputTopLogprobs?: [number, number][][];
  /** Prompt logprobs, on the first output that has them. */
  readonly inputTokenLogprobs?: [number | null, number][];
  readonly inputTopLogprobs?: ([number, number][] | null)[];
}

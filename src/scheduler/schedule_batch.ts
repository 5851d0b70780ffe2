// ScheduleBatch: the scheduler-side view of one step — which requests extend by how many tokens (with their freshly
// allocated locs) and which decode (SGLang managers/schedule_batch.py ScheduleBatch). Lowered to a ForwardBatch by
// forward_batch_builder.ts.
import type { Req } from './req.js';

/** One request's extend (prefill chunk) in this step. */
export interface ExtendItem {
  readonly req: Req;
  /** Tokens computed this step, starting at req.kvCommittedLen. */
  readonly n: number;
  /** [n] i32 KV locs they are written to. */
  readonly locs: Int32Array;
  /** Prompt positions p (logits predict prompt token p + 1) scored this step for prompt logprobs. */
  readonly scorePositions: number[];
}

/** The requests of one step: extends first, then decodes (mixed when both are present). */
export interface ScheduleBatch {
  readonly extendItems: readonly ExtendItem[];
  readonly decodeReqs: readonly Req[];
  /** Prefix-cache hits (tokens) of the requests admitted for this batch. */
  readonly numCachedTokens: number;
}

// ScheduleBatch: the scheduler-side view of one step — which requests extend by how many tokens (with their freshly
// allocated locs) and which decode (SGLang managers/schedule_batch.py ScheduleBatch). lowerScheduleBatch turns it
// into per-request BatchEntry rows plus the sample / score row requests (SGLang get_model_worker_batch);
// forward_batch_builder.ts packs those into the ForwardBatch.
import type { SampleRowRequest, ScoreRowRequest } from '../executor/index.js';
import type { BatchEntry } from './forward_batch_builder.js';
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

/** A step lowered for the model runner: batch entries, and which logits rows are sampled or scored for whom. */
export interface LoweredBatch {
  /** Extend entries (in ExtendItem order), then one decode entry per decode request. */
  readonly entries: BatchEntry[];
  /** Rows sampled for a next token: the last row of each completing extend with maxNewTokens > 0, each decode row. */
  readonly sample: SampleRowRequest[];
  /** Rows scored for prompt logprobs (the known next prompt token). */
  readonly score: ScoreRowRequest[];
  /** Owner of each `sample` row, same order. */
  readonly sampled: Req[];
  /** Owner and prompt position of each `score` row, same order. */
  readonly scoreOwners: { req: Req; pos: number }[];
  /** Token rows of the extend entries. */
  readonly numExtendTokens: number;
}

/**
 * Lowers one step to BatchEntry rows. Logits rows are numbered in entry order; within an extend entry the score
 * positions come first (ascending), then the sampled last position when the entry completes its request's fill
 * and the request generates at all (maxNewTokens > 0). Reads request state only (no mutation).
 * @param extendItems this step's extends, each starting at req.kvCommittedLen
 * @param decodeReqs this step's decodes (one token each: the last output id)
 * @param decodeLocs [decodeReqs.length] of [1] i32 KV locs allocated for the decode tokens
 */
export function lowerScheduleBatch(extendItems: readonly ExtendItem[], decodeReqs: readonly Req[], decodeLocs: readonly Int32Array[]): LoweredBatch {
  const entries: BatchEntry[] = [];
  const sample: SampleRowRequest[] = [];
  const score: ScoreRowRequest[] = [];
  const sampled: Req[] = [];
  const scoreOwners: { req: Req; pos: number }[] = [];
  let numExtendTokens = 0;
  let logitIdx = 0;
  for (const it of extendItems) {
    const { req, n } = it;
    const fill = req.fillIds();
    const start = req.kvCommittedLen;
    const completes = start + n === fill.length;
    const offsets: number[] = [];
    for (const p of it.scorePositions) {
      offsets.push(p - start);
      score.push({ logitIdx: logitIdx++, tokenId: fill[p + 1], topLogprobsNum: req.topLogprobsNum });
      scoreOwners.push({ req, pos: p });
    }
    if (completes && req.maxNewTokens > 0) {
      offsets.push(n - 1);
      sample.push({ logitIdx: logitIdx++, info: req.samplingInfo() });
      sampled.push(req);
    }
    entries.push({ reqPoolIdx: req.reqPoolIdx, prefixLen: start, inputIds: fill.slice(start, start + n), outCacheLoc: it.locs, isDecode: false, logitOffsets: offsets });
    numExtendTokens += n;
  }
  decodeReqs.forEach((req, i) => {
    entries.push({ reqPoolIdx: req.reqPoolIdx, prefixLen: req.kvCommittedLen, inputIds: [req.outputIds[req.outputIds.length - 1]], outCacheLoc: decodeLocs[i], isDecode: true, logitOffsets: [0] });
    sample.push({ logitIdx: logitIdx++, info: req.samplingInfo() });
    sampled.push(req);
  });
  return { entries, sample, score, sampled, scoreOwners, numExtendTokens };
}

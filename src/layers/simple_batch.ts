// SimpleBatchContext: builds ForwardBatches for a fixed set of sequences without a scheduler — its own reqToToken
// table and a bump allocator of locs. For tools (cli logits), tests and model bring-up; the engine's scheduler
// (scheduler/forward_batch_builder.ts) builds the real ones.
import { assert } from '../common/index.js';
import type { KVPool } from '../mem_cache/index.js';
import type { ForwardBatch, ForwardMode } from './forward_batch.js';

/** Tokens appended to one request in a batch. */
export interface SeqChunk {
  /** Request row from `addReq()`. */
  readonly req: number;
  /** Token ids appended (≥ 1). */
  readonly inputIds: ArrayLike<number>;
}

/** Options of makeBatch. */
export interface MakeBatchOptions {
  /** Which rows get logits: the last token of each chunk (default), or every token. */
  readonly logits?: 'last' | 'all';
  readonly captureHiddenStates?: boolean;
  readonly captureRoutedExperts?: boolean;
}

/**
 * Holds `maxReqs` request rows of up to `maxSeqLen` tokens over a KVPool. Locs are handed out by `allocate`
 * (default: sequential from 1; loc 0 is the padding slot), never freed.
 */
export class SimpleBatchContext {
  /** [maxReqs, maxSeqLen] i32 req row × position → loc. */
  readonly reqToToken: Int32Array;
  private readonly seqLens: number[] = [];
  private nextLoc = 1;

  /**
   * @param allocate optional loc allocator (e.g. shuffled locs in tests); must return `n` distinct unused locs ≥ 1
   */
  constructor(
    readonly kvPool: KVPool,
    readonly maxReqs: number,
    readonly maxSeqLen: number,
    private readonly allocate?: (n: number) => Int32Array,
  ) {
    this.reqToToken = new Int32Array(maxReqs * maxSeqLen);
  }

  /** Starts a new empty request. @returns its req row @throws InternalError when all rows are used */
  addReq(): number {
    assert(this.seqLens.length < this.maxReqs, `SimpleBatchContext: more than ${this.maxReqs} reqs`);
    this.seqLens.push(0);
    return this.seqLens.length - 1;
  }

  /** Tokens cached so far for `req`. */
  seqLen(req: number): number {
    return this.seqLens[req];
  }

  /**
   * Builds the ForwardBatch appending each chunk to its request (in chunk order), allocating locs for the new tokens
   * and recording them in reqToToken. Mode: 'decode' if every chunk is one token on a non-empty prefix, 'extend' if
   * none is, else 'mixed'. Advances the sequence lengths (the caller must run the forward).
   * @throws InternalError for an empty chunk, a repeated req, or overflow of maxSeqLen / pool capacity
   */
  makeBatch(chunks: readonly SeqChunk[], options: MakeBatchOptions = {}): ForwardBatch {
    const numReqs = chunks.length;
    const numTokens = chunks.reduce((s, c) => s + c.inputIds.length, 0);
    const inputIds = new Int32Array(numTokens);
    const positions = new Int32Array(numTokens);
    const outCacheLoc = this.allocate ? this.allocate(numTokens) : this.bump(numTokens);
    const extendPrefixLens = new Int32Array(numReqs);
    const extendSeqLens = new Int32Array(numReqs);
    const seqLens = new Int32Array(numReqs);
    const extendStartLoc = new Int32Array(numReqs);
    const reqPoolIndices = new Int32Array(numReqs);
    const logitRows: number[] = [];
    const seen = new Set<number>();
    let row = 0;
    let numDecodeLike = 0;
    for (let i = 0; i < numReqs; i++) {
      const { req, inputIds: ids } = chunks[i];
      assert(req >= 0 && req < this.seqLens.length && !seen.has(req), () => `SimpleBatchContext: bad or repeated req ${req}`);
      assert(ids.length > 0, 'SimpleBatchContext: empty chunk');
      seen.add(req);
      const prefix = this.seqLens[req];
      assert(prefix + ids.length <= this.maxSeqLen, () => `SimpleBatchContext: req ${req} exceeds ${this.maxSeqLen} tokens`);
      if (ids.length === 1 && prefix > 0) numDecodeLike++;
      extendPrefixLens[i] = prefix;
      extendSeqLens[i] = ids.length;
      seqLens[i] = prefix + ids.length;
      extendStartLoc[i] = row;
      reqPoolIndices[i] = req;
      for (let j = 0; j < ids.length; j++) {
        inputIds[row + j] = ids[j];
        positions[row + j] = prefix + j;
        this.reqToToken[req * this.maxSeqLen + prefix + j] = outCacheLoc[row + j];
        if (options.logits === 'all') logitRows.push(row + j);
      }
      if (options.logits !== 'all') logitRows.push(row + ids.length - 1);
      this.seqLens[req] = prefix + ids.length;
      row += ids.length;
    }
    const forwardMode: ForwardMode = numReqs === 0 ? 'idle' : numDecodeLike === numReqs ? 'decode' : numDecodeLike === 0 ? 'extend' : 'mixed';
    return {
      forwardMode, numReqs, numTokens, inputIds, positions, outCacheLoc,
      extendPrefixLens, extendSeqLens, seqLens, extendStartLoc, reqPoolIndices,
      reqToToken: this.reqToToken, reqToTokenStride: this.maxSeqLen,
      logitRows: Int32Array.from(logitRows),
      captureHiddenStates: options.captureHiddenStates,
      captureRoutedExperts: options.captureRoutedExperts,
      kvPool: this.kvPool,
    };
  }

  private bump(n: number): Int32Array {
    const locs = new Int32Array(n);
    for (let i = 0; i < n; i++) locs[i] = this.nextLoc++;
    assert(this.nextLoc <= this.kvPool.maxLocs, () => `SimpleBatchContext: KV pool of ${this.kvPool.maxLocs} locs exhausted`);
    return locs;
  }
}

// A random paged-attention batch for kernel tests (native vs reference): requests with cached prefixes and new rows,
// their KV slots shuffled over the pool so no kernel can rely on contiguous locations.
import type { Rng } from '../../src/common/index.js';
import type { AttentionBatch } from '../../src/kernels/index.js';

/**
 * A batch of requests with shuffled KV locations: request i has prefix[i] cached tokens and ext[i] new rows; its
 * req→token row (row i+1 of the table; row 0 unused) holds prefix[i] + ext[i] distinct slots from 1..numLocs-1.
 * @param padding extra table columns beyond the longest request (so kernels must honour reqToTokenStride)
 * @returns the batch and its number of new tokens (Σ ext)
 */
export function randomAttentionBatch(rng: Rng, prefix: number[], ext: number[], numLocs: number, padding = 1): { batch: AttentionBatch; numTokens: number } {
  const stride = Math.max(...prefix.map((p, i) => p + ext[i])) + padding;
  const free = Array.from({ length: numLocs - 1 }, (_, i) => i + 1);
  for (let i = free.length - 1; i > 0; i--) {
    const j = Math.floor(rng.nextFloat() * (i + 1));
    [free[i], free[j]] = [free[j], free[i]];
  }
  const table = new Int32Array((prefix.length + 1) * stride);
  const start: number[] = [];
  let t = 0;
  prefix.forEach((p, i) => {
    for (let s = 0; s < p + ext[i]; s++) table[(i + 1) * stride + s] = free.pop()!;
    start.push(t);
    t += ext[i];
  });
  return {
    numTokens: t,
    batch: {
      numReqs: prefix.length, extendStartLoc: Int32Array.from(start), extendSeqLens: Int32Array.from(ext), extendPrefixLens: Int32Array.from(prefix),
      reqPoolIndices: Int32Array.from(prefix, (_, i) => i + 1), reqToToken: table, reqToTokenStride: stride,
    },
  };
}

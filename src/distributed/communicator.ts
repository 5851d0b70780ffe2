// The collective-communication seam of the parallel layouts (SGLang distributed/parallel_state.py GroupCoordinator:
// all_reduce, all_gather, reduce_scatter, broadcast, barrier, all_to_all). Implementations:
// - in one process (ranks are worker threads): shared memory, in the native addon (SGLang's CPU backend uses
//   sgl_kernel.shm_allreduce the same way), with a plain-TypeScript SharedArrayBuffer + Atomics fallback;
// - across processes and nodes: Gloo (Debian libgloo-dev) in an optional part of the addon.
// Every call is synchronous and collective: every rank of the group calls it with the same sizes, in the same order.
// The rank threads are dedicated to the model, so blocking them is what we want; never call these on the HTTP thread.

/** A typed array a collective may move (element type fixed per call; every rank passes the same type and length). */
export type CommBuffer = Float32Array | Int32Array | Uint8Array;

/**
 * One process group: `size` ranks numbered 0..size-1 (SGLang's group-local rank).
 *
 * Numerical contract: sums are computed in one fixed order (rank 0 + rank 1 + … + rank size-1, f32), so every rank of
 * the group receives the same bits and a run is reproducible whatever the thread timing.
 *
 * Faults: a rank that does not arrive within the group's timeout (`--dist-timeout`) makes the call throw
 * DistributedError naming the group and the ranks that were missing; the group is unusable afterwards.
 */
export interface Communicator {
  /** This rank's index in the group, 0 ≤ rank < size. */
  readonly rank: number;
  /** Ranks in the group (≥ 1). */
  readonly size: number;
  /** A short name for messages and metrics ("tp", "ep", "world", "attn_tp", …). */
  readonly name: string;

  /**
   * In-place sum over the group: afterwards buf[i] = Σ_r buf_r[i] on every rank, summed in rank order.
   * @param buf [n] f32, the same n on every rank
   * @throws DistributedError on timeout or a dead peer
   */
  allReduceSum(buf: Float32Array): void;

  /**
   * Concatenates every rank's `src` in rank order: dst[r·n .. (r+1)·n) = src_r.
   * @param src [n], the same n and type on every rank
   * @param dst [size·n] of src's type; must not alias src
   * @throws DistributedError on timeout or a dead peer
   */
  allGather(src: CommBuffer, dst: CommBuffer): void;

  /**
   * Sum over the group, each rank keeping its slice: dst = (Σ_r src_r)[rank·m .. (rank+1)·m), summed in rank order.
   * @param src [size·m] f32
   * @param dst [m] f32; must not alias src
   * @throws DistributedError on timeout or a dead peer
   */
  reduceScatterSum(src: Float32Array, dst: Float32Array): void;

  /**
   * Copies root's `buf` into every rank's `buf` (same type and length everywhere).
   * @param timeoutMs overrides the group timeout for this call (a rank waiting for the next step uses a long one)
   * @throws DistributedError on timeout or a dead peer
   */
  broadcast(buf: CommBuffer, root: number, timeoutMs?: number): void;

  /**
   * Every rank sends src[j·n .. (j+1)·n) to rank j and receives rank j's block into dst[j·n .. (j+1)·n).
   * @param src [size·n]; dst [size·n] of the same type; must not alias
   * @throws DistributedError on timeout or a dead peer
   */
  allToAll(src: CommBuffer, dst: CommBuffer): void;

  /** Returns once every rank of the group has called it. @throws DistributedError on timeout or a dead peer */
  barrier(): void;

  /** Releases the group's resources; later calls throw. Idempotent. */
  close(): void;
}

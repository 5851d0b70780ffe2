// The prefix-cache contract (SGLang mem_cache/base_prefix_cache.py; mini-sglang kvcache/base.py): token ids → KV locs,
// with lock refs protecting what running requests use. Implementations: RadixCache (sharing), ChunkCache
// (--disable-radix-cache: no sharing). Never sees a Req: the scheduler's cache_manager.ts is the only glue.

/** A handle to a cached prefix (a tree node). Opaque to callers except for lock/unlock. */
export interface PrefixNode {
  /** Stable id for tests and debugging. */
  readonly id: number;
}

/** Result of a prefix match. */
export interface MatchResult {
  /** [prefixLen] i32 KV locs of the matched prefix (prefixLen a multiple of pageSize). Owned by the cache. */
  readonly indices: Int32Array;
  /** The node the match ends at (root when nothing matched). Lock it while the locs are in use. */
  readonly lastNode: PrefixNode;
}

/** Result of caching a request that is still running (chunked prefill). */
export interface CacheUnfinishedResult {
  /** [protectedLen] i32 canonical KV locs for the request's first protectedLen tokens (rewrite its row with them). */
  readonly indices: Int32Array;
  /** The new locked node (the old one has been unlocked). */
  readonly lastNode: PrefixNode;
  /** Tokens now owned by the cache on the request's behalf (its positions [0, protectedLen) are shared). */
  readonly protectedLen: number;
}

/**
 * Prefix cache contract.
 * - Locs returned by `matchPrefix` stay valid only while their node is locked (`incLockRef`); eviction never takes a
 *   locked node or its ancestors.
 * - `cacheFinished` / `cacheUnfinished` take ownership of the request's locs: locs duplicated by the tree and the
 *   unaligned tail (finished) are freed to the allocator; the rest belongs to the tree.
 * - Sizes count tokens. evictableSize + protectedSize = tokens held by the tree.
 */
export interface BasePrefixCache {
  /** Tokens per page; matches and inserts are page-aligned. */
  readonly pageSize: number;
  /** True for ChunkCache (nothing is ever shared). */
  readonly isDisabled: boolean;
  /** The root node (lastNode of an empty match). */
  readonly root: PrefixNode;

  /**
   * Longest cached prefix of `key`, truncated to a multiple of pageSize. Mutates: may split a node, refreshes
   * access times along the path. Empty key → empty result at root.
   * @param key [n] token ids
   */
  matchPrefix(key: ArrayLike<number>): MatchResult;

  /**
   * Inserts key → value (truncated to a multiple of pageSize). Returns how many leading tokens were already present;
   * the caller owns (and must free) its value locs for those positions.
   * @param key [n] token ids
   * @param value [n] i32 KV locs
   */
  insert(key: ArrayLike<number>, value: ArrayLike<number>): number;

  /**
   * Caches a finished request: inserts its page-aligned tokens, frees locs the tree already had (positions
   * [protectedLen, prefixLen)) and the unaligned tail, then unlocks `lastNode`. ChunkCache frees all locs.
   * @param tokens [kvLen] token ids whose KV is computed
   * @param locs [kvLen] i32 their KV locs (the request's row)
   * @param protectedLen leading tokens already owned by the tree on the request's behalf
   */
  cacheFinished(tokens: ArrayLike<number>, locs: Int32Array, protectedLen: number, lastNode: PrefixNode): void;

  /**
   * Caches a still-running request (between prefill chunks): inserts its page-aligned tokens, frees duplicates,
   * moves the lock from `lastNode` to the new last node. The unaligned tail stays the request's own.
   */
  cacheUnfinished(tokens: ArrayLike<number>, locs: Int32Array, protectedLen: number, lastNode: PrefixNode): CacheUnfinishedResult;

  /** Locks the path root→node. @returns change in evictableSize (≤ 0) */
  incLockRef(node: PrefixNode): number;
  /** Unlocks the path root→node. @returns change in evictableSize (≥ 0) @throws InternalError on unbalanced unlock */
  decLockRef(node: PrefixNode): number;

  /**
   * Evicts unlocked leaves, least recently used first, freeing their locs, until ≥ numTokens are freed or nothing is
   * evictable. @returns tokens freed
   */
  evict(numTokens: number): number;

  /** Tokens in unlocked nodes. */
  evictableSize(): number;
  /** Tokens in locked nodes. */
  protectedSize(): number;

  /** Drops the whole tree, freeing its locs (/flush_cache; only with no running requests). */
  reset(): void;
}

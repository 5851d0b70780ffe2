// ChunkCache: the prefix cache for --disable-radix-cache (SGLang mem_cache/chunk_cache.py). Shares nothing; a
// request keeps its own locs until it finishes, and then all of them are freed.
import type { TokenToKVPoolAllocator } from './allocator.js';
import type { BasePrefixCache, CacheUnfinishedResult, MatchResult, PrefixNode } from './base_prefix_cache.js';

const ROOT: PrefixNode = { id: 0 };
const EMPTY = new Int32Array(0);

/** A prefix cache that never matches; see BasePrefixCache for the contract. */
export class ChunkCache implements BasePrefixCache {
  readonly pageSize: number;
  readonly isDisabled = true;
  readonly root: PrefixNode = ROOT;
  private readonly allocator: TokenToKVPoolAllocator;

  /** @param allocator where a finished request's locs go back */
  constructor(allocator: TokenToKVPoolAllocator) {
    this.allocator = allocator;
    this.pageSize = allocator.pageSize;
  }

  /** Always empty. */
  matchPrefix(_key: ArrayLike<number>): MatchResult {
    return { indices: EMPTY, lastNode: ROOT };
  }

  /** Stores nothing; returns 0 (the caller keeps ownership of every loc). */
  insert(_key: ArrayLike<number>, _value: ArrayLike<number>): number {
    return 0;
  }

  /** Frees every loc of the request. */
  cacheFinished(_tokens: ArrayLike<number>, locs: Int32Array, _protectedLen: number, _lastNode: PrefixNode): void {
    this.allocator.free(locs);
  }

  /** Keeps everything with the request (its row is unchanged). */
  cacheUnfinished(_tokens: ArrayLike<number>, _locs: Int32Array, _protectedLen: number, _lastNode: PrefixNode): CacheUnfinishedResult {
    return { indices: EMPTY, lastNode: ROOT, protectedLen: 0 };
  }

  incLockRef(_node: PrefixNode): number {
    return 0;
  }
  decLockRef(_node: PrefixNode): number {
    return 0;
  }
  evict(_numTokens: number): number {
    return 0;
  }
  evictableSize(): number {
    return 0;
  }
  protectedSize(): number {
    return 0;
  }
  reset(): void {}
}

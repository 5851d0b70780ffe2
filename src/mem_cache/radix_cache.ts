// RadixCache: radix tree from token ids to KV locs with lock refs and LRU eviction (SGLang mem_cache/radix_cache.py,
// RadixAttention; mini-sglang kvcache/radix_cache.py). Page-aligned: only whole pages are shared. Never sees a Req.
//
// Invariants: root has an empty key and is never evicted; a node's key and value have equal length, a multiple of
// pageSize; children are keyed by their first page; a node with lockRef > 0 has every ancestor locked too.
import { assert } from '../common/index.js';
import type { TokenToKVPoolAllocator } from './allocator.js';
import type { BasePrefixCache, CacheUnfinishedResult, MatchResult, PrefixNode } from './base_prefix_cache.js';

/** One radix-tree node. */
export class TreeNode implements PrefixNode {
  readonly id: number;
  parent: TreeNode | null;
  readonly children = new Map<number | string, TreeNode>();
  /** [len] token ids of this edge. */
  key: Int32Array;
  /** [len] i32 KV locs of those tokens. */
  value: Int32Array;
  lockRef = 0;
  /** Logical access time (a counter, not the wall clock: eviction order is deterministic). */
  lastAccessTime = 0;
  hitCount = 0;

  constructor(id: number, parent: TreeNode | null, key: Int32Array, value: Int32Array) {
    this.id = id;
    this.parent = parent;
    this.key = key;
    this.value = value;
  }
}

function concat(parts: Int32Array[]): Int32Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Int32Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Radix prefix cache; see BasePrefixCache for the contract. */
export class RadixCache implements BasePrefixCache {
  readonly pageSize: number;
  readonly isDisabled = false;
  readonly root: TreeNode;
  private readonly allocator: TokenToKVPoolAllocator;
  private nextId = 1;
  private clock = 0;
  private evictable = 0;
  private protectedTokens = 0;

  /** @param allocator receives the locs of evicted and duplicate tokens */
  constructor(allocator: TokenToKVPoolAllocator) {
    this.allocator = allocator;
    this.pageSize = allocator.pageSize;
    this.root = this.newRoot();
  }

  private newRoot(): TreeNode {
    const r = new TreeNode(0, null, new Int32Array(0), new Int32Array(0));
    r.lockRef = 1;
    return r;
  }

  private childKey(key: ArrayLike<number>, pos: number): number | string {
    if (this.pageSize === 1) return key[pos];
    let s = '';
    for (let i = 0; i < this.pageSize; i++) s += (i ? ',' : '') + key[pos + i];
    return s;
  }

  /** Length (multiple of pageSize) of the common prefix of node.key and key[pos:end]. */
  private matchLen(nodeKey: Int32Array, key: ArrayLike<number>, pos: number, end: number): number {
    const P = this.pageSize;
    const max = Math.min(nodeKey.length, end - pos);
    let i = 0;
    while (i + P <= max) {
      let same = true;
      for (let j = 0; j < P; j++) {
        if (nodeKey[i + j] !== key[pos + i + j]) {
          same = false;
          break;
        }
      }
      if (!same) break;
      i += P;
    }
    return i;
  }

  /** Splits `child` after `len` tokens; returns the new upper node (inherits lockRef, as SGLang). */
  private split(child: TreeNode, len: number): TreeNode {
    const parent = child.parent!;
    const upper = new TreeNode(this.nextId++, parent, child.key.subarray(0, len), child.value.subarray(0, len));
    upper.lockRef = child.lockRef;
    upper.lastAccessTime = child.lastAccessTime;
    parent.children.set(this.childKey(upper.key, 0), upper);
    child.key = child.key.subarray(len);
    child.value = child.value.subarray(len);
    child.parent = upper;
    upper.children.set(this.childKey(child.key, 0), child);
    return upper;
  }

  matchPrefix(key: ArrayLike<number>): MatchResult {
    const P = this.pageSize;
    const end = Math.floor(key.length / P) * P;
    const tick = ++this.clock;
    const parts: Int32Array[] = [];
    let node = this.root;
    node.lastAccessTime = tick;
    let pos = 0;
    while (pos < end) {
      const child = node.children.get(this.childKey(key, pos));
      if (!child) break;
      child.lastAccessTime = tick;
      const m = this.matchLen(child.key, key, pos, end);
      if (m === 0) break;
      if (m < child.key.length) {
        const upper = this.split(child, m);
        parts.push(upper.value);
        node = upper;
        break;
      }
      parts.push(child.value);
      node = child;
      pos += m;
    }
    return { indices: concat(parts), lastNode: node };
  }

  insert(key: ArrayLike<number>, value: ArrayLike<number>): number {
    const P = this.pageSize;
    assert(value.length >= Math.floor(key.length / P) * P, 'RadixCache.insert: value shorter than key');
    const end = Math.floor(key.length / P) * P;
    const tick = ++this.clock;
    let node = this.root;
    let pos = 0;
    while (pos < end) {
      const child = node.children.get(this.childKey(key, pos));
      if (!child) {
        const leaf = new TreeNode(
          this.nextId++,
          node,
          Int32Array.from({ length: end - pos }, (_, i) => key[pos + i]),
          Int32Array.from({ length: end - pos }, (_, i) => value[pos + i]),
        );
        leaf.lastAccessTime = tick;
        node.children.set(this.childKey(leaf.key, 0), leaf);
        this.evictable += leaf.key.length;
        return pos;
      }
      child.lastAccessTime = tick;
      const m = this.matchLen(child.key, key, pos, end);
      pos += m;
      node = m < child.key.length ? this.split(child, m) : child;
    }
    return pos;
  }

  cacheFinished(tokens: ArrayLike<number>, locs: Int32Array, protectedLen: number, lastNode: PrefixNode): void {
    const n = Math.min(tokens.length, locs.length);
    const aligned = Math.floor(n / this.pageSize) * this.pageSize;
    const prefixLen = this.insert(tokens, locs.subarray(0, aligned));
    if (prefixLen > protectedLen) this.allocator.free(locs.subarray(protectedLen, prefixLen));
    if (n > aligned) this.allocator.free(locs.subarray(aligned, n));
    this.decLockRef(lastNode);
  }

  cacheUnfinished(tokens: ArrayLike<number>, locs: Int32Array, protectedLen: number, lastNode: PrefixNode): CacheUnfinishedResult {
    const n = Math.min(tokens.length, locs.length);
    const aligned = Math.floor(n / this.pageSize) * this.pageSize;
    const key = Array.prototype.slice.call(tokens, 0, aligned) as number[];
    const prefixLen = this.insert(key, locs.subarray(0, aligned));
    if (prefixLen > protectedLen) this.allocator.free(locs.subarray(protectedLen, prefixLen));
    const m = this.matchPrefix(key);
    assert(m.indices.length === aligned, 'RadixCache.cacheUnfinished: re-match shorter than insert');
    this.incLockRef(m.lastNode);
    this.decLockRef(lastNode);
    return { indices: m.indices, lastNode: m.lastNode, protectedLen: aligned };
  }

  incLockRef(handle: PrefixNode): number {
    let node = handle as TreeNode;
    let delta = 0;
    while (node !== this.root) {
      if (node.lockRef === 0) {
        this.evictable -= node.key.length;
        this.protectedTokens += node.key.length;
        delta -= node.key.length;
      }
      node.lockRef++;
      node = node.parent!;
    }
    return delta;
  }

  decLockRef(handle: PrefixNode): number {
    let node = handle as TreeNode;
    let delta = 0;
    while (node !== this.root) {
      assert(node.lockRef > 0, () => `RadixCache: unbalanced unlock of node ${node.id}`);
      if (node.lockRef === 1) {
        this.evictable += node.key.length;
        this.protectedTokens -= node.key.length;
        delta += node.key.length;
      }
      node.lockRef--;
      node = node.parent!;
    }
    return delta;
  }

  evict(numTokens: number): number {
    if (numTokens <= 0) return 0;
    // Evictable leaves, oldest first (a binary heap keyed by lastAccessTime, ties by id).
    const heap: TreeNode[] = [];
    const less = (a: TreeNode, b: TreeNode): boolean =>
      a.lastAccessTime < b.lastAccessTime || (a.lastAccessTime === b.lastAccessTime && a.id < b.id);
    const push = (n: TreeNode): void => {
      heap.push(n);
      let i = heap.length - 1;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (!less(heap[i], heap[p])) break;
        [heap[i], heap[p]] = [heap[p], heap[i]];
        i = p;
      }
    };
    const pop = (): TreeNode => {
      const top = heap[0];
      const last = heap.pop()!;
      if (heap.length > 0) {
        heap[0] = last;
        let i = 0;
        for (;;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < heap.length && less(heap[l], heap[m])) m = l;
          if (r < heap.length && less(heap[r], heap[m])) m = r;
          if (m === i) break;
          [heap[i], heap[m]] = [heap[m], heap[i]];
          i = m;
        }
      }
      return top;
    };
    const stack: TreeNode[] = [this.root];
    while (stack.length) {
      const n = stack.pop()!;
      if (n !== this.root && n.children.size === 0 && n.lockRef === 0) push(n);
      for (const c of n.children.values()) stack.push(c);
    }
    let freed = 0;
    while (freed < numTokens && heap.length > 0) {
      const leaf = pop();
      this.allocator.free(leaf.value);
      freed += leaf.key.length;
      this.evictable -= leaf.key.length;
      const parent = leaf.parent!;
      parent.children.delete(this.childKey(leaf.key, 0));
      leaf.parent = null;
      if (parent !== this.root && parent.children.size === 0 && parent.lockRef === 0) push(parent);
    }
    return freed;
  }

  evictableSize(): number {
    return this.evictable;
  }

  protectedSize(): number {
    return this.protectedTokens;
  }

  /** Tokens held by the tree (walks it; tests). */
  totalSize(): number {
    let s = 0;
    const stack: TreeNode[] = [this.root];
    while (stack.length) {
      const n = stack.pop()!;
      s += n.key.length;
      for (const c of n.children.values()) stack.push(c);
    }
    return s;
  }

  reset(): void {
    const stack: TreeNode[] = [...this.root.children.values()];
    while (stack.length) {
      const n = stack.pop()!;
      assert(n.lockRef === 0, 'RadixCache.reset: a node is still locked (requests running)');
      this.allocator.free(n.value);
      for (const c of n.children.values()) stack.push(c);
    }
    this.root.children.clear();
    this.evictable = 0;
    this.protectedTokens = 0;
  }
}

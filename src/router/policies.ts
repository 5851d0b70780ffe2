// Load-balancing policies of the router (sgl-model-gateway src/policies/: random.rs, round_robin.rs, power_of_two.rs,
// cache_aware.rs; serving-spec.md §6.2). A policy picks one of the available workers for a request; manual.rs and
// bucket.rs are in manual_policy.ts and bucket_policy.ts.
import { BucketPolicy } from './bucket_policy.js';
import { ManualPolicy, type AssignmentMode } from './manual_policy.js';
import { ApproxRadixTree } from './radix_tree.js';
import { PREFILL_POLICY_CHOICES } from './router_flags.js';
import type { Worker } from './worker.js';

/** Policy names (--policy / --decode-policy; `bucket` is a --prefill-policy only). */
export const POLICY_NAMES = PREFILL_POLICY_CHOICES;
export type PolicyName = (typeof POLICY_NAMES)[number];

/** What a policy sees of a request. */
export interface SelectInfo {
  /** Prompt text or messages' text ('' when the request has token ids only). */
  readonly text: string;
  /** The x-smg-routing-key header, or null. */
  readonly routingKey: string | null;
}

/** What a policy decided (metrics: cache hits/misses, load-balancing events). */
export interface PolicyDecision {
  readonly worker: Worker;
  readonly cacheHit?: boolean;
  readonly balanced?: boolean;
}

/** A load-balancing policy. */
export interface LoadBalancingPolicy {
  readonly name: PolicyName;
  /**
   * Picks a worker among `workers` (already filtered to the available ones). @returns null when `workers` is empty
   */
  select(workers: readonly Worker[], info: SelectInfo): PolicyDecision | null;
  /** Forgets a worker that was removed (cache_aware: its tree entries; manual: nothing, keys fail over). */
  removeWorker?(url: string): void;
  /** Stops background work (eviction timers). */
  close?(): void;
}

/** cache_aware thresholds (--cache-threshold, --balance-*-threshold, --eviction-interval-secs, --max-tree-size). */
export interface CacheAwareConfig {
  readonly cacheThreshold: number;
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  readonly evictionIntervalSecs: number;
  readonly maxTreeSize: number;
}

/** Uniform over the given workers. */
export class RandomPolicy implements LoadBalancingPolicy {
  readonly name = 'random' as const;
  constructor(private readonly rand: () => number = Math.random) {}
  select(workers: readonly Worker[]): PolicyDecision | null {
    if (workers.length === 0) return null;
    return { worker: workers[Math.floor(this.rand() * workers.length) % workers.length] };
  }
}

/** A counter modulo the number of available workers. */
export class RoundRobinPolicy implements LoadBalancingPolicy {
  readonly name = 'round_robin' as const;
  private counter = 0;
  select(workers: readonly Worker[]): PolicyDecision | null {
    if (workers.length === 0) return null;
    return { worker: workers[this.counter++ % workers.length] };
  }
}

/**
 * Two distinct random workers; the lighter wins (ties: the first drawn). Load is the workers' own token load
 * (`/get_load` num_tokens, polled by the load monitor) when both have one, else the router's in-flight counts for
 * both (power_of_two.rs: mixed metrics are never compared).
 */
export class PowerOfTwoPolicy implements LoadBalancingPolicy {
  readonly name = 'power_of_two' as const;
  private cached = new Map<string, number>();
  constructor(private readonly rand: () => number = Math.random) {}

  /** Replaces the monitored token loads (url → tokens). */
  updateLoads(loads: ReadonlyMap<string, number>): void {
    this.cached = new Map(loads);
  }

  select(workers: readonly Worker[]): PolicyDecision | null {
    if (workers.length === 0) return null;
    if (workers.length === 1) return { worker: workers[0] };
    const i = Math.floor(this.rand() * workers.length) % workers.length;
    let j = Math.floor(this.rand() * (workers.length - 1)) % (workers.length - 1);
    if (j >= i) j++;
    const a = workers[i];
    const b = workers[j];
    const ta = this.cached.get(a.url);
    const tb = this.cached.get(b.url);
    const [la, lb] = ta !== undefined && tb !== undefined ? [ta, tb] : [a.load, b.load];
    return { worker: la <= lb ? a : b };
  }
}

/**
 * cache_aware: when the load is imbalanced (max − min > abs threshold and max > min · rel threshold) the least
 * loaded worker; otherwise the worker whose tree holds the longest prefix of the text if the match rate exceeds
 * --cache-threshold, else the worker with the smallest tree. The text is inserted under the chosen worker.
 */
export class CacheAwarePolicy implements LoadBalancingPolicy {
  readonly name = 'cache_aware' as const;
  readonly tree: ApproxRadixTree;
  private readonly timer: NodeJS.Timeout | null;

  constructor(private readonly cfg: CacheAwareConfig, now: () => number = Date.now) {
    this.tree = new ApproxRadixTree(now);
    this.timer = cfg.evictionIntervalSecs > 0 ? setInterval(() => this.tree.evictBySize(cfg.maxTreeSize), cfg.evictionIntervalSecs * 1000) : null;
    this.timer?.unref();
  }

  select(workers: readonly Worker[], info: SelectInfo): PolicyDecision | null {
    if (workers.length === 0) return null;
    const text = info.text;
    for (const w of workers) this.tree.addTenant(w.url);
    let min = Infinity;
    let max = -Infinity;
    let least = workers[0];
    for (const w of workers) {
      if (w.load < min) { min = w.load; least = w; }
      max = Math.max(max, w.load);
    }
    if (max - min > this.cfg.balanceAbsThreshold && max > min * this.cfg.balanceRelThreshold) {
      this.tree.insert(text, least.url);
      return { worker: least, balanced: true };
    }
    const byUrl = new Map(workers.map((w) => [w.url, w]));
    const m = this.tree.prefixMatch(text, new Set(byUrl.keys()));
    const chars = [...text].length;
    const rate = chars > 0 ? m.matchedChars / chars : 0;
    let worker: Worker;
    let hit = false;
    if (m.tenant !== null && rate > this.cfg.cacheThreshold) {
      worker = byUrl.get(m.tenant)!;
      hit = true;
    } else {
      worker = byUrl.get(this.tree.smallestTenant(workers.map((w) => w.url))!) ?? workers[0];
    }
    this.tree.insert(text, worker.url);
    return { worker, cacheHit: hit };
  }

  removeWorker(url: string): void {
    this.tree.removeTenant(url);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

/** Settings of every policy (the --cache-*, --balance-*, --eviction-*, --max-*, --assignment-mode, --bucket-* flags). */
export interface PolicyConfig extends CacheAwareConfig {
  readonly maxIdleSecs: number;
  readonly assignmentMode: AssignmentMode;
  readonly bucketAdjustIntervalSecs: number;
}

/** A policy by name. */
export function createPolicy(name: PolicyName, cfg: PolicyConfig): LoadBalancingPolicy {
  switch (name) {
    case 'random': return new RandomPolicy();
    case 'round_robin': return new RoundRobinPolicy();
    case 'power_of_two': return new PowerOfTwoPolicy();
    case 'cache_aware': return new CacheAwarePolicy(cfg);
    case 'manual': return new ManualPolicy({ evictionIntervalSecs: cfg.evictionIntervalSecs, maxIdleSecs: cfg.maxIdleSecs, assignmentMode: cfg.assignmentMode });
    case 'bucket': return new BucketPolicy({ balanceAbsThreshold: cfg.balanceAbsThreshold, balanceRelThreshold: cfg.balanceRelThreshold, adjustIntervalSecs: cfg.bucketAdjustIntervalSecs });
  }
}

// Load-balancing policies of the router (sgl-router src/policies/: random.rs, round_robin.rs, power_of_two.rs,
// cache_aware.rs; serving-spec.md §6.2). A policy picks one of the available workers for a request's text.
import { ApproxRadixTree } from './radix_tree.js';
import type { Worker } from './worker.js';

/** Policy names (--policy / --prefill-policy / --decode-policy). */
export const POLICY_NAMES = ['random', 'round_robin', 'cache_aware', 'power_of_two'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

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
   * Picks a worker among `workers` (already filtered to the available ones) for a request whose routing text is
   * `text` (prompt text or messages; '' when none). @returns null when `workers` is empty
   */
  select(workers: readonly Worker[], text: string): PolicyDecision | null;
  /** Stops background work (cache_aware's eviction timer). */
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

/** Two distinct random workers; the one with fewer in-flight requests wins (ties: the first drawn). */
export class PowerOfTwoPolicy implements LoadBalancingPolicy {
  readonly name = 'power_of_two' as const;
  constructor(private readonly rand: () => number = Math.random) {}
  select(workers: readonly Worker[]): PolicyDecision | null {
    if (workers.length === 0) return null;
    if (workers.length === 1) return { worker: workers[0] };
    const i = Math.floor(this.rand() * workers.length) % workers.length;
    let j = Math.floor(this.rand() * (workers.length - 1)) % (workers.length - 1);
    if (j >= i) j++;
    const a = workers[i];
    const b = workers[j];
    return { worker: b.load < a.load ? b : a };
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

  select(workers: readonly Worker[], text: string): PolicyDecision | null {
    if (workers.length === 0) return null;
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

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

/** A policy by name. */
export function createPolicy(name: PolicyName, ca: CacheAwareConfig): LoadBalancingPolicy {
  switch (name) {
    case 'random': return new RandomPolicy();
    case 'round_robin': return new RoundRobinPolicy();
    case 'power_of_two': return new PowerOfTwoPolicy();
    case 'cache_aware': return new CacheAwarePolicy(ca);
  }
}

// The `manual` policy (sgl-model-gateway src/policies/manual.rs): sticky routing by the `x-smg-routing-key` header.
// A new key gets a worker by --assignment-mode and keeps it; workers added later take no existing keys. When its
// worker is unavailable the key moves to a new one, remembering at most two candidates (the newest last) so it can
// fall back quickly. Keys unused for --max-idle-secs are forgotten (checked every --eviction-interval-secs).
// Requests without the header go to a uniformly random worker.
import type { LoadBalancingPolicy, PolicyDecision, SelectInfo } from './policies.js';
import type { Worker } from './worker.js';

/** --assignment-mode values. */
export type AssignmentMode = 'random' | 'min_load' | 'min_group';

/** Settings of the manual policy. */
export interface ManualConfig {
  readonly evictionIntervalSecs: number;
  readonly maxIdleSecs: number;
  readonly assignmentMode: AssignmentMode;
}

/** Candidate workers remembered per routing key (manual.rs MAX_CANDIDATE_WORKERS). */
const MAX_CANDIDATES = 2;

interface KeyEntry {
  /** Worker URLs, oldest first. */
  candidates: string[];
  lastAccess: number;
}

/** Branch the selection took (metrics label in SGLang: occupied_hit, occupied_miss, vacant, no_routing_id). */
export type ManualBranch = 'occupied_hit' | 'occupied_miss' | 'vacant' | 'no_routing_id';

/** Sticky routing-key policy. */
export class ManualPolicy implements LoadBalancingPolicy {
  readonly name = 'manual' as const;
  private readonly keys = new Map<string, KeyEntry>();
  private readonly timer: NodeJS.Timeout | null;
  /** The branch of the last selection (tests, logs). */
  lastBranch: ManualBranch | null = null;

  /**
   * @param rand uniform [0, 1) source (tests pass a fixed one)
   * @param now clock, ms
   */
  constructor(private readonly cfg: ManualConfig, private readonly rand: () => number = Math.random, private readonly now: () => number = Date.now) {
    this.timer = cfg.evictionIntervalSecs > 0 && cfg.maxIdleSecs > 0 ? setInterval(() => this.evictIdle(), cfg.evictionIntervalSecs * 1000) : null;
    this.timer?.unref();
  }

  /** Routing keys currently remembered. */
  get size(): number {
    return this.keys.size;
  }

  /** Forgets keys idle for --max-idle-secs or more. @returns how many were forgotten */
  evictIdle(): number {
    const cutoff = this.now() - this.cfg.maxIdleSecs * 1000;
    let n = 0;
    for (const [k, e] of this.keys) {
      if (e.lastAccess <= cutoff) {
        this.keys.delete(k);
        n++;
      }
    }
    return n;
  }

  select(workers: readonly Worker[], info: SelectInfo): PolicyDecision | null {
    if (workers.length === 0) return null;
    const key = info.routingKey;
    if (key === null || key === '') {
      this.lastBranch = 'no_routing_id';
      return { worker: this.pickRandom(workers) };
    }
    const e = this.keys.get(key);
    if (e) {
      e.lastAccess = this.now();
      for (const url of e.candidates) {
        const w = workers.find((x) => x.url === url);
        if (w) {
          this.lastBranch = 'occupied_hit';
          return { worker: w };
        }
      }
      const w = this.assign(workers);
      e.candidates.push(w.url);
      while (e.candidates.length > MAX_CANDIDATES) e.candidates.shift();
      this.lastBranch = 'occupied_miss';
      return { worker: w };
    }
    const w = this.assign(workers);
    this.keys.set(key, { candidates: [w.url], lastAccess: this.now() });
    this.lastBranch = 'vacant';
    return { worker: w };
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private pickRandom(workers: readonly Worker[]): Worker {
    return workers[Math.floor(this.rand() * workers.length) % workers.length];
  }

  /** A worker for a new key: random, fewest requests in flight, or fewest routing keys in flight (ties: random). */
  private assign(workers: readonly Worker[]): Worker {
    if (this.cfg.assignmentMode === 'random') return this.pickRandom(workers);
    const value = (w: Worker): number => (this.cfg.assignmentMode === 'min_load' ? w.load : w.routingKeys.size);
    const min = Math.min(...workers.map(value));
    return this.pickRandom(workers.filter((w) => value(w) === min));
  }
}

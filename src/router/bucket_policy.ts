// The `bucket` policy, a --prefill-policy of PD mode (sgl-model-gateway src/policies/bucket.rs): each prefill worker
// owns a range of request lengths (characters of the routing text), so similar lengths meet on the same worker.
// Ranges start as 4096 characters split evenly (the last one open-ended) and are re-cut every
// --bucket-adjust-interval-secs from the lengths seen in the last interval, so that each worker gets about the same
// number of characters. When the characters sent per worker in that window are imbalanced (max − min above
// --balance-abs-threshold and max above min · --balance-rel-threshold) the least loaded worker is taken instead.
import type { LoadBalancingPolicy, PolicyDecision, SelectInfo } from './policies.js';
import type { Worker } from './worker.js';

/** Settings of the bucket policy. */
export interface BucketConfig {
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  readonly adjustIntervalSecs: number;
}

/** Length range of one worker, inclusive. */
export interface Boundary {
  readonly url: string;
  readonly range: readonly [number, number];
}

interface Seen {
  readonly chars: number;
  readonly url: string;
  readonly at: number;
}

/** Characters the initial ranges split (bucket.rs l_max). */
const INITIAL_SPAN = 4096;

/** Length-bucketed prefill policy. */
export class BucketPolicy implements LoadBalancingPolicy {
  readonly name = 'bucket' as const;
  private urls: string[] = [];
  private bounds: Boundary[] = [];
  /** Requests of the current window, oldest first. */
  private window: Seen[] = [];
  /** Characters sent to each worker within the window. */
  private readonly charsPerUrl = new Map<string, number>();
  /** Characters per worker the current ranges were cut for (0 before the first cut). */
  private bucketLoad = 0;
  private readonly timer: NodeJS.Timeout | null;

  /** @param now clock, ms; @param rand uniform [0, 1) source */
  constructor(private readonly cfg: BucketConfig, private readonly now: () => number = Date.now, private readonly rand: () => number = Math.random) {
    this.timer = cfg.adjustIntervalSecs > 0 ? setInterval(() => this.adjustBoundaries(), cfg.adjustIntervalSecs * 1000) : null;
    this.timer?.unref();
  }

  /** The current ranges, in worker order. */
  get boundaries(): readonly Boundary[] {
    return this.bounds;
  }

  /** Sets the worker list (keeps the window) and resets the ranges to an even split of 4096 characters. */
  setWorkers(urls: readonly string[]): void {
    this.urls = [...urls];
    for (const u of [...this.charsPerUrl.keys()]) if (!this.urls.includes(u)) this.charsPerUrl.delete(u);
    for (const u of this.urls) if (!this.charsPerUrl.has(u)) this.charsPerUrl.set(u, 0);
    const n = this.urls.length;
    const gap = n > 0 ? Math.floor(INITIAL_SPAN / n) : 0;
    this.bounds = this.urls.map((url, i) => ({ url, range: [i * gap, i === n - 1 ? Number.MAX_SAFE_INTEGER : (i + 1) * gap - 1] as const }));
  }

  select(workers: readonly Worker[], info: SelectInfo): PolicyDecision | null {
    if (workers.length === 0) return null;
    const known = workers.map((w) => w.url);
    if (known.some((u) => !this.urls.includes(u))) this.setWorkers([...new Set([...this.urls, ...known])]);
    const chars = [...info.text].length;
    const loads = [...this.charsPerUrl.values()];
    const max = Math.max(0, ...loads);
    const min = loads.length ? Math.min(...loads) : 0;
    const imbalanced = max - min > this.cfg.balanceAbsThreshold && max > this.cfg.balanceRelThreshold * min;
    let url: string | null;
    if (imbalanced) {
      url = null;
      let best = Infinity;
      for (const [u, c] of this.charsPerUrl) if (c < best) { best = c; url = u; }
    } else {
      url = this.bounds.find((b) => chars >= b.range[0] && chars <= b.range[1])?.url ?? null;
    }
    let worker = url !== null ? workers.find((w) => w.url === url) : undefined;
    if (!worker) worker = workers[Math.floor(this.rand() * workers.length) % workers.length];
    this.record(chars, worker.url);
    return { worker, balanced: imbalanced };
  }

  removeWorker(url: string): void {
    if (this.urls.includes(url)) this.setWorkers(this.urls.filter((u) => u !== url));
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Adds one request to the window, dropping the entries older than one adjustment interval. */
  private record(chars: number, url: string): void {
    const t = this.now();
    const cutoff = t - this.cfg.adjustIntervalSecs * 1000;
    while (this.window.length > 0 && this.window[0].at < cutoff) {
      const old = this.window.shift()!;
      this.charsPerUrl.set(old.url, Math.max(0, (this.charsPerUrl.get(old.url) ?? 0) - old.chars));
    }
    this.charsPerUrl.set(url, (this.charsPerUrl.get(url) ?? 0) + chars);
    this.window.push({ chars, url, at: t });
  }

  /**
   * Re-cuts the ranges from the window's request lengths so each worker gets about total/n characters; skipped when
   * the window is empty or the per-worker share changed by less than a factor of two since the last cut.
   */
  adjustBoundaries(): void {
    const n = this.urls.length;
    if (this.window.length === 0 || n === 0) return;
    const total = this.window.reduce((s, r) => s + r.chars, 0);
    const share = Math.floor(total / n);
    const old = this.bucketLoad;
    if (old !== 0 && share <= 2 * old && old <= 2 * share) return;
    this.bucketLoad = share;
    const sizes = this.window.map((r) => r.chars).sort((a, b) => a - b);
    const out: Boundary[] = [];
    let lower = 0;
    let next = 0;
    for (let w = 0; w < n; w++) {
      const url = this.urls[w];
      const last = w === n - 1;
      if (last) {
        out.push({ url, range: [lower, Number.MAX_SAFE_INTEGER] });
        break;
      }
      let acc = 0;
      let cut = false;
      while (next < sizes.length) {
        const len = sizes[next++];
        acc += len;
        if (acc >= share) {
          const upper = len <= lower ? lower + share : len;
          out.push({ url, range: [lower, upper] });
          lower = upper + 1;
          cut = true;
          break;
        }
      }
      if (!cut) {
        out.push({ url, range: [lower, lower + share] });
        lower += share + 1;
      }
    }
    this.bounds = out;
  }
}

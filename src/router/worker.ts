// A worker behind the router: its URL, role, router-tracked load, health state and circuit breaker
// (sgl-router core/worker.rs, core/circuit_breaker.rs; serving-spec.md §6.3).

/** Circuit-breaker settings (--cb-*). */
export interface CircuitBreakerConfig {
  readonly failureThreshold: number;
  readonly successThreshold: number;
  /** Open → HalfOpen after this long, ms. */
  readonly timeoutMs: number;
  /** Failures older than this no longer count, ms. */
  readonly windowMs: number;
  readonly disabled: boolean;
}

/** Circuit state; the numbers are the sgl_router_cb_state gauge values. */
export type CircuitState = 'closed' | 'open' | 'half_open';
export const CIRCUIT_STATE_VALUE: Record<CircuitState, number> = { closed: 0, open: 1, half_open: 2 };

/**
 * Per-worker circuit breaker: Closed → Open after `failureThreshold` consecutive failures inside the window; Open
 * for `timeoutMs` → HalfOpen; `successThreshold` successes → Closed; any failure in HalfOpen → Open.
 */
export class CircuitBreaker {
  private st: CircuitState = 'closed';
  private consecutiveFailures = 0;
  private consecutiveSuccesses = 0;
  private firstFailureAt = 0;
  private openedAt = 0;

  constructor(
    private readonly cfg: CircuitBreakerConfig,
    private readonly onTransition: (from: CircuitState, to: CircuitState) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** The current state (an Open breaker whose timeout passed reads as HalfOpen). */
  get state(): CircuitState {
    if (this.st === 'open' && this.now() - this.openedAt >= this.cfg.timeoutMs) this.move('half_open');
    return this.st;
  }

  /** True when a request may be sent. */
  canExecute(): boolean {
    return this.cfg.disabled || this.state !== 'open';
  }

  /** Records one outcome (success = 2xx or 4xx answer). */
  record(success: boolean): void {
    if (this.cfg.disabled) return;
    const s = this.state;
    if (success) {
      this.consecutiveFailures = 0;
      this.consecutiveSuccesses++;
      if (s === 'half_open' && this.consecutiveSuccesses >= this.cfg.successThreshold) this.move('closed');
      return;
    }
    this.consecutiveSuccesses = 0;
    const t = this.now();
    if (this.consecutiveFailures === 0 || t - this.firstFailureAt > this.cfg.windowMs) {
      this.firstFailureAt = t;
      this.consecutiveFailures = 0;
    }
    this.consecutiveFailures++;
    if (s === 'half_open' || (s === 'closed' && this.consecutiveFailures >= this.cfg.failureThreshold)) {
      this.openedAt = t;
      this.move('open');
    }
  }

  private move(to: CircuitState): void {
    if (to === this.st) return;
    const from = this.st;
    this.st = to;
    if (to === 'closed') this.consecutiveFailures = 0;
    if (to === 'half_open') this.consecutiveSuccesses = 0;
    this.onTransition(from, to);
  }
}

/** A worker's role in the router. */
export type WorkerRole = 'regular' | 'prefill' | 'decode';

/**
 * One routing target. `load` is the router's in-flight count; health follows the thresholds of --health-*. Under
 * --dp-aware one server gives one Worker per DP rank: `url` is `base@rank` (SGLang's naming), requests go to `baseUrl`
 * with `data_parallel_rank` = `dpRank` in the body.
 */
export class Worker {
  readonly url: string;
  /** Where requests are sent (the url without a DP suffix). */
  readonly baseUrl: string;
  /** --dp-aware: the DP rank this target stands for; null otherwise. */
  readonly dpRank: number | null;
  readonly role: WorkerRole;
  /** Prefill workers: the bootstrap port injected into requests (null = `none`). */
  readonly bootstrapPort: number | null;
  readonly breaker: CircuitBreaker;
  load = 0;
  processed = 0;
  healthy = true;
  /** Routing keys (x-smg-routing-key) of the requests in flight, with their counts (manual policy, min_group). */
  readonly routingKeys = new Map<string, number>();
  private healthFailures = 0;
  private healthSuccesses = 0;

  /** @param dpRank --dp-aware rank (the url gets the `@rank` suffix) */
  constructor(url: string, role: WorkerRole, bootstrapPort: number | null, cb: CircuitBreakerConfig, onTransition?: (from: CircuitState, to: CircuitState) => void, dpRank: number | null = null) {
    this.baseUrl = url.replace(/\/+$/, '');
    this.dpRank = dpRank;
    this.url = dpRank === null ? this.baseUrl : `${this.baseUrl}@${dpRank}`;
    this.role = role;
    this.bootstrapPort = bootstrapPort;
    this.breaker = new CircuitBreaker(cb, onTransition);
  }

  /** Counts one request in flight (and its routing key). @returns the matching release, to call exactly once */
  acquire(routingKey: string | null): () => void {
    this.load++;
    if (routingKey !== null) this.routingKeys.set(routingKey, (this.routingKeys.get(routingKey) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.load--;
      if (routingKey === null) return;
      const n = (this.routingKeys.get(routingKey) ?? 1) - 1;
      if (n <= 0) this.routingKeys.delete(routingKey);
      else this.routingKeys.set(routingKey, n);
    };
  }

  /** Healthy and its circuit lets requests through. */
  get available(): boolean {
    return this.healthy && this.breaker.canExecute();
  }

  /** The host name requests carry as bootstrap_host (the URL's host, without brackets). */
  get hostname(): string {
    try {
      return new URL(this.baseUrl).hostname.replace(/^\[|\]$/g, '');
    } catch {
      return this.baseUrl;
    }
  }

  /**
   * Records one health-check result. @returns true when the health state changed
   * @param failureThreshold consecutive failures that make it unhealthy
   * @param successThreshold consecutive successes that make it healthy again
   */
  recordHealth(ok: boolean, failureThreshold: number, successThreshold: number): boolean {
    if (ok) {
      this.healthFailures = 0;
      this.healthSuccesses++;
      if (!this.healthy && this.healthSuccesses >= successThreshold) return (this.healthy = true);
    } else {
      this.healthSuccesses = 0;
      this.healthFailures++;
      if (this.healthy && this.healthFailures >= failureThreshold) {
        this.healthy = false;
        return true;
      }
    }
    return false;
  }

  /** Marks the worker unhealthy at once (a connection to it failed mid-request). */
  markUnhealthy(): void {
    this.healthy = false;
    this.healthSuccesses = 0;
  }
}

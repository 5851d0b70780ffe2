// The router's Prometheus metrics (sgl-router src/metrics.rs names; serving-spec.md §6.4), through prom-client.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { CIRCUIT_STATE_VALUE, type CircuitState, type Worker } from './worker.js';

/** sgl_router_* metrics in one registry (served on --prometheus-port). */
export class RouterMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'route'>;
  readonly duration: Histogram<'route'>;
  readonly errors: Counter<'route' | 'error_type'>;
  readonly retries: Counter<'route'>;
  readonly retriesExhausted: Counter<'route'>;
  readonly processed: Counter<'worker'>;
  readonly decisions: Counter<'policy' | 'worker'>;
  readonly cacheHits: Counter;
  readonly cacheMisses: Counter;
  readonly lbEvents: Counter;
  readonly cbTransitions: Counter<'worker' | 'from' | 'to'>;
  readonly cbOutcomes: Counter<'worker' | 'outcome'>;
  readonly pdPrefill: Counter<'worker'>;
  readonly pdDecode: Counter<'worker'>;
  readonly pdErrors: Counter<'error_type'>;

  /**
   * @param workers read when metrics are scraped (health, load, circuit gauges)
   * @param durationBuckets --prometheus-duration-buckets (seconds) or null for the defaults
   */
  constructor(workers: () => readonly Worker[], durationBuckets: readonly number[] | null = null) {
    const reg = [this.registry];
    this.requests = new Counter({ name: 'sgl_router_requests_total', help: 'Total requests by route', labelNames: ['route'], registers: reg });
    this.duration = new Histogram({ name: 'sgl_router_request_duration_seconds', help: 'Request duration by route', labelNames: ['route'], buckets: durationBuckets ? [...durationBuckets] : [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600], registers: reg });
    this.errors = new Counter({ name: 'sgl_router_request_errors_total', help: 'Request errors by route and type', labelNames: ['route', 'error_type'], registers: reg });
    this.retries = new Counter({ name: 'sgl_router_retries_total', help: 'Retries by route', labelNames: ['route'], registers: reg });
    this.retriesExhausted = new Counter({ name: 'sgl_router_retries_exhausted_total', help: 'Requests that ran out of retries', labelNames: ['route'], registers: reg });
    this.processed = new Counter({ name: 'sgl_router_processed_requests_total', help: 'Requests processed per worker', labelNames: ['worker'], registers: reg });
    this.decisions = new Counter({ name: 'sgl_router_policy_decisions_total', help: 'Policy decisions per policy and worker', labelNames: ['policy', 'worker'], registers: reg });
    this.cacheHits = new Counter({ name: 'sgl_router_cache_hits_total', help: 'cache_aware prefix hits', registers: reg });
    this.cacheMisses = new Counter({ name: 'sgl_router_cache_misses_total', help: 'cache_aware prefix misses', registers: reg });
    this.lbEvents = new Counter({ name: 'sgl_router_load_balancing_events_total', help: 'cache_aware imbalance decisions', registers: reg });
    this.cbTransitions = new Counter({ name: 'sgl_router_cb_state_transitions_total', help: 'Circuit breaker transitions', labelNames: ['worker', 'from', 'to'], registers: reg });
    this.cbOutcomes = new Counter({ name: 'sgl_router_cb_outcomes_total', help: 'Outcomes recorded by circuit breakers', labelNames: ['worker', 'outcome'], registers: reg });
    this.pdPrefill = new Counter({ name: 'sgl_router_pd_prefill_requests_total', help: 'PD requests per prefill worker', labelNames: ['worker'], registers: reg });
    this.pdDecode = new Counter({ name: 'sgl_router_pd_decode_requests_total', help: 'PD requests per decode worker', labelNames: ['worker'], registers: reg });
    this.pdErrors = new Counter({ name: 'sgl_router_pd_errors_total', help: 'PD errors by type', labelNames: ['error_type'], registers: reg });
    const ws = workers;
    new Gauge({ name: 'sgl_router_active_workers', help: 'Available workers', registers: reg, collect() { this.set(ws().filter((w) => w.available).length); } });
    new Gauge({ name: 'sgl_router_worker_health', help: 'Worker health (1 healthy, 0 not)', labelNames: ['worker'], registers: reg, collect() { for (const w of ws()) this.set({ worker: w.url }, w.healthy ? 1 : 0); } });
    new Gauge({ name: 'sgl_router_worker_load', help: 'Router-tracked in-flight requests per worker', labelNames: ['worker'], registers: reg, collect() { for (const w of ws()) this.set({ worker: w.url }, w.load); } });
    new Gauge({ name: 'sgl_router_running_requests', help: 'Requests in flight through the router', registers: reg, collect() { this.set(ws().reduce((s, w) => s + (w.role === 'prefill' ? 0 : w.load), 0)); } });
    new Gauge({ name: 'sgl_router_max_load', help: 'Largest worker load', registers: reg, collect() { this.set(Math.max(0, ...ws().map((w) => w.load))); } });
    new Gauge({ name: 'sgl_router_min_load', help: 'Smallest worker load', registers: reg, collect() { const l = ws().map((w) => w.load); this.set(l.length ? Math.min(...l) : 0); } });
    new Gauge({ name: 'sgl_router_cb_state', help: 'Circuit state (0 closed, 1 open, 2 half-open)', labelNames: ['worker'], registers: reg, collect() { for (const w of ws()) this.set({ worker: w.url }, CIRCUIT_STATE_VALUE[w.breaker.state]); } });
  }

  /** Counts one circuit transition. */
  onTransition(worker: string, from: CircuitState, to: CircuitState): void {
    this.cbTransitions.inc({ worker, from, to });
  }
}

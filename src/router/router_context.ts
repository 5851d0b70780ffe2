// What the router's request handlers (route_regular.ts, route_pd.ts, admin_routes.ts) share: the worker set, the
// selection and outcome bookkeeping, the retry settings, and the error type that becomes the router's error body.
import type http from 'node:http';
import type { Logger } from '../common/index.js';
import type { RetryConfig } from './http_forward.js';
import type { LoadBalancingPolicy, SelectInfo } from './policies.js';
import type { RouterArgs } from './router_args.js';
import type { RouterMetrics } from './router_metrics.js';
import type { Worker, WorkerRole } from './worker.js';

/** An error the router answers with `{"error":{"type","code","message"}}` and `status`. */
export class RouterError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

/** The router state a handler works with. */
export interface RouterContext {
  readonly args: RouterArgs;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  readonly retry: RetryConfig;
  /** Every routing target (all roles; one per DP rank under --dp-aware). */
  readonly workers: Worker[];
  readonly regularPolicy: LoadBalancingPolicy | null;
  readonly prefillPolicy: LoadBalancingPolicy | null;
  readonly decodePolicy: LoadBalancingPolicy | null;
  /** Picks an available worker of `role` with `policy` (metrics counted). @returns null when none is available */
  pick(policy: LoadBalancingPolicy, role: WorkerRole, info: SelectInfo): Worker | null;
  /**
   * Records one exchange's outcome on `w`'s circuit breaker. Status null = the connection failed: the server's health is
   * probed at once, and a failed probe makes it unhealthy.
   */
  outcome(w: Worker, status: number | null): void;
  /** Headers sent to workers for a client request (end-to-end ones; Authorization = --api-key when set). */
  headersFor(h: http.IncomingHttpHeaders): Record<string, string | string[]>;
  /** Waits the backoff of retry `attempt` (1-based) and counts the retry. */
  sleepBackoff(attempt: number, route: string): Promise<void>;
}

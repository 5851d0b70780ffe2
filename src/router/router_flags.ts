// The flag table of `tsglang router`: sglang_router.launch_router's names, defaults and argument groups
// (sgl-model-gateway/bindings/python/src/sglang_router/router_args.py; serving-spec.md §6.1), with a help line in
// tsglang's words. Flags tsglang does not build (Kubernetes discovery, gRPC tokenizers, history databases, TLS, tracing,
// control-plane auth, IGW, MiniLB) are listed too, so `--help` shows SGLang's whole surface; giving one with a value
// other than its default stops start-up with a message naming it.

/** How a flag's value is read. */
export type FlagKind = 'str' | 'int' | 'float' | 'bool' | 'list' | 'floatlist' | 'choice';

/** One flag. */
export interface FlagSpec {
  /** Name without the leading `--`. */
  readonly name: string;
  readonly kind: FlagKind;
  readonly def: unknown;
  readonly help: string;
  readonly group: string;
  /** Allowed values (kind 'choice'). */
  readonly choices?: readonly string[];
  /** Metavar in --help (argparse: the upper-cased name). */
  readonly metavar?: string;
  /** Set when tsglang does not build the feature: what it is, for the refusal message. */
  readonly notBuilt?: string;
}

/** Policy names of --policy and --decode-policy (sglang_router choices). */
export const POLICY_CHOICES = ['random', 'round_robin', 'cache_aware', 'power_of_two', 'manual'] as const;
/** --prefill-policy also takes `bucket`. */
export const PREFILL_POLICY_CHOICES = [...POLICY_CHOICES, 'bucket'] as const;
/** --assignment-mode choices (manual policy). */
export const ASSIGNMENT_MODES = ['random', 'min_load', 'min_group'] as const;

/** Argument groups in --help order, with their one-line descriptions. */
export const GROUPS: readonly (readonly [string, string])[] = [
  ['Worker Configuration', 'Settings for worker connections and URLs'],
  ['Routing Policy', 'Load balancing and routing configuration'],
  ['PD Disaggregation', 'Prefill-Decode disaggregated mode settings'],
  ['Service Discovery (Kubernetes)', 'Kubernetes-based worker discovery'],
  ['Logging', 'Log output configuration'],
  ['Prometheus Metrics', 'Metrics export configuration'],
  ['Request Handling', 'Request timeout and ID configuration'],
  ['Rate Limiting', 'Concurrent request and queue limits'],
  ['Retry Configuration', 'Automatic retry behavior for failed requests'],
  ['Circuit Breaker', 'Circuit breaker pattern configuration'],
  ['Health Checks', 'Worker health monitoring settings'],
  ['Tokenizer', 'Tokenizer and chat template configuration'],
  ['Parsers', 'Reasoning and tool-call parser settings'],
  ['Backend', 'Backend runtime and history storage selection'],
  ['TLS/mTLS Security', 'TLS certificates for server and worker communication'],
  ['Tracing (OpenTelemetry)', 'Distributed tracing configuration'],
  ['Control Plane Authentication', 'API key and JWT/OIDC authentication'],
];

const W = 'Worker Configuration';
const R = 'Routing Policy';
const PD = 'PD Disaggregation';
const K8S = 'Service Discovery (Kubernetes)';
const LOG = 'Logging';
const PROM = 'Prometheus Metrics';
const REQ = 'Request Handling';
const RL = 'Rate Limiting';
const RETRY = 'Retry Configuration';
const CB = 'Circuit Breaker';
const HEALTH = 'Health Checks';
const TOK = 'Tokenizer';
const PARSE = 'Parsers';
const BACK = 'Backend';
const TLS = 'TLS/mTLS Security';
const TRACE = 'Tracing (OpenTelemetry)';
const AUTH = 'Control Plane Authentication';

const nb = (name: string, kind: FlagKind, def: unknown, group: string, what: string, help: string): FlagSpec => ({ name, kind, def, group, help, notBuilt: what });

/** Every flag of `tsglang router` except --prefill / --decode (parsed by hand: `--prefill URL [PORT]`). */
export const FLAGS: readonly FlagSpec[] = [
  { name: 'host', kind: 'str', def: '0.0.0.0', group: W, help: 'address the router listens on (IPv4, IPv6, 0.0.0.0 for all)' },
  { name: 'port', kind: 'int', def: 30000, group: W, help: 'port the router listens on' },
  { name: 'worker-urls', kind: 'list', def: [], group: W, help: 'worker URLs of regular mode (http://host:port, IPv6 in brackets)' },

  { name: 'policy', kind: 'choice', choices: POLICY_CHOICES, def: 'cache_aware', group: R, help: 'load-balancing policy (in PD mode, for both sides unless overridden)' },
  { name: 'prefill-policy', kind: 'choice', choices: PREFILL_POLICY_CHOICES, def: null, group: R, help: 'policy for prefill workers in PD mode (default: --policy)' },
  { name: 'decode-policy', kind: 'choice', choices: POLICY_CHOICES, def: null, group: R, help: 'policy for decode workers in PD mode (default: --policy)' },
  { name: 'cache-threshold', kind: 'float', def: 0.3, group: R, help: 'cache_aware: prefix match rate (0-1) above which the matching worker is taken' },
  { name: 'balance-abs-threshold', kind: 'int', def: 64, group: R, help: 'cache_aware/bucket: imbalance needs max_load - min_load above this (and the relative threshold)' },
  { name: 'balance-rel-threshold', kind: 'float', def: 1.5, group: R, help: 'cache_aware/bucket: imbalance needs max_load above min_load times this (and the absolute threshold)' },
  { name: 'bucket-adjust-interval-secs', kind: 'int', def: 5, group: R, help: 'bucket: seconds between bucket boundary adjustments' },
  { name: 'eviction-interval-secs', kind: 'int', def: 60, group: R, help: 'cache_aware/manual: seconds between evictions' },
  { name: 'max-tree-size', kind: 'int', def: 2 ** 26, group: R, help: 'cache_aware: characters kept per worker in the prefix tree' },
  { name: 'max-idle-secs', kind: 'int', def: 4 * 3600, group: R, help: 'manual: seconds a routing key may stay unused before it is forgotten' },
  { name: 'assignment-mode', kind: 'choice', choices: ASSIGNMENT_MODES, def: 'random', group: R, help: 'manual: how a new routing key gets its worker: random, min_load (fewest requests in flight), min_group (fewest routing keys in flight)' },
  nb('redis-url', 'str', null, R, 'shared manual-policy state in Redis', 'Redis URL for manual-policy state shared between routers'),
  nb('redis-key-prefix', 'str', null, R, 'shared manual-policy state in Redis', 'Redis key prefix for manual-policy state'),
  { name: 'max-payload-size', kind: 'int', def: 512 * 1024 * 1024, group: R, help: 'largest request body, bytes' },
  { name: 'dp-aware', kind: 'bool', def: false, group: R, help: 'expand each worker into one routing target per DP rank (its dp_size from /get_server_info) and send data_parallel_rank with each request' },
  nb('enable-igw', 'bool', false, R, 'IGW multi-model mode', 'Inference-Gateway multi-model mode'),

  nb('mini-lb', 'bool', false, PD, 'the Python MiniLB', 'use the Python MiniLB instead of the router'),
  { name: 'pd-disaggregation', kind: 'bool', def: false, group: PD, help: 'prefill/decode disaggregated mode (--prefill and --decode workers)' },
  { name: 'worker-startup-timeout-secs', kind: 'int', def: 1800, group: PD, help: 'seconds to wait for workers to become healthy at start-up' },
  { name: 'worker-startup-check-interval', kind: 'int', def: 30, group: PD, help: 'seconds between start-up health polls (also the load monitor period of power_of_two)' },

  { name: 'log-dir', kind: 'str', def: null, group: LOG, help: 'directory for a log file (sgl-router.log) besides stderr' },
  { name: 'log-level', kind: 'choice', choices: ['debug', 'info', 'warn', 'error'], def: 'info', group: LOG, help: 'log level' },

  nb('service-discovery', 'bool', false, K8S, 'Kubernetes service discovery', 'discover workers from Kubernetes pods'),
  nb('selector', 'list', [], K8S, 'Kubernetes service discovery', 'pod label selector (key=value ...)'),
  nb('service-discovery-port', 'int', 80, K8S, 'Kubernetes service discovery', 'port of discovered worker pods'),
  nb('service-discovery-namespace', 'str', null, K8S, 'Kubernetes service discovery', 'namespace to watch'),
  nb('prefill-selector', 'list', [], K8S, 'Kubernetes service discovery', 'label selector of prefill pods'),
  nb('decode-selector', 'list', [], K8S, 'Kubernetes service discovery', 'label selector of decode pods'),

  { name: 'prometheus-port', kind: 'int', def: 29000, group: PROM, help: 'port of the Prometheus metrics server (0: a free port, named in the start-up log; negative: none)' },
  { name: 'prometheus-host', kind: 'str', def: '0.0.0.0', group: PROM, help: 'address of the Prometheus metrics server' },
  { name: 'prometheus-duration-buckets', kind: 'floatlist', def: null, group: PROM, help: 'buckets of the request duration histogram, seconds' },

  { name: 'request-id-headers', kind: 'list', def: [], group: REQ, help: 'headers that carry a request id (default: x-request-id x-correlation-id x-trace-id request-id)' },
  { name: 'request-timeout-secs', kind: 'int', def: 1800, group: REQ, help: 'per-request timeout towards workers, seconds' },
  { name: 'shutdown-grace-period-secs', kind: 'int', def: 180, group: REQ, help: 'on SIGTERM/SIGINT, seconds to let requests in flight finish' },
  { name: 'cors-allowed-origins', kind: 'list', def: [], group: REQ, help: 'origins answered with CORS headers' },

  { name: 'max-concurrent-requests', kind: 'int', def: -1, group: RL, help: 'token-bucket capacity: requests admitted at once (-1: no limit)' },
  { name: 'queue-size', kind: 'int', def: 100, group: RL, help: 'requests that may wait for a token (0: answer 429 at once)' },
  { name: 'queue-timeout-secs', kind: 'int', def: 60, group: RL, help: 'seconds a request may wait in the queue before a 408' },
  { name: 'rate-limit-tokens-per-second', kind: 'int', def: null, group: RL, help: 'token refill rate per second (default: --max-concurrent-requests)' },

  { name: 'retry-max-retries', kind: 'int', def: 5, group: RETRY, help: 'attempts per request' },
  { name: 'retry-initial-backoff-ms', kind: 'int', def: 50, group: RETRY, help: 'backoff before the first retry, ms' },
  { name: 'retry-max-backoff-ms', kind: 'int', def: 30000, group: RETRY, help: 'largest backoff, ms' },
  { name: 'retry-backoff-multiplier', kind: 'float', def: 1.5, group: RETRY, help: 'backoff growth per attempt' },
  { name: 'retry-jitter-factor', kind: 'float', def: 0.2, group: RETRY, help: 'backoff jitter (0-1)' },
  { name: 'disable-retries', kind: 'bool', def: false, group: RETRY, help: 'send each request once (= --retry-max-retries 1)' },

  { name: 'cb-failure-threshold', kind: 'int', def: 10, group: CB, help: 'consecutive failures that open a worker\'s circuit' },
  { name: 'cb-success-threshold', kind: 'int', def: 3, group: CB, help: 'successes in half-open that close it' },
  { name: 'cb-timeout-duration-secs', kind: 'int', def: 60, group: CB, help: 'seconds an open circuit waits before half-open' },
  { name: 'cb-window-duration-secs', kind: 'int', def: 120, group: CB, help: 'window in which failures count, seconds' },
  { name: 'disable-circuit-breaker', kind: 'bool', def: false, group: CB, help: 'no circuit breakers' },

  { name: 'health-failure-threshold', kind: 'int', def: 3, group: HEALTH, help: 'consecutive failed checks that make a worker unhealthy' },
  { name: 'health-success-threshold', kind: 'int', def: 2, group: HEALTH, help: 'consecutive passed checks that make it healthy again' },
  { name: 'health-check-timeout-secs', kind: 'int', def: 5, group: HEALTH, help: 'health check timeout, seconds' },
  { name: 'health-check-interval-secs', kind: 'int', def: 60, group: HEALTH, help: 'seconds between health checks' },
  { name: 'health-check-endpoint', kind: 'str', def: '/health', group: HEALTH, help: 'health check path on workers' },
  { name: 'disable-health-check', kind: 'bool', def: false, group: HEALTH, help: 'no start-up wait and no periodic health checks' },

  nb('model-path', 'str', null, TOK, 'router-side tokenization (gRPC workers)', 'model path of the router-side tokenizer'),
  nb('tokenizer-path', 'str', null, TOK, 'router-side tokenization (gRPC workers)', 'tokenizer path'),
  nb('chat-template', 'str', null, TOK, 'router-side tokenization (gRPC workers)', 'chat template path'),
  nb('tokenizer-cache-enable-l0', 'bool', false, TOK, 'router-side tokenization (gRPC workers)', 'whole-string tokenizer cache'),
  nb('tokenizer-cache-l0-max-entries', 'int', 10000, TOK, 'router-side tokenization (gRPC workers)', 'entries of the L0 cache'),
  nb('tokenizer-cache-enable-l1', 'bool', false, TOK, 'router-side tokenization (gRPC workers)', 'prefix tokenizer cache'),
  nb('tokenizer-cache-l1-max-memory', 'int', 50 * 1024 * 1024, TOK, 'router-side tokenization (gRPC workers)', 'bytes of the L1 cache'),
  nb('reasoning-parser', 'str', null, PARSE, 'router-side parsers (gRPC workers; tsglang workers parse themselves)', 'reasoning parser'),
  nb('tool-call-parser', 'str', null, PARSE, 'router-side parsers (gRPC workers; tsglang workers parse themselves)', 'tool-call parser'),
  nb('mcp-config-path', 'str', null, PARSE, 'MCP tool servers', 'MCP server configuration file'),

  { name: 'backend', kind: 'choice', choices: ['sglang', 'openai'], def: 'sglang', group: BACK, help: 'worker runtime (only sglang is built: tsglang or SGLang HTTP workers)' },
  { name: 'history-backend', kind: 'choice', choices: ['memory', 'none', 'oracle', 'postgres', 'redis'], def: 'memory', group: BACK, help: 'conversation history store (only used by /v1/responses, which is not built)' },
  nb('oracle-wallet-path', 'str', null, BACK, 'the Oracle history backend', 'Oracle ATP wallet directory'),
  nb('oracle-tns-alias', 'str', null, BACK, 'the Oracle history backend', 'Oracle TNS alias'),
  nb('oracle-connect-descriptor', 'str', null, BACK, 'the Oracle history backend', 'Oracle DSN'),
  nb('oracle-username', 'str', null, BACK, 'the Oracle history backend', 'Oracle user'),
  nb('oracle-password', 'str', null, BACK, 'the Oracle history backend', 'Oracle password'),
  nb('oracle-pool-min', 'int', 1, BACK, 'the Oracle history backend', 'smallest Oracle pool'),
  nb('oracle-pool-max', 'int', 16, BACK, 'the Oracle history backend', 'largest Oracle pool'),
  nb('oracle-pool-timeout-secs', 'int', 30, BACK, 'the Oracle history backend', 'Oracle pool timeout'),
  nb('postgres-db-url', 'str', null, BACK, 'the PostgreSQL history backend', 'PostgreSQL URL'),
  nb('postgres-pool-max', 'int', 16, BACK, 'the PostgreSQL history backend', 'largest PostgreSQL pool'),
  nb('redis-pool-max', 'int', 16, BACK, 'the Redis history backend', 'largest Redis pool'),
  nb('redis-retention-days', 'int', 30, BACK, 'the Redis history backend', 'Redis retention, days'),

  nb('client-cert-path', 'str', null, TLS, 'mTLS towards workers', 'client certificate for workers'),
  nb('client-key-path', 'str', null, TLS, 'mTLS towards workers', 'client key for workers'),
  nb('ca-cert-paths', 'list', [], TLS, 'mTLS towards workers', 'CA certificates of workers'),
  nb('tls-cert-path', 'str', null, TLS, 'HTTPS on the router', 'server certificate'),
  nb('tls-key-path', 'str', null, TLS, 'HTTPS on the router', 'server key'),

  nb('enable-trace', 'bool', false, TRACE, 'OpenTelemetry tracing', 'OpenTelemetry tracing'),
  nb('otlp-traces-endpoint', 'str', 'localhost:4317', TRACE, 'OpenTelemetry tracing', 'OTLP collector address'),

  { name: 'api-key', kind: 'str', def: null, group: AUTH, help: 'API key clients must send (Authorization: Bearer) and the router sends to workers' },
  nb('control-plane-api-keys', 'list', [], AUTH, 'control-plane API keys', 'control-plane keys id:name:role:key'),
  nb('control-plane-audit-enabled', 'bool', false, AUTH, 'control-plane audit logging', 'audit log of control-plane calls'),
  nb('jwt-issuer', 'str', null, AUTH, 'JWT/OIDC authentication', 'OIDC issuer'),
  nb('jwt-audience', 'str', null, AUTH, 'JWT/OIDC authentication', 'JWT audience'),
  nb('jwt-jwks-uri', 'str', null, AUTH, 'JWT/OIDC authentication', 'JWKS URI'),
  nb('jwt-role-mapping', 'list', [], AUTH, 'JWT/OIDC authentication', 'IDP role to gateway role mappings'),
];

// `tsglang router` flags: sglang_router.launch_router's names and defaults (sglang_router/router_args.py;
// serving-spec.md §6.1), parsed as argparse does (--flag value, --flag=value, unique prefixes, nargs lists) plus the
// router's repeated `--prefill URL [BOOTSTRAP_PORT|none]` and `--decode URL`.
import { InvalidRequestError } from '../common/index.js';
import { POLICY_NAMES, type PolicyName } from './policies.js';

/** The router's configuration. */
export interface RouterArgs {
  host: string;
  port: number;
  workerUrls: string[];
  pdDisaggregation: boolean;
  /** [url, bootstrap port or null for `none`] */
  prefill: [string, number | null][];
  decode: string[];
  policy: PolicyName;
  prefillPolicy: PolicyName | null;
  decodePolicy: PolicyName | null;
  cacheThreshold: number;
  balanceAbsThreshold: number;
  balanceRelThreshold: number;
  evictionIntervalSecs: number;
  maxTreeSize: number;
  maxPayloadSize: number;
  apiKey: string | null;
  workerStartupTimeoutSecs: number;
  workerStartupCheckInterval: number;
  requestTimeoutSecs: number;
  retryMaxRetries: number;
  retryInitialBackoffMs: number;
  retryMaxBackoffMs: number;
  retryBackoffMultiplier: number;
  retryJitterFactor: number;
  disableRetries: boolean;
  cbFailureThreshold: number;
  cbSuccessThreshold: number;
  cbTimeoutDurationSecs: number;
  cbWindowDurationSecs: number;
  disableCircuitBreaker: boolean;
  healthFailureThreshold: number;
  healthSuccessThreshold: number;
  healthCheckTimeoutSecs: number;
  healthCheckIntervalSecs: number;
  healthCheckEndpoint: string;
  prometheusHost: string;
  prometheusPort: number;
  requestIdHeaders: string[];
  logLevel: string;
}

type Kind = 'str' | 'int' | 'float' | 'bool' | 'list' | 'policy';
interface Spec { name: string; kind: Kind; def: unknown; help: string }

const SPECS: Spec[] = [
  { name: 'host', kind: 'str', def: '0.0.0.0', help: 'host address to bind the router server' },
  { name: 'port', kind: 'int', def: 30000, help: 'port of the router server' },
  { name: 'worker-urls', kind: 'list', def: [], help: 'worker URLs (regular mode)' },
  { name: 'pd-disaggregation', kind: 'bool', def: false, help: 'prefill/decode disaggregated mode' },
  { name: 'policy', kind: 'policy', def: 'cache_aware', help: 'load-balancing policy' },
  { name: 'prefill-policy', kind: 'policy', def: null, help: 'policy for prefill workers in PD mode (default: --policy)' },
  { name: 'decode-policy', kind: 'policy', def: null, help: 'policy for decode workers in PD mode (default: --policy)' },
  { name: 'cache-threshold', kind: 'float', def: 0.3, help: 'cache_aware: match rate above which the matching worker is used' },
  { name: 'balance-abs-threshold', kind: 'int', def: 64, help: 'cache_aware: load difference that counts as imbalance' },
  { name: 'balance-rel-threshold', kind: 'float', def: 1.5, help: 'cache_aware: load ratio that counts as imbalance' },
  { name: 'eviction-interval-secs', kind: 'int', def: 60, help: 'cache_aware: seconds between tree evictions' },
  { name: 'max-tree-size', kind: 'int', def: 2 ** 26, help: 'cache_aware: characters kept per worker' },
  { name: 'max-payload-size', kind: 'int', def: 512 * 1024 * 1024, help: 'largest request body, bytes' },
  { name: 'api-key', kind: 'str', def: null, help: 'API key required from clients and sent to workers' },
  { name: 'worker-startup-timeout-secs', kind: 'int', def: 1800, help: 'seconds to wait for workers to become healthy' },
  { name: 'worker-startup-check-interval', kind: 'int', def: 30, help: 'seconds between start-up health polls' },
  { name: 'request-timeout-secs', kind: 'int', def: 1800, help: 'per-request timeout, seconds' },
  { name: 'retry-max-retries', kind: 'int', def: 5, help: 'attempts per request' },
  { name: 'retry-initial-backoff-ms', kind: 'int', def: 50, help: 'first retry backoff, ms' },
  { name: 'retry-max-backoff-ms', kind: 'int', def: 30000, help: 'largest retry backoff, ms' },
  { name: 'retry-backoff-multiplier', kind: 'float', def: 1.5, help: 'backoff growth per attempt' },
  { name: 'retry-jitter-factor', kind: 'float', def: 0.2, help: 'backoff jitter (fraction)' },
  { name: 'disable-retries', kind: 'bool', def: false, help: 'send each request once' },
  { name: 'cb-failure-threshold', kind: 'int', def: 10, help: 'failures that open a worker\'s circuit' },
  { name: 'cb-success-threshold', kind: 'int', def: 3, help: 'half-open successes that close it' },
  { name: 'cb-timeout-duration-secs', kind: 'int', def: 60, help: 'seconds a circuit stays open' },
  { name: 'cb-window-duration-secs', kind: 'int', def: 120, help: 'failure window, seconds' },
  { name: 'disable-circuit-breaker', kind: 'bool', def: false, help: 'no circuit breakers' },
  { name: 'health-failure-threshold', kind: 'int', def: 3, help: 'failed checks that make a worker unhealthy' },
  { name: 'health-success-threshold', kind: 'int', def: 2, help: 'passed checks that make it healthy again' },
  { name: 'health-check-timeout-secs', kind: 'int', def: 5, help: 'health check timeout, seconds' },
  { name: 'health-check-interval-secs', kind: 'int', def: 60, help: 'seconds between health checks' },
  { name: 'health-check-endpoint', kind: 'str', def: '/health', help: 'health check path on workers' },
  { name: 'prometheus-host', kind: 'str', def: '0.0.0.0', help: 'host of the Prometheus metrics server' },
  { name: 'prometheus-port', kind: 'int', def: 29000, help: 'port of the Prometheus metrics server (0: any free port, named in the start-up log; negative: no metrics server)' },
  { name: 'request-id-headers', kind: 'list', def: [], help: 'headers that carry a request id (default x-request-id, x-correlation-id, x-trace-id, request-id)' },
  { name: 'log-level', kind: 'str', def: 'info', help: 'log level' },
];

const camel = (n: string): string => n.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const PROG = 'tsglang router';

function fail(msg: string): never {
  throw new InvalidRequestError(`${PROG}: error: ${msg}`, null);
}

/** `tsglang router --help`. */
export function routerHelp(): string {
  const lines = [
    `usage: ${PROG} [--worker-urls URL ...] [--pd-disaggregation --prefill URL [BOOTSTRAP_PORT|none] ... --decode URL ...] [flags]`,
    '',
    'SGLang router (sglang_router.launch_router flags): regular mode balances over --worker-urls; PD mode sends each',
    'request to a prefill and a decode worker with bootstrap_host/port/room injected.',
    '',
    'flags:',
    `  --prefill URL [BOOTSTRAP_PORT|none]   a prefill worker (PD mode, repeatable; port default none)`,
    `  --decode URL                          a decode worker (PD mode, repeatable)`,
  ];
  for (const s of SPECS) {
    const arg = s.kind === 'bool' ? '' : s.kind === 'list' ? ' VALUE ...' : s.kind === 'policy' ? ` {${POLICY_NAMES.join(',')}}` : ' VALUE';
    const def = s.kind === 'bool' || s.def === null || (Array.isArray(s.def) && s.def.length === 0) ? '' : ` (default: ${String(s.def)})`;
    lines.push(`  --${s.name}${arg}`.padEnd(37) + ` ${s.help}${def}`);
  }
  return lines.join('\n') + '\n';
}

/**
 * Parses the router's argv. @returns the args, or 'help' for --help / -h
 * @throws InvalidRequestError (argparse-style message) for an unknown flag, a bad value, or an inconsistent set
 */
export function parseRouterArgs(argv: readonly string[]): RouterArgs | 'help' {
  const v: Record<string, unknown> = {};
  for (const s of SPECS) v[camel(s.name)] = Array.isArray(s.def) ? [...s.def] : s.def;
  const prefill: [string, number | null][] = [];
  const decode: string[] = [];
  const isFlag = (t: string | undefined): boolean => t !== undefined && t.startsWith('--');
  for (let i = 0; i < argv.length; i++) {
    let tok = argv[i];
    if (tok === '--help' || tok === '-h') return 'help';
    if (!tok.startsWith('--')) fail(`unrecognized arguments: ${tok}`);
    let inline: string | undefined;
    const eq = tok.indexOf('=');
    if (eq > 0) { inline = tok.slice(eq + 1); tok = tok.slice(0, eq); }
    const name = tok.slice(2).replace(/_/g, '-');
    if (name === 'prefill') {
      const url = inline ?? argv[++i];
      if (url === undefined || isFlag(url)) fail('argument --prefill: expected URL [BOOTSTRAP_PORT]');
      let port: number | null = null;
      const next = argv[i + 1];
      if (next !== undefined && !isFlag(next)) {
        i++;
        if (next.toLowerCase() !== 'none') {
          port = Number(next);
          if (!Number.isInteger(port) || port <= 0 || port > 65535) fail(`argument --prefill: invalid bootstrap port: '${next}'`);
        }
      }
      prefill.push([url!, port]);
      continue;
    }
    if (name === 'decode') {
      const url = inline ?? argv[++i];
      if (url === undefined || isFlag(url)) fail('argument --decode: expected URL');
      decode.push(url!);
      continue;
    }
    const matches = SPECS.filter((s) => s.name === name);
    const spec = matches[0] ?? (() => {
      const pre = SPECS.filter((s) => s.name.startsWith(name));
      if (pre.length > 1) fail(`ambiguous option: --${name} could match ${pre.map((s) => `--${s.name}`).join(', ')}`);
      return pre[0];
    })();
    if (!spec) fail(`unrecognized arguments: ${argv[i]}`);
    const key = camel(spec.name);
    if (spec.kind === 'bool') { v[key] = true; continue; }
    if (spec.kind === 'list') {
      const vals: string[] = inline !== undefined ? [inline] : [];
      while (argv[i + 1] !== undefined && !isFlag(argv[i + 1])) vals.push(argv[++i]);
      if (vals.length === 0) fail(`argument --${spec.name}: expected at least one argument`);
      v[key] = vals;
      continue;
    }
    const raw = inline ?? argv[++i];
    if (raw === undefined) fail(`argument --${spec.name}: expected one argument`);
    if (spec.kind === 'int') {
      const n = Number(raw);
      if (!Number.isInteger(n)) fail(`argument --${spec.name}: invalid int value: '${raw}'`);
      v[key] = n;
    } else if (spec.kind === 'float') {
      const n = Number(raw);
      if (!Number.isFinite(n)) fail(`argument --${spec.name}: invalid float value: '${raw}'`);
      v[key] = n;
    } else if (spec.kind === 'policy') {
      if (!(POLICY_NAMES as readonly string[]).includes(raw!)) fail(`argument --${spec.name}: invalid choice: '${raw}' (choose from ${POLICY_NAMES.map((p) => `'${p}'`).join(', ')})`);
      v[key] = raw;
    } else v[key] = raw;
  }
  const args = { ...(v as unknown as RouterArgs), prefill, decode };
  if (args.pdDisaggregation) {
    if (prefill.length === 0 || decode.length === 0) fail('--pd-disaggregation needs at least one --prefill and one --decode worker');
    if (args.workerUrls.length > 0) fail('--worker-urls is for regular mode; PD mode takes --prefill and --decode');
  } else if (prefill.length > 0 || decode.length > 0) {
    fail('--prefill / --decode need --pd-disaggregation');
  } else if (args.workerUrls.length === 0) {
    fail('no workers: give --worker-urls (regular mode) or --pd-disaggregation with --prefill and --decode');
  }
  for (const u of [...args.workerUrls, ...prefill.map((p) => p[0]), ...decode]) {
    try {
      const p = new URL(u);
      if (p.protocol !== 'http:' && p.protocol !== 'https:') throw new Error();
    } catch {
      fail(`invalid worker URL: '${u}' (expected http://host:port)`);
    }
  }
  if (args.requestIdHeaders.length === 0) args.requestIdHeaders = ['x-request-id', 'x-correlation-id', 'x-trace-id', 'request-id'];
  return args;
}

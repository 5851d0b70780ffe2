// `tsglang router` flags parsed as sglang_router.launch_router's argparse does (--flag value, --flag=value, unique
// prefixes, nargs lists, underscores accepted for dashes) plus its repeated `--prefill URL [BOOTSTRAP_PORT|none]` and
// `--decode URL`; `--help` prints the flag table of router_flags.ts by argument group.
import { InvalidRequestError } from '../common/index.js';
import { FLAGS, GROUPS, type FlagSpec } from './router_flags.js';
import type { PolicyName } from './policies.js';

/** The router's configuration (camelCase of the flag names). */
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
  bucketAdjustIntervalSecs: number;
  evictionIntervalSecs: number;
  maxTreeSize: number;
  maxIdleSecs: number;
  assignmentMode: 'random' | 'min_load' | 'min_group';
  maxPayloadSize: number;
  dpAware: boolean;
  apiKey: string | null;
  workerStartupTimeoutSecs: number;
  workerStartupCheckInterval: number;
  logDir: string | null;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  prometheusHost: string;
  prometheusPort: number;
  prometheusDurationBuckets: number[] | null;
  requestIdHeaders: string[];
  requestTimeoutSecs: number;
  shutdownGracePeriodSecs: number;
  corsAllowedOrigins: string[];
  maxConcurrentRequests: number;
  queueSize: number;
  queueTimeoutSecs: number;
  rateLimitTokensPerSecond: number | null;
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
  disableHealthCheck: boolean;
  backend: string;
  historyBackend: string;
}

const camel = (n: string): string => n.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const PROG = 'tsglang router';

function fail(msg: string): never {
  throw new InvalidRequestError(`${PROG}: error: ${msg}`, null);
}

function metavar(s: FlagSpec): string {
  if (s.kind === 'bool') return '';
  if (s.kind === 'choice') return ` {${s.choices!.join(',')}}`;
  const m = s.metavar ?? s.name.toUpperCase().replace(/-/g, '_');
  return s.kind === 'list' || s.kind === 'floatlist' ? ` [${m} ...]` : ` ${m}`;
}

/** One argparse-style help entry: the flag and metavar, then the help text on the same line or the next one. */
function entry(flag: string, help: string): string[] {
  const head = `  ${flag}`;
  if (head.length <= 22) return [`${head.padEnd(24)}${help}`];
  return [head, `${' '.repeat(24)}${help}`];
}

/** `tsglang router --help`: usage, then every flag by SGLang's argument groups. */
export function routerHelp(): string {
  const lines = [
    `usage: ${PROG} [-h] [--worker-urls [WORKER_URLS ...]] [--pd-disaggregation] [--prefill URL [BOOTSTRAP_PORT|none]] [--decode URL] [flags]`,
    '',
    'SGLang router (python -m sglang_router.launch_router, same flags): regular mode balances requests over --worker-urls;',
    'PD mode sends each request to a prefill and a decode worker with bootstrap_host/port/room injected.',
    '',
    'options:',
    ...entry('-h, --help', 'show this help message and exit'),
  ];
  for (const [group, desc] of GROUPS) {
    lines.push('', `${group}:`, `  ${desc}`, '');
    if (group === 'PD Disaggregation') {
      lines.push(...entry('--prefill URL [BOOTSTRAP_PORT|none]', 'a prefill worker and its bootstrap port (repeatable; port default none)'));
      lines.push(...entry('--decode URL', 'a decode worker (repeatable)'));
    }
    for (const s of FLAGS.filter((f) => f.group === group)) {
      const emptyDef = s.def === null || s.kind === 'bool' || (Array.isArray(s.def) && s.def.length === 0);
      const def = emptyDef ? '' : ` (default: ${String(s.def)})`;
      const nb = s.notBuilt ? ' [not built in tsglang]' : '';
      lines.push(...entry(`--${s.name}${metavar(s)}`, `${s.help}${def}${nb}`));
    }
  }
  return lines.join('\n') + '\n';
}

function findSpec(name: string, raw: string): FlagSpec {
  const exact = FLAGS.find((s) => s.name === name);
  if (exact) return exact;
  const pre = FLAGS.filter((s) => s.name.startsWith(name));
  if (pre.length > 1) fail(`ambiguous option: --${name} could match ${pre.map((s) => `--${s.name}`).join(', ')}`);
  if (pre.length === 0) fail(`unrecognized arguments: ${raw}`);
  return pre[0];
}

function convert(s: FlagSpec, raw: string): unknown {
  if (s.kind === 'int') {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isInteger(n)) fail(`argument --${s.name}: invalid int value: '${raw}'`);
    return n;
  }
  if (s.kind === 'float' || s.kind === 'floatlist') {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) fail(`argument --${s.name}: invalid float value: '${raw}'`);
    return n;
  }
  if (s.kind === 'choice' && !s.choices!.includes(raw)) fail(`argument --${s.name}: invalid choice: '${raw}' (choose from ${s.choices!.map((c) => `'${c}'`).join(', ')})`);
  return raw;
}

/**
 * Parses the router's argv. @returns the args, or 'help' for --help / -h
 * @throws InvalidRequestError (argparse-style message) for an unknown flag, a bad value, a flag tsglang does not build,
 *   or an inconsistent set (no workers, --prefill without --pd-disaggregation, a URL that is not http(s))
 */
export function parseRouterArgs(argv: readonly string[]): RouterArgs | 'help' {
  const v: Record<string, unknown> = {};
  for (const s of FLAGS) v[camel(s.name)] = Array.isArray(s.def) ? [...s.def] : s.def;
  const given = new Set<string>();
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
      if (url === undefined || isFlag(url)) fail('argument --prefill: expected at least one argument');
      let port: number | null = null;
      const next = argv[i + 1];
      if (next !== undefined && !isFlag(next)) {
        i++;
        if (next.toLowerCase() !== 'none') {
          port = Number(next);
          if (!Number.isInteger(port) || port <= 0 || port > 65535) fail(`argument --prefill: invalid bootstrap port: '${next}' (a port number or 'none')`);
        }
      }
      prefill.push([url!, port]);
      continue;
    }
    if (name === 'decode') {
      const url = inline ?? argv[++i];
      if (url === undefined || isFlag(url)) fail('argument --decode: expected one argument');
      decode.push(url!);
      continue;
    }
    const spec = findSpec(name, argv[i]);
    const key = camel(spec.name);
    given.add(spec.name);
    if (spec.kind === 'bool') {
      if (inline !== undefined) fail(`argument --${spec.name}: ignored explicit argument '${inline}'`);
      v[key] = true;
      continue;
    }
    if (spec.kind === 'list' || spec.kind === 'floatlist') {
      const vals: string[] = inline !== undefined ? [inline] : [];
      while (argv[i + 1] !== undefined && !isFlag(argv[i + 1])) vals.push(argv[++i]);
      if (spec.kind === 'floatlist' && vals.length === 0) fail(`argument --${spec.name}: expected at least one argument`);
      v[key] = vals.map((x) => convert(spec, x));
      continue;
    }
    const raw = inline ?? argv[++i];
    if (raw === undefined || (inline === undefined && isFlag(raw) && spec.kind !== 'str')) fail(`argument --${spec.name}: expected one argument`);
    v[key] = convert(spec, raw!);
  }
  for (const s of FLAGS) {
    if (!s.notBuilt || !given.has(s.name)) continue;
    const val = v[camel(s.name)];
    const isDefault = JSON.stringify(val) === JSON.stringify(s.def);
    if (!isDefault) fail(`--${s.name}: ${s.notBuilt} is not built in tsglang's router`);
  }
  const args = { ...(v as unknown as RouterArgs), prefill, decode };
  if (args.backend !== 'sglang') fail(`--backend ${args.backend}: only the sglang backend (tsglang or SGLang HTTP workers) is built in tsglang's router`);
  if (!['memory', 'none'].includes(args.historyBackend)) fail(`--history-backend ${args.historyBackend}: the ${args.historyBackend} history store is not built in tsglang's router`);
  if (args.pdDisaggregation) {
    if (prefill.length === 0 || decode.length === 0) fail('--pd-disaggregation needs at least one --prefill and one --decode worker');
    if (args.workerUrls.length > 0) fail('--worker-urls is for regular mode; PD mode takes --prefill and --decode');
  } else if (prefill.length > 0 || decode.length > 0) {
    fail('--prefill / --decode need --pd-disaggregation');
  } else if (args.workerUrls.length === 0) {
    fail('no workers: give --worker-urls (regular mode) or --pd-disaggregation with --prefill and --decode');
  }
  if (!args.pdDisaggregation && args.prefillPolicy === 'bucket') fail('--prefill-policy applies to PD mode only');
  if (args.dpAware && args.pdDisaggregation) fail('--dp-aware with --pd-disaggregation is not built in tsglang\'s router (regular mode only)');
  for (const u of [...args.workerUrls, ...prefill.map((p) => p[0]), ...decode]) {
    try {
      const p = new URL(u);
      if (p.protocol !== 'http:' && p.protocol !== 'https:') throw new Error();
    } catch {
      fail(`invalid worker URL: '${u}' (expected http://host:port)`);
    }
  }
  if (args.requestIdHeaders.length === 0) args.requestIdHeaders = ['x-request-id', 'x-correlation-id', 'x-trace-id', 'request-id'];
  args.requestIdHeaders = args.requestIdHeaders.map((h) => h.toLowerCase());
  return args;
}

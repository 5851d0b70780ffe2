// `tsglang router` flags: SGLang's names, defaults and choices, `--prefill URL [PORT|none]`, the refusal of flags
// tsglang does not build, and --help listing every flag by SGLang's argument groups.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRouterArgs, routerHelp, type RouterArgs } from './router_args.js';
import { FLAGS, GROUPS } from './router_flags.js';

const parse = (argv: string[]): RouterArgs => {
  const a = parseRouterArgs(argv);
  assert.notEqual(a, 'help');
  return a as RouterArgs;
};

test('flags: SGLang names and defaults, PD --prefill URL PORT|none, errors', () => {
  const a = parse(['--pd-disaggregation', '--prefill', 'http://p:30000', '8998', '--prefill', 'http://p2:30000', 'none', '--prefill', 'http://p3:1', '--decode', 'http://d:30001', '--host', '127.0.0.1', '--port', '30000']);
  assert.deepEqual(a.prefill, [['http://p:30000', 8998], ['http://p2:30000', null], ['http://p3:1', null]]);
  assert.deepEqual(a.decode, ['http://d:30001']);
  assert.equal(a.policy, 'cache_aware');
  assert.equal(a.cacheThreshold, 0.3);
  assert.equal(a.balanceAbsThreshold, 64);
  assert.equal(a.balanceRelThreshold, 1.5);
  assert.equal(a.evictionIntervalSecs, 60);
  assert.equal(a.maxTreeSize, 2 ** 26);
  assert.equal(a.maxIdleSecs, 4 * 3600);
  assert.equal(a.assignmentMode, 'random');
  assert.equal(a.bucketAdjustIntervalSecs, 5);
  assert.equal(a.retryMaxRetries, 5);
  assert.equal(a.retryBackoffMultiplier, 1.5);
  assert.equal(a.cbFailureThreshold, 10);
  assert.equal(a.cbTimeoutDurationSecs, 60);
  assert.equal(a.prometheusPort, 29000);
  assert.equal(a.maxPayloadSize, 512 * 1024 * 1024);
  assert.equal(a.maxConcurrentRequests, -1);
  assert.equal(a.queueSize, 100);
  assert.equal(a.queueTimeoutSecs, 60);
  assert.equal(a.rateLimitTokensPerSecond, null);
  assert.equal(a.shutdownGracePeriodSecs, 180);
  assert.equal(a.workerStartupTimeoutSecs, 1800);
  assert.deepEqual(a.requestIdHeaders, ['x-request-id', 'x-correlation-id', 'x-trace-id', 'request-id']);
  const r = parse(['--worker-urls', 'http://a:1', 'http://b:2', '--policy=manual', '--assignment_mode', 'min_group', '--max-conc', '8', '--prometheus-duration-buckets', '0.1', '1']);
  assert.deepEqual(r.workerUrls, ['http://a:1', 'http://b:2']);
  assert.equal(r.policy, 'manual');
  assert.equal(r.assignmentMode, 'min_group');
  assert.equal(r.maxConcurrentRequests, 8);
  assert.deepEqual(r.prometheusDurationBuckets, [0.1, 1]);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--policy', 'lpm']), /invalid choice: 'lpm' \(choose from 'random', 'round_robin', 'cache_aware', 'power_of_two', 'manual'\)/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--policy', 'bucket']), /invalid choice: 'bucket'/);
  assert.equal(parse(['--pd-disaggregation', '--prefill', 'http://p:1', '--decode', 'http://d:1', '--prefill-policy', 'bucket']).prefillPolicy, 'bucket');
  assert.throws(() => parse(['--pd-disaggregation', '--decode', 'http://d:1']), /at least one --prefill/);
  assert.throws(() => parse(['--pd-disaggregation', '--prefill', 'http://p:1', 'x', '--decode', 'http://d:1']), /invalid bootstrap port: 'x'/);
  assert.throws(() => parse(['--worker-urls', 'ftp://x']), /invalid worker URL/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--bogus']), /unrecognized arguments: --bogus/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--cb']), /ambiguous option: --cb could match/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--queue-size', '1.5']), /invalid int value: '1.5'/);
  assert.throws(() => parse(['--pd-disaggregation', '--prefill', 'http://p:1', '--decode', 'http://d:1', '--dp-aware']), /--dp-aware with --pd-disaggregation/);
  assert.equal(parseRouterArgs(['--help']), 'help');
});

test('flags tsglang does not build are refused by name unless left at their default', () => {
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--service-discovery']), /--service-discovery: Kubernetes service discovery is not built/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--tls-cert-path', '/x.pem']), /--tls-cert-path: HTTPS on the router is not built/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--backend', 'openai']), /--backend openai: only the sglang backend/);
  assert.throws(() => parse(['--worker-urls', 'http://a:1', '--history-backend', 'oracle']), /oracle history store is not built/);
  // a default value is harmless (scripts that spell out SGLang's defaults keep working)
  assert.equal(parse(['--worker-urls', 'http://a:1', '--service-discovery-port', '80', '--backend', 'sglang', '--history-backend', 'none']).backend, 'sglang');
});

test('--help lists every flag under its SGLang argument group, the not-built ones marked', () => {
  const h = routerHelp();
  for (const f of FLAGS) assert.ok(h.includes(`--${f.name}`), `--${f.name} missing from --help`);
  for (const [g] of GROUPS) assert.ok(h.includes(`\n${g}:\n`), `group ${g} missing`);
  assert.match(h, /--prefill URL \[BOOTSTRAP_PORT\|none\]/);
  assert.match(h, /--policy \{random,round_robin,cache_aware,power_of_two,manual\}/);
  assert.match(h, /--service-discovery\s+discover workers from Kubernetes pods \[not built in tsglang\]/);
  // each group's flags come after its heading and before the next one
  const at = (s: string): number => h.indexOf(s);
  assert.ok(at('Rate Limiting:') < at('--max-concurrent-requests') && at('--max-concurrent-requests') < at('Retry Configuration:'));
});

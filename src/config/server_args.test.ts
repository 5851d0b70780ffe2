import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseServerArgs, parseServerArgsCollecting, checkServerArgs, gpuKnobsNotice, validateServerArgs, defaultServerArgs, dsaDenseThresholdNotice, readServerEnv, resolveFlag, serverArgsHelp, SERVER_FLAGS } from './server_args.js';
import { engineSlice, httpServerSlice } from './slices.js';
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';
import { tempDir } from '../../test/helpers/tmp.js';

/** An (empty) checkpoint directory: config.json only. */
function checkpointDir(): string {
  const dir = tempDir('tsglang-args-');
  writeFileSync(join(dir, 'config.json'), '{}');
  return dir;
}

test('defaults are SGLang\'s', () => {
  const d = defaultServerArgs();
  assert.equal(d.host, '127.0.0.1');
  assert.equal(d.port, 30000);
  assert.equal(d.tpSize, 1);
  assert.equal(d.maxPrefillTokens, 16384);
  assert.equal(d.schedulePolicy, 'fcfs');
  assert.equal(d.disaggregationBootstrapPort, 8998);
  assert.equal(d.kvCacheDtype, 'auto');
  assert.equal(d.modelPath, null);
});

test('every name and alias is unique in the table', () => {
  const seen = new Set<string>();
  for (const f of SERVER_FLAGS) for (const n of [f.name, ...(f.aliases ?? [])]) {
    assert.ok(!seen.has(n), `duplicate flag --${n}`);
    seen.add(n);
  }
});

test('seed spellings: aliases, unique prefixes, --x=v and --x v', () => {
  const { args, given } = parseServerArgs([
    '--model', '/m', '--tp', '4', '--ep=8', '--dp', '2', '--nccl-init', '10.0.0.1:5000', '--mem-fraction-static', '0.85',
    '--trust-remote-code', '--tool-call-parser', 'minimax-m2', '--reasoning-parser=minimax-append-think',
    '--served-model-name', 'X', '--context-length', '65536', '--chunked-prefill-size', '-1',
    '--json-model-override-args', '{"index_topk_pattern": "FS"}', '--speculative-algorithm', 'NEXTN',
  ]);
  assert.equal(args.modelPath, '/m');
  assert.equal(args.tpSize, 4);
  assert.equal(args.epSize, 8);
  assert.equal(args.dpSize, 2);
  assert.equal(args.distInitAddr, '10.0.0.1:5000');
  assert.equal(args.memFractionStatic, 0.85);
  assert.equal(args.trustRemoteCode, true);
  assert.equal(args.reasoningParser, 'minimax-append-think');
  assert.equal(args.contextLength, 65536);
  assert.equal(args.chunkedPrefillSize, -1);
  assert.deepEqual(args.jsonModelOverrideArgs, { index_topk_pattern: 'FS' });
  assert.equal(args.speculativeAlgorithm, 'EAGLE');
  assert.ok(given.has('tp-size') && given.has('dist-init-addr'));
  assert.equal(resolveFlag('tensor-parallel-size').name, 'tp-size');
  assert.equal(resolveFlag('tp-si').name, 'tp-size');
});

test('parse errors name the flag', () => {
  assert.throws(() => parseServerArgs(['--port', 'abc']), /argument --port: invalid int value: 'abc'/);
  assert.throws(() => parseServerArgs(['--port']), /argument --port: expected one argument/);
  assert.throws(() => parseServerArgs(['--no-such-flag', '1']), /unrecognized arguments: --no-such-flag/);
  assert.throws(() => parseServerArgs(['--disable', '1']), /ambiguous option: --disable could match/);
  assert.throws(() => parseServerArgs(['--trust-remote-code=yes']), /ignored explicit argument/);
  assert.throws(() => parseServerArgs(['--schedule-policy', 'xyz']), /invalid choice: 'xyz'/);
  assert.throws(() => parseServerArgs(['--json-model-override-args', '[1]']), /expected a JSON object/);
  assert.throws(() => parseServerArgs(['positional']), InvalidRequestError);
});

test('flags whose feature is not built stop start-up with a message saying so', () => {
  const dir = checkpointDir();
  const cases: [string[], RegExp][] = [
    [['--speculative-algorithm', 'EAGLE3'], /speculative algorithm EAGLE3 .*EAGLE, NEXTN and STANDALONE are built.*not supported by tsglang yet/],
    [['--speculative-algorithm', 'NGRAM'], /speculative algorithm NGRAM/],
    [['--kv-cache-dtype', 'fp4_e2m1'], /KV cache dtype 'fp4_e2m1'/],
    [['--tp', '8', '--enable-prefill-cp', '--cp-strategy', 'zigzag'], /zigzag prefill context parallelism.*unavailable for DeepSeek V3\.2/],
    [['--pp-size', '2', '--dp', '2'], /pipeline parallelism with data parallelism \(--pp-size 2 with --dp-size 2\).*not supported by tsglang yet/],
    [['--pp-size', '2', '--disaggregation-mode', 'prefill'], /pipeline parallelism with PD disaggregation/],
    [['--quantization', 'modelopt_fp4'], /quantization 'modelopt_fp4'/],
  ];
  for (const [argv, re] of cases) {
    const p = parseServerArgs(['--model-path', dir, ...argv]);
    assert.throws(() => validateServerArgs(p.args, p.given, 2), (e: unknown) => e instanceof UnsupportedFeatureError && re.test(e.message), argv.join(' '));
  }
});

test('--pp-size: accepted with --pp-max-micro-batch-size and --pp-async-batch-depth; SGLang\'s PP asserts (mixed chunk, speculative decoding, nodes)', () => {
  const dir = checkpointDir();
  const ok = parseServerArgs(['--model-path', dir, '--tp', '2', '--pp-size', '2', '--pp-max-micro-batch-size', '4', '--pp-async-batch-depth', '1']);
  assert.doesNotThrow(() => validateServerArgs(ok.args, ok.given, 4));
  assert.deepEqual([ok.args.ppSize, ok.args.ppMaxMicroBatchSize, ok.args.ppAsyncBatchDepth], [2, 4, 1]);
  assert.equal(parseServerArgs(['--model-path', dir]).args.ppMaxMicroBatchSize, null);
  const cases: [string[], RegExp][] = [
    [['--pp-size', '2', '--enable-mixed-chunk'], /argument --enable-mixed-chunk: Pipeline parallelism is not compatible with mixed chunked prefill\./],
    [['--pp-size', '2', '--speculative-algorithm', 'EAGLE'], /PP \+ speculative decoding is only supported in disaggregated prefill mode/],
    [['--pp-size', '2', '--pp-max-micro-batch-size', '0'], /argument --pp-max-micro-batch-size: must be ≥ 1, got 0/],
    [['--pp-size', '3', '--nnodes', '2', '--node-rank', '0', '--dist-init-addr', '10.0.0.1:5000'], /tp_size must be divisible by number of nodes/],
    [['--pp-size', '3', '--tp', '2', '--nnodes', '2', '--node-rank', '0', '--dist-init-addr', '10.0.0.1:5000'], /--pp-size 3 stages do not map onto --nnodes 2/],
  ];
  for (const [argv, re] of cases) {
    const p = parseServerArgs(['--model-path', dir, ...argv]);
    assert.throws(() => validateServerArgs(p.args, p.given, 4), (e: unknown) => e instanceof InvalidRequestError && re.test(e.message), argv.join(' '));
  }
});

test('the DeepSeek-V3.2 page\'s CP + PP + EP + DP command validates: DeepEP sets ep_size = tp_size, dp 1 switches dp-attention off, prefill CP over each stage\'s tp ranks', () => {
  const dir = checkpointDir();
  const p = parseServerArgs(['--model-path', dir, '--nccl-init', '10.0.0.1:5000', '--nnodes', '2', '--node-rank', '1', '--tp', '8', '--pp-size', '2', '--dp', '1',
    '--enable-dp-attention', '--moe-a2a-backend', 'deepep', '--ep-size', '16', '--page-size', '128', '--chunked-prefill-size', '16384', '--attention-backend', 'dsa',
    '--dsa-prefill-backend', 'flashmla_sparse', '--dsa-decode-backend', 'flashmla_sparse', '--enable-prefill-cp', '--cp-strategy', 'interleave',
    '--cuda-graph-max-bs-decode', '128', '--max-running-requests', '128']);
  const { notices } = validateServerArgs(p.args, p.given, 2);
  assert.ok(notices.includes('DeepEP MoE is enabled. The expert parallel size is adjusted to be the same as the tensor parallel size[8].'), notices.join('\n'));
  assert.ok(notices.includes('--enable-dp-attention with dp_size = 1 is switched off (as SGLang does)'));
  assert.ok(notices.includes('Pipeline parallelism is incompatible with overlap schedule.'));
  const e = engineSlice(p.args, dir);
  assert.deepEqual([e.tpSize, e.ppSize, e.epSize, e.attnCpSize, e.enableDpAttention], [8, 2, 8, 8, false]);
  // without DeepEP an ep_size that does not divide tp_size is still refused
  const bad = parseServerArgs(['--model-path', dir, '--tp', '8', '--ep-size', '16']);
  assert.throws(() => validateServerArgs(bad.args, bad.given, 2), /argument --ep-size: must divide --tp-size/);
});

test('--tp / --ep are accepted (ranks are threads); ep_size must divide tp_size; more ranks than cores get a notice', () => {
  const dir = checkpointDir();
  const check = (argv: string[]) => {
    const p = parseServerArgs(['--model-path', dir, ...argv]);
    return validateServerArgs(p.args, p.given, 2);
  };
  assert.deepEqual(check(['--tp', '2']).notices, []);
  assert.match(check(['--tp', '8', '--ep', '8']).notices.join('\n'), /--tp-size 8 runs 8 rank threads on 2 CPU core\(s\)/);
  assert.throws(() => check(['--tp', '4', '--ep', '3']), /argument --ep-size: must divide --tp-size: tp_size % ep_size == 0 is required, got 4 % 3 = 1/);
});

test('prefill CP: the seed --tp 8 --enable-prefill-cp --attn-cp-size 8 --cp-strategy interleave is accepted; interleave with --dp > 1 and a cp that does not divide tp are refused', () => {
  const dir = checkpointDir();
  const check = (argv: string[]) => {
    const p = parseServerArgs(['--model-path', dir, ...argv]);
    return { ...validateServerArgs(p.args, p.given, 2), args: p.args };
  };
  assert.equal(check(['--tp', '8', '--enable-prefill-cp', '--attn-cp-size', '8', '--cp-strategy', 'interleave', '--max-running-requests', '32']).args.attnCpSize, 8);
  assert.throws(() => check(['--tp', '8', '--dp', '2', '--enable-dp-attention', '--enable-prefill-cp', '--cp-strategy', 'interleave']), /argument --cp-strategy: interleave prefill CP does not support --dp-size greater than 1/);
  assert.throws(() => check(['--tp', '8', '--attn-cp-size', '3', '--enable-prefill-cp']), /argument --attn-cp-size: must divide tp_size \/ dp_size/);
});

test('--dp (replicas) and --dp with --enable-dp-attention are accepted on one node; dp must divide tp; --load-balance-method', () => {
  const dir = checkpointDir();
  const check = (argv: string[]) => {
    const p = parseServerArgs(['--model-path', dir, ...argv]);
    return { ...validateServerArgs(p.args, p.given, 2), args: p.args };
  };
  assert.equal(check(['--tp-size', '8', '--dp-size', '8', '--enable-dp-attention']).args.dpSize, 8);
  assert.equal(check(['--dp', '2']).args.loadBalanceMethod, 'auto');
  assert.equal(check(['--dp', '2', '--load-balance-method', 'shortest_queue']).args.loadBalanceMethod, 'shortest_queue');
  assert.throws(() => parseServerArgs(['--load-balance-method', 'nope']), /invalid choice: 'nope'/);
  assert.throws(() => check(['--tp', '4', '--dp', '3', '--enable-dp-attention']), /--enable-dp-attention needs tp_size % dp_size == 0, got 4 % 3 = 1/);
  assert.match(check(['--tp', '8', '--dp', '1', '--enable-dp-attention']).notices.join('\n'), /switched off/);
});

test('value checks and accepted GPU knobs with notices', () => {
  const dir = checkpointDir();
  const bad = (argv: string[], re: RegExp) => {
    const p = parseServerArgs(argv);
    assert.throws(() => validateServerArgs(p.args, p.given), re);
  };
  bad(['--model-path', 'MiniMaxAI/MiniMax-M2.7'], /is not a local directory/);
  bad(['--mem-fraction-static', '1.5'], /mem-fraction-static: must be in \(0, 1\)/);
  bad(['--port', '70000'], /must be in \[0, 65535\]/);
  bad(['--chat-template', '/nonexistent.jinja'], /chat-template/);
  const p = parseServerArgs(['--model-path', dir, '--attention-backend', 'triton', '--cuda-graph-max-bs-decode', '128', '--tp', '1', '--enable-dp-attention', '--trust-remote-code', '--log-requests', '--enable-metrics', '--allow-auto-truncate', '--page-size', '64']);
  const { notices } = validateServerArgs(p.args, p.given);
  const gpu = gpuKnobsNotice(p.args, p.given) ?? '';
  assert.ok(gpu.includes('--attention-backend triton') && gpu.includes('--cuda-graph-max-bs-decode 128'), gpu);
  assert.ok(notices.some((n) => n.includes('dp_size = 1 is switched off')));
  const e = engineSlice(p.args, dir);
  assert.equal(e.pageSize, 64);
  assert.equal(e.allowAutoTruncate, true);
  assert.equal(e.modelPath, dir);
  const h = httpServerSlice(p.args, 'served');
  assert.equal(h.servedModelName, 'served');
  assert.equal(h.enableMetrics, true);
  assert.equal(h.logRequests, true);
});

test('--threads is an alias of --num-threads (issue #7) and reaches the engine slice', () => {
  for (const argv of [['--threads', '3'], ['--threads=3'], ['--num-threads', '3']]) {
    const p = parseServerArgs(['--model-path', '/m', ...argv]);
    assert.equal(p.args.numThreads, 3, argv.join(' '));
    assert.ok(p.given.has('num-threads'), 'given records the canonical name');
    assert.equal(engineSlice(p.args, '/m').numThreads, 3);
  }
  assert.equal(resolveFlag('threads').key, 'numThreads');
  assert.throws(() => parseServerArgs(['--threads', 'x']), (e: unknown) => e instanceof InvalidRequestError && /--num-threads: invalid int value: 'x'/.test(e.message));
  const zero = parseServerArgs(['--threads', '0']);
  assert.throws(() => validateServerArgs(zero.args, zero.given), (e: unknown) => e instanceof InvalidRequestError && /--num-threads: must be ≥ 1, got 0/.test(e.message));
  assert.match(serverArgsHelp(), /--num-threads, --threads INT/);
});

test('SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD: read (and its NSA alias); a warning only when it exceeds index_topk', () => {
  assert.equal(readServerEnv({}).dsaPrefillDenseAttnKvLenThreshold, null);
  assert.equal(readServerEnv({ SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD: '8192' }).dsaPrefillDenseAttnKvLenThreshold, 8192);
  assert.equal(readServerEnv({ SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD: '0' }).dsaPrefillDenseAttnKvLenThreshold, 0);
  assert.equal(readServerEnv({ SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD: 'many' }).dsaPrefillDenseAttnKvLenThreshold, null);
  const env = readServerEnv({ SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD: '8192' });
  assert.match(dsaDenseThresholdNotice(env, 2048) ?? '', /=8192: .*top-2048 keys.*no effect/);
  assert.equal(dsaDenseThresholdNotice(env, 8192), null, 'threshold = index_topk: dense == top-k of all keys');
  assert.equal(dsaDenseThresholdNotice(env, undefined), null, 'not a DSA model');
  assert.equal(dsaDenseThresholdNotice(readServerEnv({}), 16), null);
});

test('the seed multi-node command parses and validates (--nnodes 2 --node-rank 1 --nccl-init-addr / --dist-init-addr); multi-node start-up itself is cli/multinode.ts', () => {
  for (const spell of ['--dist-init-addr', '--nccl-init-addr', '--nccl-init']) {
    const { args, given } = parseServerArgs(['--tp', '4', '--nnodes', '2', '--node-rank', '1', spell, '10.0.0.1:5000', '--dist-timeout', '60']);
    assert.equal(args.distInitAddr, '10.0.0.1:5000');
    assert.deepEqual([args.nnodes, args.nodeRank, args.distTimeout], [2, 1, 60]);
    const { notices } = validateServerArgs(args, given, 2);
    assert.ok(!notices.some((n) => /dist-init-addr/.test(n)), notices.join('\n'));
  }
});

test('every problem of a command line is reported in one message (issue 14: one recipe took six starts)', () => {
  const dir = checkpointDir();
  const { parsed, problems } = parseServerArgsCollecting([
    '--model-path', dir, '--no-such-flag', '1', '--port', 'abc', '--attention-backend', 'nope', '--also-unknown',
    '--pp-size', '2', '--dp', '2', '--page-size', '0', '--speculative-algorithm', 'EAGLE3',
  ]);
  const check = checkServerArgs(parsed.args, parsed.given, 2);
  const all = [...problems, ...check.problems].map((p) => p.message);
  assert.deepEqual(all.slice(0, 3), [
    'unrecognized arguments: --no-such-flag 1 --also-unknown',
    "argument --port: invalid int value: 'abc'",
    "argument --attention-backend: invalid choice: 'nope' (choose from 'triton', 'torch_native', 'flex_attention', 'dsa', 'nsa', 'dsv4', 'compressed', 'cutlass_mla', 'fa3', 'fa4', 'flashinfer', 'flashmla', 'trtllm_mla', 'cutedsl_mla', 'tokenspeed_mla', 'trtllm_mha', 'dual_chunk_flash_attn', 'aiter', 'wave', 'intel_amx', 'ascend', 'intel_xpu')",
  ]);
  assert.ok(all.includes('argument --page-size: must be ≥ 1, got 0'));
  for (const re of [/pipeline parallelism/, /speculative algorithm EAGLE3/]) assert.ok(all.some((m) => re.test(m)), `${re}`);
  // the throwing API lists them all too
  assert.throws(() => parseServerArgs(['--a-b-c', '--port', 'x']), (e: unknown) => e instanceof InvalidRequestError
    && /2 problems with the flags/.test(e.message) && /unrecognized arguments: --a-b-c/.test(e.message) && /--port: invalid int value/.test(e.message));
  const p = parseServerArgs(['--model-path', dir, '--speculative-algorithm', 'EAGLE3', '--pp-size', '2', '--dp', '2', '--disaggregation-mode', 'prefill']);
  assert.throws(() => validateServerArgs(p.args, p.given), (e: unknown) => e instanceof UnsupportedFeatureError
    && /speculative algorithm EAGLE3/.test(e.message) && /pipeline parallelism/.test(e.message));
});

test('GPU-only knobs: SGLang choices validated, all summarised in one warning line with the CPU replacement', () => {
  for (const [flag, bad] of [['--moe-runner-backend', 'x'], ['--dsa-prefill-backend', 'x'], ['--dsa-decode-backend', 'x'], ['--dsa-topk-backend', 'x'], ['--deepep-mode', 'x'], ['--moe-a2a-backend', 'x']]) {
    assert.throws(() => parseServerArgs([flag, bad]), /invalid choice: 'x'/, flag);
  }
  const p = parseServerArgs(['--attention-backend', 'dsa', '--dsa-prefill-backend', 'flashmla_sparse', '--nsa-decode-backend', 'flashmla_kv',
    '--moe-a2a-backend', 'deepep', '--deepep-mode', 'low_latency', '--moe-runner-backend', 'flashinfer_trtllm', '--cuda-graph-max-bs', '256',
    '--disable-cuda-graph']);
  assert.doesNotThrow(() => validateServerArgs(p.args, p.given));
  const line = gpuKnobsNotice(p.args, p.given, readServerEnv({ SGLANG_SET_CPU_AFFINITY: '1', SGLANG_DEEPEP_LL_COMBINE_SEND_NUM_SMS: '32' }).gpuEnv) ?? '';
  assert.ok(!line.includes('\n'));
  for (const item of ['--attention-backend dsa', '--dsa-prefill-backend flashmla_sparse', '--dsa-decode-backend flashmla_kv', '--moe-a2a-backend deepep',
    '--deepep-mode low_latency', '--moe-runner-backend flashinfer_trtllm', '--cuda-graph-max-bs 256', '--disable-cuda-graph',
    'SGLANG_DEEPEP_LL_COMBINE_SEND_NUM_SMS=32', 'SGLANG_SET_CPU_AFFINITY=1']) assert.ok(line.includes(item), item);
  assert.match(line, /tsglang uses instead: its own AVX2 CPU kernels/);
  assert.equal(gpuKnobsNotice(parseServerArgs([]).args, new Set()), null);
});

test('--model-path: a folder without config.json says so', () => {
  const empty = tempDir('tsglang-args-');
  const p = parseServerArgs(['--model-path', empty]);
  assert.throws(() => validateServerArgs(p.args, p.given), /argument --model-path: '.*' has no config.json/);
  assert.match(serverArgsHelp({ 'tool-call-parser': ['minimax-m2', 'qwen25'] }), /--tool-call-parser STR +tool-call parser \{minimax-m2,qwen25\}/);
});

test('speculative flags: SGLang names and defaults, EAGLE / NEXTN / STANDALONE accepted, value ranges checked', () => {
  const dir = checkpointDir();
  const { args, given } = parseServerArgs(['--model-path', dir, '--speculative-algorithm', 'NEXTN', '--speculative-num-steps', '2', '--speculative-eagle-topk', '1', '--speculative-num-draft-tokens', '3']);
  assert.equal(args.speculativeAlgorithm, 'EAGLE');
  assert.deepEqual([args.speculativeNumSteps, args.speculativeEagleTopk, args.speculativeNumDraftTokens], [2, 1, 3]);
  assert.equal(args.speculativeDraftModelPath, null);
  assert.deepEqual([args.speculativeAcceptThresholdSingle, args.speculativeAcceptThresholdAcc], [1, 1]);
  assert.deepEqual(checkServerArgs(args, given, 2).problems, []);
  const sa = parseServerArgs(['--model-path', dir, '--speculative-algorithm', 'STANDALONE', '--speculative-draft-model-path', dir]);
  assert.deepEqual(checkServerArgs(sa.args, sa.given, 2).problems, []);
  const bad = parseServerArgs(['--model-path', dir, '--speculative-algorithm', 'EAGLE', '--speculative-num-draft-tokens', '1', '--speculative-accept-threshold-acc', '1.5']);
  const msgs = checkServerArgs(bad.args, bad.given, 2).problems.map((p) => p.message);
  assert.ok(msgs.includes('argument --speculative-num-draft-tokens: must be ≥ 2, got 1'), msgs.join('\n'));
  assert.ok(msgs.some((m) => /--speculative-accept-threshold-acc: must be in \(0, 1\]/.test(m)));
});

test('across nodes: attention-DP groups and prefill CP are accepted; plain DP replicas are refused with SGLang\'s message', () => {
  const dir = checkpointDir();
  const check = (argv: string[]) => {
    const p = parseServerArgs(['--model-path', dir, '--nnodes', '2', '--dist-init-addr', '10.0.0.1:5000', ...argv]);
    return () => validateServerArgs(p.args, p.given, 2);
  };
  assert.doesNotThrow(check(['--tp', '16', '--dp', '2', '--enable-dp-attention']));
  assert.doesNotThrow(check(['--tp', '8', '--enable-prefill-cp', '--attn-cp-size', '8', '--cp-strategy', 'interleave']));
  assert.throws(check(['--tp', '4', '--dp', '2']), (e: unknown) => e instanceof InvalidRequestError && /argument --dp-size: multi-node data parallel is not supported unless dp attention!/.test(e.message));
});

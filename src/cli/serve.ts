// `tsglang serve [flags]` (= `sglang serve` / `python -m sglang.launch_server`): parses SGLang's flags, stops on
// features that are not built, resolves the model (the embedded tiny MiniMax-M2 when --model-path is absent),
// starts the engine (model worker thread, tokenizer worker thread) and the HTTP server, warms up, and prints
// SGLang's start-up lines to stderr.
import { availableParallelism } from 'node:os';
import { createServer as createNetServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, Logger, TsglangError, UnsupportedFeatureError } from '../common/index.js';
import type { LogLevel } from '../common/index.js';
import {
  argProblemsError, checkServerArgs, dsaDenseThresholdNotice, engineSlice, gpuKnobsNotice, httpServerSlice, parseServerArgsCollecting, readServerEnv,
  servedModelName, serverArgsHelp,
} from '../config/index.js';
import type { ArgProblem } from '../config/index.js';
import type { ServerArgs } from '../config/index.js';
import { Engine, type EngineApi, type GenerateOutput, type GenerateRequest } from '../engine/index.js';
import { REASONING_PARSER_NAMES, TOOL_CALL_PARSER_NAMES } from '../parsers/index.js';
import { BuilderChatPrompt, HttpServer, ParserChatOutput, PLAIN_CHAT_OUTPUT, ServerMetrics } from '../server/index.js';
import { ChatPromptBuilder } from '../tokenizer/index.js';
import { ensureEmbeddedModel } from './embedded_model.js';
import { dpNodesPlan, joinCluster, runFollowerNode } from './multinode.js';
import { exitProcessNow } from '../distributed/index.js';
import type { Cluster } from './multinode.js';

import { SGLANG_COMPAT_VERSION, tsglangVersion } from './main.js';

function snakeArgs(a: Readonly<ServerArgs>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(a)) out[k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = v;
  return out;
}

function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return `'${v}'`;
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/**
 * Entry of `tsglang serve`. Resolves when the server has shut down (SIGINT/SIGTERM).
 * @returns 0 after a clean shutdown, 2 on a flag error, 1 when start-up fails
 */
export async function run(argv: string[]): Promise<number> {
  // every problem of the command line is collected (parse errors, bad values, features not built, parser names) and
  // reported in one message, so one start shows everything to change
  const { parsed, problems } = parseServerArgsCollecting(argv);
  if (parsed.help) {
    process.stdout.write(serverArgsHelp({ 'tool-call-parser': TOOL_CALL_PARSER_NAMES, 'reasoning-parser': REASONING_PARSER_NAMES }));
    return 0;
  }
  const args = parsed.args;
  const check = checkServerArgs(args, parsed.given, availableParallelism());
  problems.push(...check.problems, ...parserNameProblems(args));
  if (problems.length > 0) {
    const usage = problems.some((p) => p.kind === 'invalid') ? 'usage: tsglang serve [--model-path DIR] [flags]  (tsglang serve --help lists them)\n' : '';
    process.stderr.write(`${usage}tsglang serve: error: ${argProblemsError(problems).message}\n`);
    return 2;
  }
  const logger = new Logger(args.logLevel as LogLevel);
  // Everything started so far, so that every exit path (signal, start-up failure, normal stop) tears it down:
  // a live engine worker thread or listening socket would keep the process alive after an error.
  let engine: Engine | null = null;
  let server: HttpServer | null = null;
  let cluster: Cluster | null = null;
  let ready = false;
  let stopRequested: ((sig: string) => void) | null = null;
  // `npm start` and a terminal both deliver one Ctrl-C (npm forwards the SIGINT it got to its child): the same signal
  // again within a second is that copy, not a user's second signal asking to leave at once
  let lastSignal: { sig: string; atMs: number } | null = null;
  const onSignal = (sig: 'SIGINT' | 'SIGTERM') => {
    const now = Date.now();
    if (lastSignal?.sig === sig && now - lastSignal.atMs < 1000) return;
    lastSignal = { sig, atMs: now };
    logger.info(`Received ${sig}, shutting down`);
    // At once, before anything else runs: requests arriving from now on (also on kept-alive connections) get a 503
    // with Connection: close; the ones under way are aborted by teardown and end with finish_reason abort.
    server?.beginDrain();
    if (ready && stopRequested) {
      stopRequested(sig);
      stopRequested = null;
      return;
    }
    // During start-up (or a second signal): nothing to drain; stop the engine and leave now.
    void teardown(engine, server, logger).finally(() => (cluster ? exitProcessNow : process.exit)(sig === 'SIGINT' ? 130 : 143));
  };
  // The ranks or the engine can no longer serve: in-flight requests have their error responses; give them a moment
  // to reach the clients, then stop everything and exit 1 (SGLang's scheduler death takes the server down too).
  let fatal = false;
  const onFatal = (err: Error) => {
    if (fatal) return;
    fatal = true;
    logger.error(`${err.message}; shutting the server down`);
    server?.beginDrain();
    setTimeout(() => void teardown(engine, server, logger).finally(() => exitProcessNow(1)), 1500).unref();
  };
  const onSigint = () => onSignal('SIGINT');
  const onSigterm = () => onSignal('SIGTERM');
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);
  try {
    for (const n of check.notices) logger.warning(n);
    const env = readServerEnv();
    const gpuNotice = gpuKnobsNotice(args, parsed.given, env.gpuEnv);
    if (gpuNotice !== null) logger.warning(gpuNotice);

    // 0. the port, before minutes of model loading (uvicorn's bind error, as SGLang would print it only after loading)
    // (a node > 0 serves no HTTP: its --port is not used)
    if (args.nnodes === 1 || args.nodeRank === 0) await assertPortFree(args.host, args.port);
    // 1. the model: --model-path, or the embedded tiny MiniMax-M2 (generated once into the cache)
    const modelPath = args.modelPath ?? ensureEmbeddedModel(env.cacheDir, logger);
    const served = servedModelName(args, modelPath);
    const shown = { ...args, modelPath, tokenizerPath: args.tokenizerPath ?? modelPath, servedModelName: served };
    logger.info(`server_args=ServerArgs(${Object.entries(snakeArgs(shown)).map(([k, v]) => `${k}=${pyRepr(v)}`).join(', ')})`);

    // 1b. --nnodes > 1: join the other nodes (cli/multinode.ts); a node > 0 runs its ranks only, no HTTP server
    if (args.nnodes > 1) {
      cluster = await joinCluster(args, modelPath, logger);
      if (args.nodeRank > 0) exitProcessNow(await runFollowerNode(args, modelPath, env, cluster, logger));
      cluster.bootstrap.onFatal(onFatal);
    }

    // 2. engine (worker thread): loads weights, sizes the KV pool; prompts are tokenized in a tokenizer worker thread
    // (multi-node DP-attention: the DP controller reaches the cores of groups led by other nodes over TCP)
    const nodesPart = cluster ? (cluster.dpNodes ? { dpNodes: await dpNodesPlan(args, cluster) } : { tpNodes: cluster.tpNodes }) : {};
    engine = await Engine.create({
      ...engineSlice(args, modelPath), kernelEnv: env, useWorkerThread: true, tokenizerWorker: true,
      ...(env.tokenizeTimeoutMs !== null ? { tokenizeTimeoutMs: env.tokenizeTimeoutMs } : {}),
      ...nodesPart,
    }, logger);
    engine.onFatal(onFatal);
    // 3. HTTP server
    const config = httpServerSlice(args, served);
    const modelConfig = JSON.parse(readFileSync(join(modelPath, 'config.json'), 'utf8')) as { model_type?: string; architectures?: string[]; index_topk?: unknown };
    const denseNotice = dsaDenseThresholdNotice(env, modelConfig.index_topk);
    if (denseNotice !== null) logger.warning(denseNotice);
    const builder = ChatPromptBuilder.fromModelDir(modelPath, { chatTemplate: args.chatTemplate, toolCallParser: args.toolCallParser });
    const chatOutput = args.reasoningParser || args.toolCallParser ? new ParserChatOutput(args.reasoningParser, args.toolCallParser) : PLAIN_CHAT_OUTPUT;
    server = new HttpServer({
      engine,
      tokenizer: engine.tokenizer,
      config,
      chatPrompt: new BuilderChatPrompt(builder),
      chatOutput,
      modelFacts: { modelType: modelConfig.model_type ?? null, architectures: modelConfig.architectures ?? [] },
      serverArgs: snakeArgs(shown),
      metrics: args.enableMetrics ? new ServerMetrics(served, engine) : null,
      logger: logger.child('[http]'),
      version: SGLANG_COMPAT_VERSION,
      tsglangVersion: tsglangVersion(),
      profilerDir: env.profilerDir,
    });
    const port = await server.listen(args.host, args.port);
    logger.info(`Started server process [${process.pid}]`);
    logger.info(`Uvicorn running on http://${args.host}:${port} (Press CTRL+C to quit)`);

    // 4. warmup (SGLang's _wait_and_warmup): one greedy 8-token request; if it fails the server does not start
    // (a PD decode server takes only requests whose KV a prefill server sends: it is not warmed up alone)
    if (!args.skipServerWarmup && args.disaggregationMode !== 'decode') {
      try {
        await runWarmup(engine, args.skipTokenizerInit);
      } catch (e) {
        logger.error(`Initialization failed. warmup error: ${(e as Error).message ?? String(e)}`);
        await teardown(engine, server, logger);
        return 1;
      }
    }
    // 5. run until SIGINT / SIGTERM
    await new Promise<void>((resolve) => {
      stopRequested = () => resolve();
      ready = true;
      server?.setReady(true);
      logger.info('The server is fired up and ready to roll!');
    });
    ready = false;
    cluster?.bootstrap.expectShutdown();
    await teardown(engine, server, logger); // under TP the engine sends every rank, on every node, the shutdown step
    if (cluster) {
      await cluster.bootstrap.announceShutdown().catch(() => undefined);
      await cluster.bootstrap.close();
      exitProcessNow(0);
    }
    return 0;
  } catch (err) {
    await teardown(engine, server, logger);
    await cluster?.bootstrap.close();
    const code = startupFailure(err);
    // Multi-node: a rank thread may still be blocked in Gloo on a node that is gone; leave without joining it.
    if (cluster) exitProcessNow(code);
    return code;
  } finally {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
  }
}

/** Prints why start-up failed and returns the exit code (2: a flag or an unsupported feature, 1: anything else). */
function startupFailure(err: unknown): number {
  if (err instanceof UnsupportedFeatureError || err instanceof InvalidRequestError) {
    process.stderr.write(`tsglang serve: error: ${err.message}\n`);
    return 2;
  }
  if (err instanceof TsglangError) {
    process.stderr.write(`tsglang serve: error: ${err.message}\n`);
    return 1;
  }
  // listen EADDRINUSE / ENOTFOUND / EACCES and other system errors: start-up failed.
  process.stderr.write(`tsglang serve: error: ${(err as Error).message ?? String(err)}\n`);
  return 1;
}

/**
 * Binds host:port once and releases it, so a busy port stops start-up before the model loads.
 * @throws Error `[Errno 98] error while attempting to bind on address ('HOST', PORT): address already in use` (uvicorn's words)
 */
async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', (e: NodeJS.ErrnoException) => {
      const why = e.code === 'EADDRINUSE' ? '[Errno 98] ' : '';
      reject(new Error(`${why}error while attempting to bind on address ('${host}', ${port}): ${e.code === 'EADDRINUSE' ? 'address already in use' : e.message}`));
    });
    probe.listen(port, host, () => probe.close(() => resolve()));
  });
}

/** --reasoning-parser / --tool-call-parser names that no parser has (the choices live in parsers/). */
function parserNameProblems(args: Readonly<ServerArgs>): ArgProblem[] {
  const out: ArgProblem[] = [];
  if (args.reasoningParser !== null && !REASONING_PARSER_NAMES.includes(args.reasoningParser)) {
    out.push({ kind: 'invalid', message: `argument --reasoning-parser: invalid choice: '${args.reasoningParser}' (choose from ${REASONING_PARSER_NAMES.join(', ')})` });
  }
  if (args.toolCallParser !== null && !TOOL_CALL_PARSER_NAMES.includes(args.toolCallParser)) {
    out.push({ kind: 'invalid', message: `argument --tool-call-parser: invalid choice: '${args.toolCallParser}' (choose from ${TOOL_CALL_PARSER_NAMES.join(', ')})` });
  }
  return out;
}

/**
 * SGLang's warmup request (http_server.py `_execute_server_warmup`): greedy, 8 new tokens, on the text "The capital
 * city of France is", or on input_ids [10, 11, 12] when the server has no tokenizer (--skip-tokenizer-init).
 */
export function warmupRequest(skipTokenizerInit: boolean): GenerateRequest {
  const samplingParams = { maxNewTokens: 8, temperature: 0 };
  return skipTokenizerInit
    ? { rid: 'WARMUP', inputIds: [10, 11, 12], samplingParams }
    : { rid: 'WARMUP', text: 'The capital city of France is', samplingParams };
}

/**
 * Runs the warmup request to its end. SGLang requires a 200 answer and kills the server otherwise; here a rejected
 * request or one that ends with an abort throws, and `tsglang serve` exits 1.
 * @throws Error saying why the warmup failed
 */
export async function runWarmup(engine: EngineApi, skipTokenizerInit: boolean): Promise<void> {
  let last: GenerateOutput | null = null;
  for await (const o of engine.generate(warmupRequest(skipTokenizerInit))) last = o;
  const f = last?.finishReason ?? null;
  if (f === null) throw new Error('the warmup request ended without a finish reason');
  if (f.type === 'abort') throw new Error(`the warmup request was aborted (status ${f.statusCode ?? 500}): ${f.message}`);
}

/** Milliseconds teardown waits for the HTTP server and the engine worker before giving up on them. */
const TEARDOWN_MS = 5_000;

/**
 * Stops whatever start-up got to: aborts requests, closes the HTTP server, shuts the engine worker down. Never
 * throws and never waits longer than {@link TEARDOWN_MS}, so an exit path cannot hang on it.
 */
async function teardown(engine: Engine | null, server: HttpServer | null, logger: Logger): Promise<void> {
  const work = (async () => {
    try {
      engine?.abortAll();
      if (server) await server.close().catch(() => {});
      if (engine) await engine.shutdown();
    } catch (e) {
      logger.warning(`shutdown: ${(e as Error).message}`);
    }
  })();
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>((resolve) => { timer = setTimeout(resolve, TEARDOWN_MS); timer.unref(); });
  await Promise.race([work, limit]);
  clearTimeout(timer);
}

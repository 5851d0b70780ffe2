// Engine: what the HTTP edge calls (EngineApi). Validates on the calling thread and tokenizes in a tokenizer worker
// thread (or on the calling thread for tests), runs scheduling, the model and detokenization in an EngineCore behind
// a transport (worker thread, or in-process for tests), and turns core outputs back into per-request
// AsyncIterables. Cancellation: AbortSignal or abort(rid) → the tokenization is dropped, or AbortReq → KV freed.
import {
  AsyncQueue,
  ContextLengthExceededError,
  Deferred,
  InternalError,
  InvalidRequestError,
  Logger,
  ModelLoadError,
  OutOfKVCacheError,
  RequestAbortedError,
  SILENT_LOGGER,
  TsglangError,
  UnsupportedFeatureError,
} from '../common/index.js';
import type { LogLevel } from '../common/index.js';
import { loadTokenizer, type Tokenizer } from '../tokenizer/index.js';
import type { AsyncEncoder } from './async_encoder.js';
import type { CoreModel, EngineCore } from './engine_core.js';
import type { CoreOutput, FromCoreMsg } from './messages.js';
import { TokenizerManager, type PreparedRequest } from './tokenizer_manager.js';
import { TokenizerWorker } from './tokenizer_worker.js';
import { DpControllerTransport } from './dp_controller.js';
import { BootstrapServer, loadUcxAddon } from '../disagg/index.js';
import { InProcessTransport, WorkerTransport, type CoreTransport } from './transport.js';
import type { EngineApi, EngineInfo, EngineLoad, EngineOptions, GenerateOutput, GenerateRequest, ProfileReply, ProfileRequest } from './types.js';

interface ChoiceState {
  readonly userRid: string;
  readonly index: number;
  readonly queue: AsyncQueue<GenerateOutput>;
  readonly group: RequestGroup;
  readonly arrivalMs: number;
}

interface RequestGroup {
  readonly internalRids: string[];
  remaining: number;
}

/**
 * A request between arrival and scheduling (tokenization, then the n > 1 prefix prefill). SGLang registers a rid only
 * after tokenization, so an /abort_request meanwhile is a no-op there and the request completes with 200; tsglang
 * remembers it and aborts the request as soon as it reaches the scheduler, so the client gets SGLang's answer to an
 * abort in the waiting queue (200, finish_reason abort, empty output) instead of an error status. The client's own
 * disconnect (its signal) drops the work at once instead.
 */
interface Preparing {
  /** Aborted when the client leaves: drops the tokenization. */
  readonly tokenizing: AbortController;
  /** /abort_request (or abort_all) asked for this rid while it was being prepared. */
  abortRequested: boolean;
  /** The n > 1 prefix prefill in flight, if any. */
  warmup: { readonly rid: string; readonly done: Deferred<void> } | null;
}

function errorFromKind(kind: string, message: string, param: string | null): TsglangError {
  switch (kind) {
    case 'invalid_request':
      return new InvalidRequestError(message, param);
    case 'context_length':
      return new ContextLengthExceededError(message);
    case 'capacity':
      return new OutOfKVCacheError(message);
    case 'model_load':
      return new ModelLoadError(message);
    case 'not_implemented':
      return new UnsupportedFeatureError(message);
    default:
      return new InternalError(message);
  }
}

/** The one output of a request aborted before it reached the scheduler (SGLang's "Abort in waiting queue"). */
function abortedInQueue(rid: string): GenerateOutput {
  return {
    rid, index: 0, text: '', outputIds: [], finished: true, finishReason: { type: 'abort', message: 'Abort in waiting queue' },
    promptTokens: 0, completionTokens: 0, cachedTokens: 0, numRetractions: 0,
  };
}

/** The serving engine. */
export class Engine implements EngineApi {
  readonly info: EngineInfo;
  /** The main thread's tokenizer (null with --skip-tokenizer-init). */
  readonly tokenizer: Tokenizer | null;
  private readonly transport: CoreTransport;
  private readonly tm: TokenizerManager;
  private readonly choices = new Map<string, ChoiceState>();
  private readonly groups = new Map<string, RequestGroup>();
  private readonly replies = new Map<number, Deferred<boolean | EngineLoad | ProfileReply>>();
  /** n > 1 prefix warm-up requests in flight. */
  private readonly warmups = new Map<string, Deferred<void>>();
  /** Requests being tokenized or prefilled for n > 1 (their rid is taken). */
  private readonly preparing = new Map<string, Preparing>();
  private nextReplyId = 1;
  private dead: Error | null = null;
  private readonly fatalHandlers: ((err: Error) => void)[] = [];

  private constructor(info: EngineInfo, tokenizer: Tokenizer | null, encoder: AsyncEncoder | null, transport: CoreTransport, options: EngineOptions) {
    this.info = info;
    this.tokenizer = tokenizer;
    this.transport = transport;
    this.tm = new TokenizerManager(tokenizer, info, options.allowAutoTruncate ?? false, options.randomSeed ?? 0, encoder);
    transport.onMessage((m) => this.onMessage(m));
    transport.onFatal((err) => this.failAll(err));
  }

  /**
   * Loads the tokenizer here (for the over-length pre-check, logprob texts and /v1/detokenize) and, unless
   * `tokenizerWorker` is false, again in a tokenizer worker thread that encodes prompts; loads the model in the core
   * (worker thread unless `useWorkerThread: false`), sizes the KV pool and prints its capacity (stderr).
   * @param injected test hook: a model to use instead of loading `modelPath` (in-process only)
   * @throws ModelLoadError, InvalidRequestError, OutOfKVCacheError, UnsupportedFeatureError from start-up
   */
  static async create(options: EngineOptions, logger?: Logger, injected?: CoreModel): Promise<Engine> {
    const log = logger ?? new Logger((options.logLevel ?? 'info') as LogLevel);
    // PD prefill: the bootstrap server runs here, on the HTTP side (SGLang starts it with the HTTP server); every
    // prefill group's ranks register with it (PUT /route) as their core starts
    const pd = options.disaggregation;
    // the UCX addon is loaded here, on the main thread, before any core: its loader's process-wide UCX settings
    // (UCX_MEM_EVENTS=no) reach the C environment only from the main thread (a worker thread's process.env is a copy)
    if (pd && pd.transferBackend !== 'tcp' && pd.transferBackend !== 'fake') loadUcxAddon();
    let bootstrap: BootstrapServer | null = null;
    if (pd?.mode === 'prefill') {
      bootstrap = new BootstrapServer();
      const port = await bootstrap.listen(pd.host, pd.bootstrapPort);
      log.info(`PD prefill: bootstrap server on ${pd.host}:${port}`);
    }
    try {
      const engine = await Engine.createCore(options, log, logger, injected);
      engine.bootstrap = bootstrap;
      return engine;
    } catch (e) {
      await bootstrap?.close();
      throw e;
    }
  }

  /** The PD prefill server's bootstrap server (null otherwise). */
  private bootstrap: BootstrapServer | null = null;

  private static async createCore(options: EngineOptions, log: Logger, logger: Logger | undefined, injected?: CoreModel): Promise<Engine> {
    const tokenizerPath = options.tokenizerPath ?? options.modelPath;
    const tokenizer = options.skipTokenizerInit ? null : loadTokenizer(tokenizerPath);
    const dpSize = options.dpSize ?? 1;
    // --dp-size > 1: one core per DP rank, each on its own thread, behind the DP controller (engine/dp_controller.ts)
    const useWorker = (options.useWorkerThread !== false || dpSize > 1) && !injected;
    // The tokenizer worker loads while the core starts (both off this thread).
    const encoderStart = tokenizer && (options.tokenizerWorker ?? useWorker)
      ? TokenizerWorker.start({
          tokenizerPath, timeoutMs: options.tokenizeTimeoutMs, heapLimitMb: options.tokenizerWorkerHeapMb, logger: log.child('[tokenizer]'),
        })
      : Promise.resolve(null);
    encoderStart.catch(() => {}); // awaited below; a core failure must not leave it unhandled
    let encoder: AsyncEncoder | null;
    if (!useWorker) {
      let t: InProcessTransport;
      try {
        t = new InProcessTransport(options, logger ?? SILENT_LOGGER, injected, tokenizer);
      } catch (e) {
        await encoderStart.then((enc) => enc?.close(), () => {});
        throw e;
      }
      try {
        await t.core.startDisaggregation();
        encoder = await encoderStart;
      } catch (e) {
        await t.close();
        throw e;
      }
      return new Engine(t.core.info, tokenizer, encoder, t, options);
    }
    const t = dpSize > 1 ? new DpControllerTransport(options, log) : new WorkerTransport(options);
    const ready = new Deferred<EngineInfo>();
    t.onMessage((m) => {
      if (m.type === 'ready') ready.resolve(m.info);
      else if (m.type === 'init_error') ready.reject(errorFromKind(m.kind, m.message, null));
    });
    t.onFatal((err) => ready.reject(new InternalError(`engine worker failed during start-up: ${err.message}`, { cause: err })));
    let info: EngineInfo;
    try {
      [info, encoder] = await Promise.all([ready.promise, encoderStart]);
    } catch (e) {
      await t.close().catch(() => {});
      await encoderStart.then((enc) => enc?.close(), () => {});
      throw e;
    }
    log.debug(`engine ready: ${info.architecture}, ${info.maxTotalNumTokens} KV tokens`);
    return new Engine(info, tokenizer, encoder, t, options);
  }

  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerateOutput> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const engine = this;
    return {
      [Symbol.asyncIterator]: () => engine.run(req, signal)[Symbol.asyncIterator](),
    };
  }

  private async *run(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerateOutput> {
    if (this.dead) throw new InternalError(`engine is down: ${this.dead.message}`);
    if (this.groups.has(req.rid) || this.preparing.has(req.rid)) throw new InvalidRequestError(`Duplicate request id ${req.rid}.`, 'rid');
    const nowMs = performance.now();
    // Tokenization (in the tokenizer worker) and the n > 1 prefix prefill may take a while: the rid is taken
    // meanwhile. The client's signal drops that work; abort(rid) (/abort_request) lets it finish and then aborts the
    // request before it runs, so the client gets its 200 with finish_reason abort (see Preparing).
    const prep: Preparing = { tokenizing: new AbortController(), abortRequested: false, warmup: null };
    const onEarlyAbort = (): void => {
      prep.tokenizing.abort();
      if (prep.warmup) {
        this.transport.send({ type: 'abort', rid: prep.warmup.rid });
        prep.warmup.done.reject(new RequestAbortedError('The request was aborted while its prompt was being prefilled.'));
      }
    };
    signal?.addEventListener('abort', onEarlyAbort, { once: true });
    if (signal?.aborted) prep.tokenizing.abort();
    this.preparing.set(req.rid, prep);
    let prepared: PreparedRequest | null = null;
    try {
      try {
        prepared = await this.tm.prepare(req, nowMs, prep.tokenizing.signal);
      } catch (e) {
        // abortAll (shutdown, abort_all) stopped its tokenization: it ends now, answered as aborted in the queue
        if (!(prep.abortRequested && prep.tokenizing.signal.aborted && !signal?.aborted)) throw e;
      }
      if (prepared === null) return yield abortedInQueue(req.rid);
      const dead = this.dead as Error | null; // the core may have died while this request was being tokenized
      if (dead) throw new InternalError(`engine is down: ${dead.message}`);
      if (prepared.choices.length > 1 && !this.info.disableRadixCache && !prep.abortRequested && !signal?.aborted && !req.bootstrap) {
        // n > 1: prefill the prompt once (max_new_tokens 0) so the n choices share it (SGLang _handle_batch_request).
        const w = prepared.choices[0];
        const wrid = `${req.rid}-prefill`;
        const d = new Deferred<void>();
        this.warmups.set(wrid, d);
        prep.warmup = { rid: wrid, done: d };
        this.transport.send({
          type: 'generate',
          req: { ...w.req, rid: wrid, stream: false, returnLogprob: false, logprobStartLen: -1, params: { ...w.req.params, maxNewTokens: 0 } },
          detok: w.detok,
        });
        try {
          await d.promise;
        } finally {
          this.warmups.delete(wrid);
          prep.warmup = null;
        }
      }
      if (signal?.aborted) throw new RequestAbortedError('The request was aborted before it was scheduled.');
    } finally {
      this.preparing.delete(req.rid);
      signal?.removeEventListener('abort', onEarlyAbort);
    }
    const queue = new AsyncQueue<GenerateOutput>();
    const group: RequestGroup = { internalRids: prepared.choices.map((c) => c.req.rid), remaining: prepared.choices.length };
    this.groups.set(req.rid, group);
    prepared.choices.forEach((c, index) => {
      this.choices.set(c.req.rid, { userRid: req.rid, index, queue, group, arrivalMs: nowMs });
      this.transport.send({ type: 'generate', req: c.req, detok: c.detok });
    });
    const onAbort = (): void => this.abort(req.rid);
    if (prep.abortRequested) onAbort(); // /abort_request came while it was being prepared: it ends now, in the queue
    if (signal) {
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    let done = false;
    try {
      for await (const out of queue) yield out;
      done = true;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (!done && group.remaining > 0) this.abort(req.rid);
    }
  }

  private onMessage(m: FromCoreMsg): void {
    switch (m.type) {
      case 'outputs':
        for (const o of m.outputs) this.deliver(o);
        return;
      case 'req_error': {
        this.warmups.get(m.rid)?.reject(errorFromKind(m.kind, m.message, m.param));
        const st = this.choices.get(m.rid);
        if (!st) return;
        this.endChoice(m.rid, st);
        st.queue.fail(errorFromKind(m.kind, m.message, m.param));
        return;
      }
      case 'reply': {
        const d = this.replies.get(m.id);
        this.replies.delete(m.id);
        d?.resolve(m.value);
        return;
      }
      case 'fatal':
        this.failAll(new InternalError(m.message));
        return;
      default:
        return;
    }
  }

  private deliver(o: CoreOutput): void {
    const w = this.warmups.get(o.rid);
    if (w) {
      if (o.finishReason) w.resolve();
      return;
    }
    const st = this.choices.get(o.rid);
    if (!st) return;
    const finished = o.finishReason !== null;
    const out: GenerateOutput = {
      rid: st.userRid,
      index: st.index,
      text: o.text,
      outputIds: o.outputIds,
      finished,
      finishReason: o.finishReason,
      promptTokens: o.promptTokens,
      completionTokens: o.completionTokens,
      cachedTokens: o.cachedTokens,
      numRetractions: o.numRetractions,
      ...(o.spec ? { spec: o.spec } : {}),
      ...(finished ? { e2eLatencyS: (performance.now() - st.arrivalMs) / 1000 } : {}),
      ...(o.outputTokenLogprobs
        ? {
            logprobs: {
              outputTokenLogprobs: o.outputTokenLogprobs,
              outputTopLogprobs: o.outputTopLogprobs ?? [],
              ...(o.inputTokenLogprobs ? { inputTokenLogprobs: o.inputTokenLogprobs, inputTopLogprobs: o.inputTopLogprobs ?? [] } : {}),
            },
          }
        : {}),
    };
    st.queue.push(out);
    if (finished) {
      this.endChoice(o.rid, st);
      if (st.group.remaining === 0) st.queue.close();
    }
  }

  private endChoice(internalRid: string, st: ChoiceState): void {
    if (!this.choices.delete(internalRid)) return;
    st.group.remaining--;
    if (st.group.remaining === 0) this.groups.delete(st.userRid);
  }

  async tokenize(prompts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]> {
    return this.tm.tokenize(prompts, addSpecialTokens, signal);
  }

  abort(rid: string): void {
    const p = this.preparing.get(rid);
    if (p) p.abortRequested = true;
    const g = this.groups.get(rid);
    if (!g) return;
    for (const r of g.internalRids) if (this.choices.has(r)) this.transport.send({ type: 'abort', rid: r });
  }

  /**
   * Aborts every request (SGLang abort_all): those running or queued in the core end with finish_reason abort; those
   * still being tokenized stop tokenizing and end at once the same way (so a shutdown never waits on a long prompt).
   */
  abortAll(): void {
    for (const p of this.preparing.values()) {
      p.abortRequested = true;
      p.tokenizing.abort();
    }
    this.transport.send({ type: 'abort_all' });
  }

  private request(type: 'flush' | 'load' | 'stop_profile', req?: undefined): Promise<boolean | EngineLoad | ProfileReply>;
  private request(type: 'start_profile', req: ProfileRequest): Promise<boolean | EngineLoad | ProfileReply>;
  private request(type: 'flush' | 'load' | 'start_profile' | 'stop_profile', req?: ProfileRequest): Promise<boolean | EngineLoad | ProfileReply> {
    if (this.dead) return Promise.reject(new InternalError(`engine is down: ${this.dead.message}`));
    const id = this.nextReplyId++;
    const d = new Deferred<boolean | EngineLoad | ProfileReply>();
    this.replies.set(id, d);
    this.transport.send(type === 'start_profile' ? { type, id, req: req! } : { type, id });
    return d.promise;
  }

  /** /start_profile: profiles the engine core thread (engine/profiler.ts). */
  async startProfile(req: ProfileRequest): Promise<ProfileReply> {
    return (await this.request('start_profile', req)) as ProfileReply;
  }

  /** /stop_profile: stops the profile and writes its files. */
  async stopProfile(): Promise<ProfileReply> {
    return (await this.request('stop_profile')) as ProfileReply;
  }

  async flushCache(): Promise<boolean> {
    return (await this.request('flush')) as boolean;
  }

  async getLoad(): Promise<EngineLoad> {
    return (await this.request('load')) as EngineLoad;
  }

  /** The in-process core (tests: scheduler statistics), or null when the core runs in a worker thread. */
  get inProcessCore(): EngineCore | null {
    return this.transport instanceof InProcessTransport ? this.transport.core : null;
  }

  /** Number of requests (choices) in flight on this side. */
  get numInFlight(): number {
    return this.choices.size;
  }

  /**
   * Registers a handler called once when the engine can no longer serve: its worker thread died, or the core stopped
   * on an unrecoverable model failure (TP ranks broken). Called at once if that already happened. The server exits
   * from it; requests under way have been failed before it runs.
   */
  onFatal(handler: (err: Error) => void): void {
    if (this.dead) handler(this.dead);
    else this.fatalHandlers.push(handler);
  }

  private failAll(err: Error): void {
    if (this.dead) return;
    this.dead = err;
    for (const [rid, st] of [...this.choices]) {
      this.endChoice(rid, st);
      st.queue.fail(new InternalError(`engine failed: ${err.message}`, { cause: err }));
    }
    for (const d of this.replies.values()) d.reject(err);
    this.replies.clear();
    for (const h of this.fatalHandlers.splice(0)) h(err);
  }

  async shutdown(): Promise<void> {
    for (const [rid, st] of [...this.choices]) {
      this.endChoice(rid, st);
      st.queue.push({
        rid: st.userRid,
        index: st.index,
        text: '',
        outputIds: [],
        finished: true,
        finishReason: { type: 'abort', message: 'The server is shutting down.', statusCode: 503 },
        promptTokens: 0,
        completionTokens: 0,
        cachedTokens: 0,
        numRetractions: 0,
      });
      if (st.group.remaining === 0) st.queue.close();
    }
    await this.tm.close();
    await this.transport.close();
    await this.bootstrap?.close();
  }
}

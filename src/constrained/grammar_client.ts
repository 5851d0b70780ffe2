// GrammarClient: the engine core's side of grammar-constrained decoding (SGLang's GrammarManager,
// python/sglang/srt/constrained/grammar_manager.py, with xgrammar in a worker thread instead of a thread pool).
// Per request it tracks: compiling → ready (first mask known) → per step "mask pending" after each accepted token →
// closed. The scheduler asks canSampleNow() before putting a constrained row into a step (false only while the worker
// is busy compiling another grammar and this row's mask is not back yet: the row sits the step out, the others run)
// and mask() when sampling (waits, normally microseconds, for a mask in flight). Reasoning requests (SGLang's
// ReasonerGrammarObject, reasoner_grammar_backend.py): no mask until the think-end token has been sampled.
import { Worker, MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import type { Logger } from '../common/index.js';
import type { GrammarKey } from './grammar_engine.js';
import { CTL_BUSY, CTL_SEQ, type FromGrammarMsg, type GrammarWorkerData, type ToGrammarMsg } from './protocol.js';

/** Construction options. */
export interface GrammarClientOptions {
  /** Directory of tokenizer.json. */
  readonly tokenizerPath: string;
  /** Logits row width (config vocab_size). */
  readonly vocabSize: number;
  /** EOS ids (the matchers' stop tokens). */
  readonly eosTokenIds: readonly number[];
  /** Id of the reasoning end token (`</think>`), or null when the tokenizer has none. */
  readonly thinkEndId: number | null;
  /** Called when a reply arrives while the core is idle (a grammar compiled, a mask came back): kick the loop. */
  readonly onWake: () => void;
  readonly logger?: Logger;
  /** JSON grammars allow any whitespace between tokens (SGLang default true). */
  readonly anyWhitespace?: boolean;
  /** Compiled grammars kept (default 128). */
  readonly maxCompiled?: number;
}

type Phase = 'compiling' | 'ready' | 'failed';

interface ReqState {
  phase: Phase;
  key: GrammarKey;
  /** The compiler's reason (failed at compile) or the matcher's error (failed later). */
  error: string | null;
  /** Failed during decoding (not at compile). */
  failedLate: boolean;
  /** Still inside the reasoning section (no mask yet). */
  thinking: boolean;
  /** Mask for the next token (null while one is in flight, or after termination). */
  mask: Int32Array | null;
  inFlight: boolean;
  terminated: boolean;
  queuedAtMs: number;
  readyAtMs: number;
}

/** The core's handle on the grammar worker. Single-threaded use (the core's thread). */
export class GrammarClient {
  private worker: Worker | null = null;
  private port: MessagePort | null = null;
  private readonly ctl = new Int32Array(new SharedArrayBuffer(16));
  private readonly reqs = new Map<string, ReqState>();
  private dead: string | null = null;
  private statsWaiters = new Map<number, (s: Record<string, number>) => void>();
  private nextStatsId = 1;
  /** Requests that entered the grammar path (cumulative; sglang:num_so_requests_total). */
  numSoRequests = 0;
  /** Milliseconds each request spent compiling in the grammar queue, in completion order (bench). */
  readonly queueWaitsMs: number[] = [];

  constructor(private readonly opts: GrammarClientOptions) {}

  private ensureWorker(): void {
    if (this.worker && !this.dead) return;
    this.dead = null;
    const { port1, port2 } = new MessageChannel();
    const data: GrammarWorkerData & { port: MessagePort } = {
      tokenizerPath: this.opts.tokenizerPath,
      vocabSize: this.opts.vocabSize,
      stopIds: [...this.opts.eosTokenIds],
      maxCompiled: this.opts.maxCompiled ?? 128,
      maxErrors: 1024,
      anyWhitespace: this.opts.anyWhitespace ?? true,
      control: this.ctl.buffer as SharedArrayBuffer,
      port: port2,
    };
    const w = new Worker(new URL('./grammar_worker_main.js', import.meta.url), { workerData: data, transferList: [port2] });
    w.unref();
    port1.unref();
    port1.on('message', (m: FromGrammarMsg) => {
      if (this.handle(m)) this.opts.onWake();
    });
    w.on('error', (e) => this.fail(`grammar worker crashed: ${e.message}`));
    w.on('exit', (code) => {
      if (this.worker === w) this.fail(`grammar worker exited (code ${code})`);
    });
    this.worker = w;
    this.port = port1;
  }

  private fail(message: string): void {
    this.dead = message;
    this.opts.logger?.error(message);
    for (const s of this.reqs.values()) {
      if (s.phase !== 'failed') {
        s.failedLate = s.phase === 'ready';
        s.phase = 'failed';
        s.error = message;
      }
    }
    this.worker = null;
    this.opts.onWake();
  }

  /** Applies one reply. @returns true when it changed what the scheduler can do */
  private handle(m: FromGrammarMsg): boolean {
    switch (m.t) {
      case 'ready':
        this.opts.logger?.info(`grammar backend xgrammar ready (TokenizerInfo + warm-up ${m.initMs.toFixed(0)} ms)`);
        return false;
      case 'init_error':
        this.fail(`grammar backend failed to start: ${m.message}`);
        return true;
      case 'opened': {
        const s = this.reqs.get(m.rid);
        if (!s || s.phase !== 'compiling') return false;
        s.readyAtMs = performance.now();
        this.queueWaitsMs.push(s.readyAtMs - s.queuedAtMs);
        if (this.queueWaitsMs.length > 100000) this.queueWaitsMs.splice(0, 50000);
        if (m.error !== null) {
          s.phase = 'failed';
          s.error = m.error;
        } else {
          s.phase = 'ready';
          s.mask = m.mask;
        }
        return true;
      }
      case 'mask': {
        const s = this.reqs.get(m.rid);
        if (!s || !s.inFlight) return false;
        s.inFlight = false;
        if (m.error !== null) {
          s.phase = 'failed';
          s.failedLate = true;
          s.error = m.error;
        } else {
          s.mask = m.mask;
          if (m.mask === null) s.terminated = true;
        }
        return true;
      }
      case 'stats': {
        const w = this.statsWaiters.get(m.id);
        this.statsWaiters.delete(m.id);
        w?.(m.stats);
        return false;
      }
    }
  }

  private post(m: ToGrammarMsg): void {
    this.ensureWorker();
    this.port!.postMessage(m);
  }

  /** Applies every reply already delivered to the port (synchronously). */
  private drain(): void {
    if (!this.port) return;
    for (let r = receiveMessageOnPort(this.port); r; r = receiveMessageOnPort(this.port)) this.handle(r.message as FromGrammarMsg);
  }

  /**
   * Starts compiling (or reuses) the grammar of a request; it waits in the grammar queue until `phase` is ready.
   * @param requireReasoning the constraint starts after the think-end token (reasoning parser on, thinking enabled)
   */
  open(rid: string, key: GrammarKey, requireReasoning: boolean): void {
    this.numSoRequests++;
    const thinking = requireReasoning && this.opts.thinkEndId !== null;
    this.reqs.set(rid, { phase: 'compiling', key, error: null, failedLate: false, thinking, mask: null, inFlight: false, terminated: false, queuedAtMs: performance.now(), readyAtMs: 0 });
    this.post({ t: 'open', rid, key });
  }

  /** compiling / ready / failed (with error()) for a request opened here; null for an unknown rid. */
  phase(rid: string): Phase | null {
    const s = this.reqs.get(rid);
    if (!s) return null;
    if (s.phase !== 'failed') this.drain();
    return s.phase;
  }

  /** The reason of a failed request: the compiler's reason or the matcher's error. */
  error(rid: string): { message: string; atCompile: boolean } | null {
    const s = this.reqs.get(rid);
    return s && s.phase === 'failed' ? { message: s.error ?? 'grammar failed', atCompile: !s.failedLate } : null;
  }

  /**
   * True when a ready request can be sampled this step without stalling it: its mask is here (or not needed while
   * thinking), or in flight while the worker is not compiling (it arrives within a round trip).
   */
  canSampleNow(rid: string): boolean {
    const s = this.reqs.get(rid);
    if (!s || s.phase !== 'ready') return true;
    if (!s.inFlight || s.thinking) return true;
    this.drain();
    return !s.inFlight || Atomics.load(this.ctl, CTL_BUSY) === 0;
  }

  /**
   * The vocab mask for the request's next token ([ceil(vocabSize / 32)] i32, bit set = allowed), waiting for one in
   * flight; null when the request is unconstrained this step (thinking, terminated, unknown or failed).
   */
  mask(rid: string): Int32Array | null {
    const s = this.reqs.get(rid);
    if (!s || s.phase !== 'ready' || s.thinking) return null;
    while (s.inFlight && !this.dead) {
      const seq = Atomics.load(this.ctl, CTL_SEQ);
      this.drain();
      if (!s.inFlight) break;
      Atomics.wait(this.ctl, CTL_SEQ, seq, 1000);
    }
    if (s.phase !== 'ready') return null;
    return s.mask;
  }

  /**
   * Advances a request's grammar by its sampled token (the next mask is computed in the worker meanwhile).
   * @returns true when the grammar has terminated with this token (a stop token the grammar allowed)
   */
  accept(rid: string, token: number): boolean {
    const s = this.reqs.get(rid);
    if (!s || s.phase !== 'ready') return false;
    if (s.thinking) {
      if (token === this.opts.thinkEndId) s.thinking = false;
      return false;
    }
    s.inFlight = true;
    s.mask = null;
    this.post({ t: 'accept', rid, token });
    return this.opts.eosTokenIds.includes(token);
  }

  /** Forgets a request and frees its matcher. */
  close(rid: string): void {
    if (!this.reqs.delete(rid)) return;
    if (this.worker && !this.dead) this.post({ t: 'close', rid });
  }

  /** Requests currently compiling (sglang:num_grammar_queue_reqs is the scheduler's queue length). */
  get numCompiling(): number {
    let n = 0;
    for (const s of this.reqs.values()) if (s.phase === 'compiling') n++;
    return n;
  }

  /** The worker's counters (compiled, errors, matchers, heapBytes, compiles, mainRebuilds); {} when not started. */
  stats(): Promise<Record<string, number>> {
    if (!this.worker || this.dead) return Promise.resolve({});
    const id = this.nextStatsId++;
    return new Promise((resolve) => {
      this.statsWaiters.set(id, resolve);
      this.post({ t: 'stats', id });
    });
  }

  /** Stops the worker (pending requests fail). */
  async shutdown(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.port?.close();
    this.port = null;
    if (w) await w.terminate();
  }
}

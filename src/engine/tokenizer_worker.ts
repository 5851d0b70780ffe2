// TokenizerWorker: the main thread's end of a small pool of tokenizer worker threads (tokenizer_worker_main.ts).
// Requests wait in a FIFO queue here and go to a worker one at a time, so that when a worker dies (out of memory,
// past its time limit, or killed because its client left) it takes only its current request along: the worker is
// respawned and the queue carries on. Worker 0 takes only small inputs (≤ SMALL_INPUT_CHARS), so one slow input (a
// 500 KB single word tokenizes for seconds) never holds up the small prompts behind it: they keep their normal
// latency on worker 0 while the others work on it. The HTTP thread never runs the BPE, whatever the input.
import { Worker } from 'node:worker_threads';
import { Deferred, InternalError, InvalidRequestError, ModelLoadError, SILENT_LOGGER, type Logger } from '../common/index.js';
import { encodeAbortedError, encoderClosedError, type AsyncEncoder } from './async_encoder.js';
import type { FromTokenizerMsg, ToTokenizerMsg, TokenizerWorkerData } from './messages.js';

/**
 * Default V8 old-generation limit of the tokenizer worker, MB. The tokenizer itself takes ~100 MB of heap
 * (DeepSeek-V3's 129k-entry BPE; larger vocabularies a little more), and the largest text the over-length pre-check
 * lets through (context × the most bytes one token can stand for: ~21 MB for a 164k context at 128 bytes/token)
 * needs well under 1 GB when it is ordinary text (5 MB of English: 1.1M tokens in under 256 MB), so 2 GB leaves
 * twice that. A long single word costs far more (a 2 MB word exceeds 512 MB): that is what the limit stops, killing
 * only the worker instead of the server.
 */
export const TOKENIZER_WORKER_HEAP_MB = 2048;

/**
 * Default time one request may spend being tokenized in the worker, ms (the time it waits in the queue is not
 * counted). Ordinary text tokenizes at roughly 0.5–1 MB/s on one core, so the largest text the pre-check admits
 * (~21–25 MB) takes 25–45 s; a long single word tokenizes about twenty times slower (520 KB: ~10 s), which is what
 * the limit cuts short. `TSGLANG_TOKENIZE_TIMEOUT_S` overrides it for `tsglang serve` (config/readServerEnv).
 */
export const TOKENIZE_TIMEOUT_MS = 60_000;

/**
 * How long a request whose client left may keep the worker busy before the worker is killed and respawned, ms:
 * about what a respawn costs (loading a 129k-entry tokenizer.json takes ~1.5–2 s), so waiting longer would never
 * free the worker sooner.
 */
export const ABORT_GRACE_MS = 2_000;

/**
 * Inputs of at most this many UTF-16 units in total are "small" (ordinary text: a few ms to ~50 ms to tokenize):
 * worker 0 takes only those, so they never queue behind a large one.
 */
export const SMALL_INPUT_CHARS = 32_768;

/** Default number of tokenizer worker threads: one for small inputs only, one for any input (the second starts on first use). */
export const TOKENIZER_WORKERS = 2;

/** Options of {@link TokenizerWorker.start}. */
export interface TokenizerWorkerOptions {
  /** Directory holding tokenizer.json (the same one the main thread's tokenizer loads). */
  readonly tokenizerPath: string;
  /** The worker's V8 old-generation limit, MB (default {@link TOKENIZER_WORKER_HEAP_MB}). */
  readonly heapLimitMb?: number;
  /** Per-request time limit in the worker, ms (default {@link TOKENIZE_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** Grace before an aborted request's worker is killed, ms (default {@link ABORT_GRACE_MS}). */
  readonly abortGraceMs?: number;
  /** Where deaths and respawns are reported (default silent). */
  readonly logger?: Logger;
  /** Worker threads (default {@link TOKENIZER_WORKERS}; 1 = one FIFO worker for every input). */
  readonly numWorkers?: number;
}

interface Job {
  readonly id: number;
  readonly texts: readonly string[];
  readonly addSpecialTokens: boolean;
  readonly result: Deferred<number[][]>;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
  /** The promise is settled (an aborted job that a worker may still be busy with). */
  settled: boolean;
}

/** One worker thread and what it is doing. */
interface Slot {
  /** Position in the pool: 0 takes only small inputs (when the pool has more than one worker). */
  readonly index: number;
  readonly worker: Worker;
  /** Posted 'ready' (tokenizer loaded). */
  isReady: boolean;
  /** The job the worker is encoding, or null when idle. */
  job: Job | null;
  /** Time limit of `job` (timeout, or the grace after an abort). */
  timer: NodeJS.Timeout | null;
  /** performance.now() when `job` was dispatched, ms. */
  startedMs: number;
  /** The first error the worker emitted ('error' event), reported when it exits. */
  error: Error | null;
}

/** Total UTF-16 length of a job's texts (for log lines). */
function numChars(texts: readonly string[]): number {
  let n = 0;
  for (const t of texts) n += t.length;
  return n;
}

/**
 * Tokenizers in worker threads, each created with a heap limit, behind one FIFO queue. A worker runs one request at a
 * time; the others wait here (not in a worker's message queue), so a dead worker never loses them. Worker 0 starts
 * with the pool and takes only small inputs; the others start when a request finds no idle worker.
 */
export class TokenizerWorker implements AsyncEncoder {
  private readonly tokenizerPath: string;
  private readonly heapLimitMb: number;
  private readonly timeoutMs: number;
  private readonly abortGraceMs: number;
  private readonly logger: Logger;
  private readonly queue: Job[] = [];
  /** The pool; null where no worker is alive (never started, or dead and not yet needed again). */
  private readonly slots: (Slot | null)[];
  private nextId = 1;
  private closed = false;
  /** Settles when the first worker is ready (start()). */
  private readonly firstReady = new Deferred<void>();
  /** Number of workers started so far (1 + respawns); for tests and logs. */
  private numSpawnedWorkers = 0;

  private constructor(options: TokenizerWorkerOptions) {
    this.tokenizerPath = options.tokenizerPath;
    this.heapLimitMb = options.heapLimitMb ?? TOKENIZER_WORKER_HEAP_MB;
    this.timeoutMs = options.timeoutMs ?? TOKENIZE_TIMEOUT_MS;
    this.abortGraceMs = options.abortGraceMs ?? ABORT_GRACE_MS;
    this.logger = options.logger ?? SILENT_LOGGER;
    this.slots = new Array<Slot | null>(Math.max(1, Math.floor(options.numWorkers ?? TOKENIZER_WORKERS))).fill(null);
  }

  /**
   * Starts the worker and waits until its tokenizer is loaded (about as long as loading it on this thread).
   * @throws ModelLoadError when the worker cannot load the tokenizer; InternalError when it dies while loading
   */
  static async start(options: TokenizerWorkerOptions): Promise<TokenizerWorker> {
    const tw = new TokenizerWorker(options);
    tw.spawn(0);
    try {
      await tw.firstReady.promise;
    } catch (e) {
      await tw.close();
      throw e;
    }
    return tw;
  }

  /** Workers started so far: 1, plus one per respawn after a death. */
  get numSpawned(): number {
    return this.numSpawnedWorkers;
  }

  /**
   * Queues `texts` for the worker.
   * @throws (rejects with) InvalidRequestError when the input is past the limits (the worker ran out of memory or
   *   time on it, or the tokenizer threw), RequestAbortedError when `signal` aborts first, InternalError when the
   *   worker died for another reason or this encoder is closed
   */
  encode(texts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]> {
    if (this.closed) return Promise.reject(encoderClosedError());
    if (signal?.aborted) return Promise.reject(encodeAbortedError());
    const result = new Deferred<number[][]>();
    const job: Job = { id: this.nextId++, texts, addSpecialTokens, result, signal, onAbort: () => this.abortJob(job), settled: false };
    signal?.addEventListener('abort', job.onAbort, { once: true });
    this.queue.push(job);
    this.pump();
    return result.promise;
  }

  /** Rejects every request and stops the worker. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.firstReady.reject(encoderClosedError());
    this.firstReady.promise.catch(() => {});
    for (const job of this.queue.splice(0)) this.settle(job, encoderClosedError());
    const live = this.slots.filter((x): x is Slot => x !== null);
    this.slots.fill(null);
    for (const slot of live) {
      if (slot.timer) clearTimeout(slot.timer);
      if (slot.job) this.settle(slot.job, encoderClosedError());
    }
    await Promise.all(live.map((slot) => slot.worker.terminate()));
  }

  /** Whether worker `index` may take `job` (worker 0 of a pool: small inputs only). */
  private accepts(index: number, job: Job): boolean {
    return index > 0 || this.slots.length === 1 || numChars(job.texts) <= SMALL_INPUT_CHARS;
  }

  /** True when the slot at `slot.index` is still this worker (not killed, replaced or closed). */
  private isCurrent(slot: Slot): boolean {
    return this.slots[slot.index] === slot;
  }

  private spawn(index: number): Slot {
    const data: TokenizerWorkerData = { tokenizerPath: this.tokenizerPath };
    const worker = new Worker(new URL('./tokenizer_worker_main.js', import.meta.url), {
      workerData: data,
      resourceLimits: { maxOldGenerationSizeMb: this.heapLimitMb },
    });
    const slot: Slot = { index, worker, isReady: false, job: null, timer: null, startedMs: 0, error: null };
    this.slots[index] = slot;
    this.numSpawnedWorkers++;
    worker.on('message', (m: FromTokenizerMsg) => this.onMessage(slot, m));
    worker.on('error', (err) => { slot.error ??= err; });
    worker.on('exit', (code) => this.onExit(slot, code));
    return slot;
  }

  /**
   * Gives each idle, ready worker the first queued job it accepts; starts a worker for waiting jobs that no live
   * worker is free to take (worker 0 for a small one, another for any).
   */
  private pump(): void {
    if (this.closed) return;
    for (let i = 0; i < this.slots.length; i++) {
      const slot = this.slots[i];
      if (!slot || !slot.isReady || slot.job) continue;
      const qi = this.queue.findIndex((j) => this.accepts(i, j));
      if (qi < 0) continue;
      const [job] = this.queue.splice(qi, 1);
      slot.worker.ref();
      slot.job = job;
      slot.startedMs = performance.now();
      slot.timer = setTimeout(() => this.kill(slot, this.timeoutError()), this.timeoutMs);
      slot.worker.postMessage({ type: 'encode', id: job.id, texts: job.texts, addSpecialTokens: job.addSpecialTokens } satisfies ToTokenizerMsg);
    }
    // jobs left: start the workers that could take them (a starting worker counts as on its way)
    if (this.queue.length > 0) {
      for (let i = 0; i < this.slots.length; i++) {
        if (this.slots[i] === null && this.queue.some((j) => this.accepts(i, j))) this.spawn(i);
      }
    }
    for (const slot of this.slots) if (slot && slot.isReady && !slot.job) slot.worker.unref(); // idle: do not keep the process alive
  }

  private onMessage(slot: Slot, m: FromTokenizerMsg): void {
    if (!this.isCurrent(slot)) return;
    switch (m.type) {
      case 'ready':
        slot.isReady = true;
        if (slot.index === 0) this.firstReady.resolve();
        this.pump();
        return;
      case 'init_error':
        this.firstReady.reject(new ModelLoadError(`tokenizer worker: ${m.message}`, { file: this.tokenizerPath }));
        return; // the worker exits next (onExit)
      case 'encoded':
      case 'encode_error': {
        const job = slot.job;
        if (!job || job.id !== m.id) return;
        this.finishJob(slot);
        if (m.type === 'encoded') {
          this.settle(job, null, m.ids.map((a) => Array.from(a)));
        } else {
          this.settle(job, new InvalidRequestError(`The input could not be tokenized: ${m.message}`));
        }
        this.pump();
        return;
      }
      default:
        return;
    }
  }

  /** A worker exited on its own (out of memory, crash, failed start). */
  private onExit(slot: Slot, code: number): void {
    if (!this.isCurrent(slot)) return; // killed on purpose (kill() already moved on) or closed
    this.slots[slot.index] = null;
    const job = slot.job;
    this.finishJob(slot);
    const oom = (slot.error as { code?: string } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
    if (!slot.isReady) {
      // Died while loading the tokenizer: fail what waits (unless another worker is up to take it), and start again
      // only when a new request comes.
      const err = new InternalError(`tokenizer worker failed to start: ${slot.error?.message ?? `exit code ${code}`}`, { cause: slot.error });
      if (slot.index === 0) this.firstReady.reject(err);
      const others = this.slots.filter((x): x is Slot => x !== null && x.isReady);
      for (const j of [...this.queue]) {
        if (others.some((o) => this.accepts(o.index, j))) continue;
        this.queue.splice(this.queue.indexOf(j), 1);
        this.settle(j, err);
      }
      return;
    }
    if (job) {
      const err = oom
        ? new InvalidRequestError(`The input could not be tokenized within the server's limits (the tokenizer ran out of memory: ${this.heapLimitMb} MB).`)
        : new InternalError(`The tokenizer worker exited unexpectedly (exit code ${code}) while tokenizing this input.`, { cause: slot.error });
      this.logger.warning(`tokenizer worker ${oom ? `ran out of memory (${this.heapLimitMb} MB)` : `exited with code ${code}`} after ${((performance.now() - slot.startedMs) / 1000).toFixed(1)} s on a ${numChars(job.texts)}-character input; respawning`);
      this.settle(job, err);
    } else {
      this.logger.warning(`tokenizer worker exited with code ${code} while idle; respawning`);
    }
    this.spawn(slot.index);
    this.pump();
  }

  /**
   * Terminates a worker that is busy past its limit and moves on: its job (if still waiting) gets `reason`, a new
   * worker starts, and the queue continues on it.
   */
  private kill(slot: Slot, reason: Error | null): void {
    if (!this.isCurrent(slot)) return;
    this.slots[slot.index] = null;
    const job = slot.job;
    this.finishJob(slot);
    if (job) {
      this.logger.warning(`tokenizer worker stopped after ${((performance.now() - slot.startedMs) / 1000).toFixed(1)} s on a ${numChars(job.texts)}-character input (${job.settled ? 'its client left' : 'time limit'}); respawning`);
      if (reason) this.settle(job, reason);
    }
    void slot.worker.terminate();
    this.spawn(slot.index);
    this.pump();
  }

  private timeoutError(): InvalidRequestError {
    return new InvalidRequestError(`The input could not be tokenized within the server's limits (tokenization took longer than ${this.timeoutMs / 1000} s).`);
  }

  /** A job's signal aborted: drop it from the queue, or, when a worker is on it, give that worker a short grace. */
  private abortJob(job: Job): void {
    if (job.settled) return;
    const i = this.queue.indexOf(job);
    if (i >= 0) this.queue.splice(i, 1);
    this.settle(job, encodeAbortedError());
    const slot = this.slots.find((x) => x !== null && x.job === job) ?? null;
    if (slot) {
      if (slot.timer) clearTimeout(slot.timer);
      const left = this.timeoutMs - (performance.now() - slot.startedMs);
      slot.timer = setTimeout(() => this.kill(slot, null), Math.max(0, Math.min(this.abortGraceMs, left)));
    }
  }

  /** Clears a slot's job and timer. */
  private finishJob(slot: Slot): void {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.job = null;
  }

  /** Settles a job once: rejects with `err`, or resolves with `ids`. */
  private settle(job: Job, err: Error | null, ids?: number[][]): void {
    if (job.settled) return;
    job.settled = true;
    job.signal?.removeEventListener('abort', job.onAbort);
    if (err) job.result.reject(err);
    else job.result.resolve(ids as number[][]);
  }
}

// Transports between the Engine (main thread) and the EngineCore: a worker thread (serving) or the same thread
// (tests). Same messages either way; delivery is always asynchronous so behaviour does not depend on the choice.
import { Worker } from 'node:worker_threads';
import type { Logger } from '../common/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import { EngineCore, type CoreModel } from './engine_core.js';
import type { FromCoreMsg, ToCoreMsg } from './messages.js';
import type { EngineOptions } from './types.js';

/** The main thread's end of the channel. */
export interface CoreTransport {
  send(msg: ToCoreMsg): void;
  /** Registers the single message handler. */
  onMessage(handler: (msg: FromCoreMsg) => void): void;
  /** Registers a handler for a dead core (worker crash / exit). */
  onFatal(handler: (err: Error) => void): void;
  close(): Promise<void>;
}

/** Runs the core in a worker thread (engine/worker_main.ts); the model loads there. */
export class WorkerTransport implements CoreTransport {
  private readonly worker: Worker;
  private closing = false;

  constructor(options: EngineOptions) {
    this.worker = new Worker(new URL('./worker_main.js', import.meta.url), { workerData: { options } });
  }

  send(msg: ToCoreMsg): void {
    this.worker.postMessage(msg);
  }

  onMessage(handler: (msg: FromCoreMsg) => void): void {
    this.worker.on('message', handler);
  }

  onFatal(handler: (err: Error) => void): void {
    this.worker.on('error', handler);
    this.worker.on('exit', (code) => {
      if (!this.closing) handler(new Error(`engine worker exited with code ${code}`));
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    // Let the core handle the shutdown (under TP it sends every rank, on every node, the shutdown step) and leave on
    // its own; terminate only if it has not within the grace (a rank stuck in a collective would otherwise stay).
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.postMessage({ type: 'shutdown' } satisfies ToCoreMsg);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_GRACE_MS)))]);
    clearTimeout(timer);
    await this.worker.terminate();
  }
}

/** How long close() lets the engine worker leave by itself before terminating it. */
const SHUTDOWN_GRACE_MS = 3000;

/** Runs the core on this thread (tests); messages are delivered on later macrotasks in both directions. */
export class InProcessTransport implements CoreTransport {
  readonly core: EngineCore;
  private handler: (msg: FromCoreMsg) => void = () => {};

  /**
   * @throws whatever EngineCore.create throws (model load, memory plan)
   */
  constructor(options: EngineOptions, logger: Logger, injected?: CoreModel, tokenizer?: Tokenizer | null) {
    this.core = EngineCore.create(options, (m) => setImmediate(() => this.handler(m)), logger, injected, tokenizer);
  }

  send(msg: ToCoreMsg): void {
    setImmediate(() => this.core.handle(msg));
  }

  onMessage(handler: (msg: FromCoreMsg) => void): void {
    this.handler = handler;
  }

  onFatal(_handler: (err: Error) => void): void {}

  async close(): Promise<void> {
    this.core.handle({ type: 'shutdown' });
  }
}

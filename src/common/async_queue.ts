// AsyncQueue<T>: a push/pull queue consumed as an AsyncIterable, used for streaming outputs and IPC.

/** A promise with its resolve/reject exposed. */
export class Deferred<T> {
  readonly promise: Promise<T>;
  resolve!: (value: T) => void;
  reject!: (err: unknown) => void;
  constructor() {
    this.promise = new Promise<T>((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
  }
}

/**
 * Unbounded FIFO: producers `push`, then `close()` or `fail(err)`; one consumer iterates with `for await`.
 * Items pushed after close are dropped.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: Deferred<void> | null = null;
  private closed = false;
  private error: unknown = null;

  /** Appends an item (ignored once closed). */
  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.wake();
  }

  /** Ends the stream after the queued items. */
  close(): void {
    this.closed = true;
    this.wake();
  }

  /** Ends the stream with an error, thrown to the consumer after the queued items. */
  fail(err: unknown): void {
    this.error = err ?? new Error('queue failed');
    this.closed = true;
    this.wake();
  }

  /** True after `close()` or `fail()`: nothing more will be pushed (items already queued can still be read). */
  get isClosed(): boolean {
    return this.closed;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.resolve();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift() as T;
        continue;
      }
      if (this.closed) {
        if (this.error) throw this.error;
        return;
      }
      this.waiter = new Deferred<void>();
      await this.waiter.promise;
    }
  }
}

// Admission control of the router's generation routes (sgl-model-gateway core/token_bucket.rs and middleware.rs
// concurrency_limit_middleware; --max-concurrent-requests, --rate-limit-tokens-per-second, --queue-size,
// --queue-timeout-secs). A token bucket of capacity C refilled at R tokens/s (R defaults to C): each request takes one
// token and gives it back when its answer ends, so C bounds the requests in flight and R the admission rate. A request
// that finds no token waits in a FIFO queue of --queue-size places for at most --queue-timeout-secs; a full (or zero)
// queue answers 429 at once, a wait that times out answers 408 (both with an empty body, as SGLang).

/** Token bucket: capacity tokens, refilled continuously at `ratePerSec`; returned tokens never exceed the capacity. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  /** @param now clock, ms */
  constructor(readonly capacity: number, readonly ratePerSec: number, private readonly now: () => number = () => performance.now()) {
    this.tokens = capacity;
    this.last = now();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.capacity, this.tokens + ((t - this.last) / 1000) * this.ratePerSec);
    this.last = t;
  }

  /** Takes one token if there is one. */
  tryAcquire(): boolean {
    this.refill();
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    return false;
  }

  /** Gives one token back (capped at the capacity). */
  giveBack(): void {
    this.refill();
    this.tokens = Math.min(this.capacity, this.tokens + 1);
  }

  /** Milliseconds until the refill alone makes a token (Infinity without refill). */
  msUntilToken(): number {
    this.refill();
    if (this.tokens >= 1) return 0;
    return this.ratePerSec > 0 ? ((1 - this.tokens) / this.ratePerSec) * 1000 : Infinity;
  }

  /** Tokens available now (monitoring). */
  available(): number {
    this.refill();
    return this.tokens;
  }
}

/** The outcome of an admission: a release to call when the answer ends, or the status to answer with. */
export type Admission = { readonly ok: true; release(): void } | { readonly ok: false; readonly status: 408 | 429 };

interface Waiter {
  readonly resolve: (a: Admission) => void;
  readonly timer: NodeJS.Timeout;
}

/** Token bucket plus a bounded FIFO wait queue. */
export class AdmissionControl {
  private readonly queue: Waiter[] = [];
  private wakeTimer: NodeJS.Timeout | null = null;

  /**
   * @param bucket the shared token bucket
   * @param queueSize places in the wait queue (0: no queue)
   * @param queueTimeoutMs how long a request may wait
   */
  constructor(readonly bucket: TokenBucket, readonly queueSize: number, readonly queueTimeoutMs: number) {}

  /** Requests waiting for a token. */
  get queued(): number {
    return this.queue.length;
  }

  /**
   * Admits one request. @returns at once when a token is free (or 429 when none is and the queue is full); else after
   * a wait, with a token or a 408. `signal` aborting (the client left) ends the wait with a 408 and frees its place.
   */
  admit(signal?: AbortSignal): Promise<Admission> {
    if (this.queue.length === 0 && this.bucket.tryAcquire()) return Promise.resolve(this.granted());
    if (this.queue.length >= this.queueSize) return Promise.resolve({ ok: false, status: 429 });
    return new Promise<Admission>((resolve) => {
      const w: Waiter = {
        resolve,
        timer: setTimeout(() => this.drop(w, 408), this.queueTimeoutMs),
      };
      signal?.addEventListener('abort', () => this.drop(w, 408), { once: true });
      this.queue.push(w);
      this.schedule();
    });
  }

  /** Cancels every wait (shutdown): each waiter gets a 408. */
  close(): void {
    for (const w of [...this.queue]) this.drop(w, 408);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.wakeTimer = null;
  }

  private granted(): Admission {
    let done = false;
    return {
      ok: true,
      release: () => {
        if (done) return;
        done = true;
        this.bucket.giveBack();
        this.pump();
      },
    };
  }

  private drop(w: Waiter, status: 408): void {
    const i = this.queue.indexOf(w);
    if (i < 0) return;
    this.queue.splice(i, 1);
    clearTimeout(w.timer);
    w.resolve({ ok: false, status });
  }

  /** Hands free tokens to the waiters in order. */
  private pump(): void {
    while (this.queue.length > 0 && this.bucket.tryAcquire()) {
      const w = this.queue.shift()!;
      clearTimeout(w.timer);
      w.resolve(this.granted());
    }
    this.schedule();
  }

  /** With a refill rate, wakes up when the next token is made. */
  private schedule(): void {
    if (this.wakeTimer || this.queue.length === 0) return;
    const ms = this.bucket.msUntilToken();
    if (!Number.isFinite(ms)) return;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.pump();
    }, Math.max(1, Math.ceil(ms)));
  }
}

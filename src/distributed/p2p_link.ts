// Point-to-point links between pipeline stages (SGLang's PP `send_tensor_dict` / `recv_tensor_dict` with async
// isend, parallel_state.py P2PWork): a link carries whole messages (bytes) one way, in order, from one rank to one
// other rank. A send posts the message and returns, so the sender computes its next micro-batch while the receiver
// takes it; a receive blocks until the next message is there.
// - In one process (ranks are worker threads): a MessageChannel carries the bytes (the buffer is transferred, not
//   copied) and a small SharedArrayBuffer carries the wake-up counter and the link's state, so a blocked receiver
//   sleeps in Atomics.wait (a futex, as the shm collectives) and reads with receiveMessageOnPort, synchronously, with
//   its event loop never involved. Unbounded queue: a send never waits.
// - Across processes and nodes: a two-rank Gloo group (the addon's glooSendAsync / glooRecvBytes, gloo's
//   unbound-buffer send and receive); one message in flight per sender: a send first waits for the previous one.
// Faults: a link closed or aborted by either end (a rank that failed or exited) makes the other end's waiting receive
// throw DistributedError at once; a receive with a finite timeout throws when nothing arrives in time.
import { MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { DistributedError } from '../common/index.js';
import { loadGlooAddon, type GlooAddon, type GlooGroupSpec } from './gloo_communicator.js';

/** One direction between two ranks. Not thread-safe: one thread owns each end. */
export interface P2pLink {
  readonly name: string;
  /**
   * Posts `msg` (its buffer may be taken over: do not reuse it) and returns without waiting for the receiver.
   * @throws DistributedError when the link is broken
   */
  send(msg: Uint8Array): void;
  /**
   * Blocks until the next message arrives.
   * @param timeoutMs how long to wait (default the link's timeout; Infinity: an idle stage waiting for work)
   * @throws DistributedError on timeout or when the link is broken (the peer failed, exited or closed it)
   */
  recv(timeoutMs?: number): Uint8Array;
  /** Waits until every message sent was taken by the receiver (before a clean close). @throws DistributedError */
  flush(): void;
  /** Leaves the link; a peer blocked in recv throws. Idempotent. */
  close(): void;
}

/** The in-process end of a link (structured-clonable; its port must be in the worker's transferList). */
export interface LocalLinkEnd {
  readonly backend: 'port';
  readonly name: string;
  readonly side: 'send' | 'recv';
  readonly port: MessagePort;
  /** [0] message counter, [1] state (0 open, 1 closed, 2 aborted), [2] reason length, then the reason bytes. */
  readonly sab: SharedArrayBuffer;
  readonly timeoutMs: number;
}

/** The cross-process end of a link: a two-rank Gloo group, the sender rank 0 and the receiver rank 1. */
export interface GlooLinkEnd {
  readonly backend: 'gloo';
  readonly name: string;
  readonly side: 'send' | 'recv';
  readonly spec: Omit<GlooGroupSpec, 'rank'>;
  /** Who is at the other end ("PP stage 1 TP rank 0 (rank 2) on node 1"): errors name it. */
  readonly peer?: string;
}

/** Either end of a link, as plain data (give each rank its end in workerData). */
export type LinkEnd = LocalLinkEnd | GlooLinkEnd;

const REASON_BYTES = 512;
const HEADER_WORDS = 3;
const OPEN = 0;
const CLOSED = 1;
const ABORTED = 2;

/** A new in-process link: its two ends (give `send` to the sending rank's thread, `recv` to the receiver's). */
export function createLocalLink(name: string, timeoutMs = 1_800_000): { send: LocalLinkEnd; recv: LocalLinkEnd } {
  const { port1, port2 } = new MessageChannel();
  const sab = new SharedArrayBuffer(HEADER_WORDS * 4 + REASON_BYTES);
  return { send: { backend: 'port', name, side: 'send', port: port1, sab, timeoutMs }, recv: { backend: 'port', name, side: 'recv', port: port2, sab, timeoutMs } };
}

/** Marks the link broken (first reason wins) and wakes a receiver blocked on it. */
function breakLocal(sab: SharedArrayBuffer, state: number, reason: string): void {
  const ctl = new Int32Array(sab, 0, HEADER_WORDS);
  if (Atomics.compareExchange(ctl, 1, OPEN, state) === OPEN) {
    const bytes = new TextEncoder().encode(reason).subarray(0, REASON_BYTES);
    new Uint8Array(sab, HEADER_WORDS * 4, REASON_BYTES).set(bytes);
    Atomics.store(ctl, 2, bytes.length);
  }
  Atomics.add(ctl, 0, 1);
  Atomics.notify(ctl, 0);
}

/** Breaks an in-process link from any thread (a rank that failed or exited): both ends throw from then on. */
export function abortLocalLink(end: LocalLinkEnd, reason: string): void {
  breakLocal(end.sab, ABORTED, reason);
}

function nativeMs(t: number): number {
  return Number.isFinite(t) ? Math.max(0, Math.round(t)) : -1;
}

class LocalLink implements P2pLink {
  readonly name: string;
  private readonly ctl: Int32Array;
  private closed = false;

  constructor(private readonly end: LocalLinkEnd) {
    this.name = end.name;
    this.ctl = new Int32Array(end.sab, 0, HEADER_WORDS);
  }

  private why(): string {
    const n = Atomics.load(this.ctl, 2);
    const reason = new TextDecoder().decode(new Uint8Array(this.end.sab, HEADER_WORDS * 4, n).slice());
    return `link '${this.name}' is ${Atomics.load(this.ctl, 1) === CLOSED ? 'closed' : 'broken'}${reason ? ` (${reason})` : ''}`;
  }

  send(msg: Uint8Array): void {
    if (this.end.side !== 'send') throw new DistributedError(`link '${this.name}': send on the receiving end`);
    if (this.closed || Atomics.load(this.ctl, 1) !== OPEN) throw new DistributedError(this.why());
    const whole = msg.byteOffset === 0 && msg.byteLength === msg.buffer.byteLength && msg.buffer instanceof ArrayBuffer;
    const out = whole ? msg : msg.slice();
    this.end.port.postMessage(out, [out.buffer as ArrayBuffer]);
    Atomics.add(this.ctl, 0, 1);
    Atomics.notify(this.ctl, 0);
  }

  recv(timeoutMs = this.end.timeoutMs): Uint8Array {
    if (this.end.side !== 'recv') throw new DistributedError(`link '${this.name}': recv on the sending end`);
    if (this.closed) throw new DistributedError(`link '${this.name}' is closed`);
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const seen = Atomics.load(this.ctl, 0);
      // messages posted before a close or an abort are still delivered (a shutdown message, then the close)
      const m = receiveMessageOnPort(this.end.port);
      if (m) return m.message as Uint8Array;
      if (Atomics.load(this.ctl, 1) !== OPEN) throw new DistributedError(this.why());
      const left = deadline - performance.now();
      if (left <= 0) throw new DistributedError(`link '${this.name}': no message within ${timeoutMs} ms`);
      Atomics.wait(this.ctl, 0, seen, Number.isFinite(left) ? left : undefined);
    }
  }

  flush(): void {
    // an in-process send is delivered when posted
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    breakLocal(this.end.sab, CLOSED, `the ${this.end.side === 'send' ? 'sender' : 'receiver'} left`);
    this.end.port.close();
  }
}

/** Slot of the first message (each message takes two: header and payload). Far from any slot gloo's collectives use. */
const FIRST_SLOT = 2 ** 40;

class GlooLink implements P2pLink {
  readonly name: string;
  private readonly addon: GlooAddon;
  private readonly h: ReturnType<GlooAddon['glooCreate']>;
  private readonly timeoutMs: number;
  private readonly ctx: string;
  /** " from/to <peer>" when the end names its peer, else ''. */
  private readonly who: string;
  private seq = 0;
  private closed = false;
  private readonly header = new Uint32Array(2);

  constructor(private readonly end: GlooLinkEnd) {
    const { addon, reason } = loadGlooAddon();
    this.name = end.name;
    this.who = end.peer ? ` ${end.side === 'send' ? 'to' : 'from'} ${end.peer}` : '';
    this.ctx = end.spec.context ? ` (${end.spec.context})` : '';
    if (!addon || typeof addon.glooSendAsync !== 'function') throw new DistributedError(`link '${end.name}': cross-process links unavailable: ${reason ?? 'the Gloo addon has no point-to-point functions (rebuild it: npm run build:native)'}`);
    this.addon = addon;
    this.timeoutMs = end.spec.timeoutMs;
    const rank = end.side === 'send' ? 0 : 1;
    try {
      this.h = addon.glooCreate(end.spec.storeHost, end.spec.storePort, end.spec.prefix, rank, 2, end.spec.bindHost, nativeMs(end.spec.timeoutMs));
    } catch (err) {
      throw new DistributedError(`link '${end.name}'${this.who}: could not connect through the TCP store at ${end.spec.storeHost}:${end.spec.storePort}: ${(err as Error).message}${this.ctx}`);
    }
  }

  private run<T>(op: string, fn: () => T): T {
    if (this.closed) throw new DistributedError(`link '${this.name}' is closed`);
    try {
      return fn();
    } catch (err) {
      throw new DistributedError(`link '${this.name}'${this.who}: ${op} failed: ${(err as Error).message}${this.ctx}`, { cause: err });
    }
  }

  send(msg: Uint8Array): void {
    const slot = FIRST_SLOT + 2 * this.seq++;
    this.header[0] = msg.byteLength % 2 ** 32;
    this.header[1] = Math.floor(msg.byteLength / 2 ** 32);
    this.run('send', () => this.addon.glooSendAsync(this.h, this.header, msg, 1, slot, nativeMs(this.timeoutMs)));
  }

  recv(timeoutMs = this.timeoutMs): Uint8Array {
    const slot = FIRST_SLOT + 2 * this.seq++;
    const hdr = new Uint32Array(2);
    this.run('receive', () => this.addon.glooRecvBytes(this.h, hdr, 0, slot, nativeMs(timeoutMs)));
    const out = new Uint8Array(hdr[0] + hdr[1] * 2 ** 32);
    if (out.length > 0) this.run('receive', () => this.addon.glooRecvBytes(this.h, out, 0, slot + 1, nativeMs(this.timeoutMs)));
    return out;
  }

  flush(): void {
    if (this.end.side === 'send') this.run('flush', () => this.addon.glooWaitSends(this.h, nativeMs(this.timeoutMs)));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.addon.glooClose(this.h);
  }
}

/**
 * Opens this rank's end of a link (a Gloo end connects, blocking until the peer has joined).
 * @throws DistributedError when the backend is unavailable or the peer does not join in time
 */
export function openLink(end: LinkEnd): P2pLink {
  return end.backend === 'gloo' ? new GlooLink(end) : new LocalLink(end);
}

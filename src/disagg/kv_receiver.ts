// The decode side of the `tcp` and `ucx` KV transfer backends (SGLang KVManager / KVReceiver): one connection per
// prefill group endpoint, rooms multiplexed on it. init() sends a room's destination (and, with `ucx`, reserves the
// room's slot in this side's UCX-mapped staging region, which the prefill side puts into; the region's worker is
// progressed on its own thread); each `kv` message hands the loop a chunk (token range) to write into the pool — the
// TCP payload, or a view of the staging slot; `done` carries the aux data (Success). A connection that closes fails its
// rooms; abort() tells the prefill side that this side gave up on a room. The staging slot of a room that did not
// succeed is held after release() until the prefill side answers `released` (its last put into it ended), or, when the
// connection is gone, for longer than a put may run: a put still landing in a slot handed to another room would
// corrupt that room's KV.
import net from 'node:net';
import { KVPoll, type KVPollState } from './kv_poll.js';
import { frame, FrameReader, type AuxData, type Destination, type Header } from './transfer_frames.js';
import { RangeAllocator, ucxStagingBytes, type UcxAddon, type UcxWorker } from './ucx_addon.js';

/** A chunk of a room's KV: the wire-layout rows of tokens [start, start + count). */
export interface KvChunk {
  readonly start: number;
  readonly count: number;
  readonly data: Uint8Array;
  /** Arrived by UCX put (in the staging region) rather than over the connection. */
  readonly viaUcx: boolean;
  /** The draft model's rows (speculative decoding), not the target's. */
  readonly draft?: boolean;
}

/** What the decode loop needs of a receiver (tcp/ucx here, fake_transfer.ts). */
export interface KVReceiverLike {
  readonly room: number;
  readonly error: string | null;
  readonly aux: AuxData | null;
  poll(): KVPollState;
  /** Chunks that arrived since the last call (the loop writes them into the pool). */
  takeChunks(): KvChunk[];
  fail(message: string): void;
}

/** What the decode loop needs of a manager. */
export interface DecodeKVManagerLike {
  readonly backend: 'tcp' | 'ucx' | 'fake';
  /** A receiver for `room` whose KV comes from the prefill endpoint `addr` (host:port). */
  createReceiver(addr: string, room: number): KVReceiverLike;
  /** Sends the room's destination: Bootstrapping → WaitingForInput. */
  init(r: KVReceiverLike, dst: Destination): void;
  /** Tells the prefill side this side gave up on the room (SGLang's abort notification) and fails the receiver. */
  abort(r: KVReceiverLike, message: string): void;
  release(room: number): void;
  close(): void;
}

/** One room's receiver. */
export class KVReceiver implements KVReceiverLike {
  state: KVPollState = KVPoll.Bootstrapping;
  error: string | null = null;
  aux: AuxData | null = null;
  /** The staging slot its UCX chunks land in. */
  slot: { offset: number; length: number } | null = null;
  /** The prefill side was told this side gave up on the room (a `fail` went out). */
  notified = false;
  /** Tokens expected, and received so far. */
  numTokens = 0;
  receivedTokens = 0;
  private chunks: KvChunk[] = [];
  constructor(readonly room: number, readonly addr: string) {}
  poll(): KVPollState {
    return this.state;
  }
  takeChunks(): KvChunk[] {
    const c = this.chunks;
    this.chunks = [];
    return c;
  }
  /** A chunk arrived (connection handler). */
  push(c: KvChunk): void {
    if (this.state === KVPoll.Failed || this.state === KVPoll.Success) return;
    this.chunks.push(c);
    if (!c.draft) this.receivedTokens += c.count;
    if (this.state === KVPoll.WaitingForInput) this.state = KVPoll.Transferring;
  }
  fail(message: string): void {
    if (this.state === KVPoll.Success || this.state === KVPoll.Failed) return;
    this.state = KVPoll.Failed;
    this.error = message;
  }
}

/** The decode group's side of the transfer connections. */
export class DecodeKVManager implements DecodeKVManagerLike {
  readonly backend: 'tcp' | 'ucx';
  private readonly conns = new Map<string, net.Socket>();
  private readonly receivers = new Map<number, KVReceiver>();
  /** Payload bytes received, and the chunks that came by UCX put. */
  bytesReceived = 0;
  ucxChunks = 0;
  /** Staging slots of released rooms that did not succeed, until the prefill side's `released` (or the grace timer). */
  private readonly held = new Map<number, { addr: string; offset: number; length: number; timer: NodeJS.Timeout | null }>();
  /** How long a slot is held once its connection is gone (longer than a put may run: ucxPut's 30 s timeout; tests shorten it). */
  static holdAfterCloseMs = 35_000;
  /** The UCX worker and its staging region (held here: a collected worker stops progressing), or null (tcp). */
  private readonly staging: { addon: UcxAddon; worker: UcxWorker; hello: Header; view: Uint8Array; ranges: RangeAllocator } | null = null;

  /**
   * @param onEvent called when a chunk, the aux data or a failure arrived (wakes the engine loop)
   * @param ucx the UCX addon (backend `ucx`: a staging region is mapped and progressed on its own thread), or null
   * @param ucxSettings settings of the UCX worker (ucxWorkerSettings: the pinned network device)
   * @throws Error from UCX when the worker or the region cannot be set up
   */
  constructor(private readonly onEvent: () => void, ucx: UcxAddon | null = null, stagingBytes = ucxStagingBytes(), ucxSettings: Record<string, string> = {}) {
    this.backend = ucx ? 'ucx' : 'tcp';
    if (ucx) {
      const worker = ucx.ucxCreateWorker(ucxSettings);
      const region = ucx.ucxMapRegion(worker, stagingBytes);
      ucx.ucxStartProgress(worker);
      const hello: Header = { type: 'hello', ucx: { address: ucx.ucxWorkerAddress(worker).toString('base64'), rkey: region.rkey.toString('base64'), base: region.address.toString() } };
      this.staging = { addon: ucx, worker, hello, view: new Uint8Array(region.buffer), ranges: new RangeAllocator(stagingBytes) };
    }
  }

  private connect(addr: string): net.Socket {
    const have = this.conns.get(addr);
    if (have && !have.destroyed) return have;
    const i = addr.lastIndexOf(':');
    const socket = net.connect({ host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(addr.slice(i + 1)) });
    socket.setNoDelay(true);
    if (this.staging) socket.write(frame(this.staging.hello));
    const reader = new FrameReader((h, payload) => {
      if (h.type === 'kv') {
        const r = this.receivers.get(h.room);
        if (!r) return;
        let data: Uint8Array;
        if (h.ucx) {
          // the rows are in the staging slot already (put + flush happened before this message)
          const bpt = r.slot && r.numTokens > 0 ? r.slot.length / r.numTokens : 0;
          if (!r.slot || !this.staging) {
            r.fail('a UCX chunk arrived for a room without a staging slot');
            this.onEvent();
            return;
          }
          data = this.staging.view.subarray(r.slot.offset + h.start * bpt, r.slot.offset + (h.start + h.count) * bpt);
          this.ucxChunks++;
        } else data = payload;
        this.bytesReceived += data.length;
        r.push({ start: h.start, count: h.count, data, viaUcx: h.ucx === true, ...(h.draft ? { draft: true } : {}) });
      } else if (h.type === 'done') {
        const r = this.receivers.get(h.aux.room);
        if (!r) return;
        r.aux = h.aux;
        if (r.receivedTokens !== r.numTokens) r.fail(`aux data arrived after ${r.receivedTokens} of ${r.numTokens} tokens' KV`);
        else if (r.state !== KVPoll.Failed) r.state = KVPoll.Success;
      } else if (h.type === 'fail') {
        this.receivers.get(h.room)?.fail(h.message);
      } else if (h.type === 'released') {
        this.freeHeld(h.room);
        return;
      }
      this.onEvent();
    });
    socket.on('data', (c: Buffer) => reader.push(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.conns.get(addr) === socket) this.conns.delete(addr);
      for (const r of this.receivers.values()) if (r.addr === addr) r.fail(`connection to prefill transfer endpoint ${addr} closed`);
      for (const [room, h] of this.held) if (h.addr === addr) this.holdAfterClose(room);
      this.onEvent();
    });
    this.conns.set(addr, socket);
    return socket;
  }

  createReceiver(addr: string, room: number): KVReceiver {
    const r = new KVReceiver(room, addr);
    this.receivers.set(room, r);
    return r;
  }

  init(rr: KVReceiverLike, dst: Destination): void {
    const r = rr as KVReceiver;
    const s = this.connect(r.addr);
    r.numTokens = dst.numTokens;
    const bytes = dst.numTokens * dst.bytesPerToken;
    const off = this.staging && bytes > 0 ? this.staging.ranges.alloc(bytes) : null;
    if (off !== null) r.slot = { offset: off, length: bytes };
    // a room that does not fit the staging region right now gets TCP payloads
    s.write(frame({ type: 'dst', dst: r.slot ? { ...dst, ucx: r.slot } : dst }));
    if (r.state === KVPoll.Bootstrapping) r.state = KVPoll.WaitingForInput;
  }

  abort(rr: KVReceiverLike, message: string): void {
    const r = rr as KVReceiver;
    const s = this.conns.get(r.addr);
    if (s && !s.destroyed && r.state !== KVPoll.Success) {
      s.write(frame({ type: 'fail', room: r.room, message }));
      r.notified = true;
    }
    r.fail(message);
  }

  /**
   * Forgets a room (call only after its chunks were written). Its staging slot is free again at once when the room
   * succeeded (every put was flushed before its `kv` message); else it is held until the prefill side answers that
   * no put into it is running (the prefill side is told, if it was not yet).
   */
  release(room: number): void {
    const r = this.receivers.get(room);
    this.receivers.delete(room);
    if (!r?.slot || !this.staging) return;
    if (r.state === KVPoll.Success) {
      this.staging.ranges.release(r.slot.offset, r.slot.length);
      return;
    }
    this.held.set(room, { addr: r.addr, offset: r.slot.offset, length: r.slot.length, timer: null });
    const s = this.conns.get(r.addr);
    if (!s || s.destroyed) this.holdAfterClose(room);
    else if (!r.notified) s.write(frame({ type: 'fail', room, message: r.error ?? 'released by the decode side' }));
  }

  /** Staging bytes free (held slots are not). */
  get stagingAvailable(): number {
    return this.staging?.ranges.available ?? 0;
  }

  private freeHeld(room: number): void {
    const h = this.held.get(room);
    if (!h || !this.staging) return;
    this.held.delete(room);
    if (h.timer) clearTimeout(h.timer);
    this.staging.ranges.release(h.offset, h.length);
  }

  /** The held slot's connection is gone: no answer will come; free it after a put's longest run. */
  private holdAfterClose(room: number): void {
    const h = this.held.get(room);
    if (!h || h.timer) return;
    h.timer = setTimeout(() => this.freeHeld(room), DecodeKVManager.holdAfterCloseMs);
    h.timer.unref();
  }

  /** Connections to `addr` are dropped and their rooms failed (a prefill server declared dead). */
  dropEndpoint(addr: string, message: string): void {
    for (const r of this.receivers.values()) if (r.addr === addr) r.fail(message);
    const s = this.conns.get(addr);
    this.conns.delete(addr);
    s?.destroy();
  }

  close(): void {
    for (const h of this.held.values()) if (h.timer) clearTimeout(h.timer);
    this.held.clear();
    for (const s of this.conns.values()) s.destroy();
    this.conns.clear();
    // (an addon built before ucxStopProgress existed lacks it: its thread then ends with the process)
    if (this.staging) this.staging.addon.ucxStopProgress?.(this.staging.worker);
  }
}

// The `tcp` and `ucx` KV transfer backends behind SGLang's KVManager / KVSender / KVReceiver shape
// (disaggregation/base/conn.py). The decode side connects to the prefill rank's transfer endpoint (found through the
// bootstrap server) and sends each room's destination (token count, bytes, pool layout); the prefill side sends the
// rows (gathered run by run from its pool) and then the aux data (first output token, its logprobs, the room); the
// decode side places them in its pool. The control messages always go over this TCP connection; the payload goes
// over it too (`tcp`), or, with `ucx`, as a one-sided UCX put into the decode side's UCX-mapped staging region
// (worker address and rkey sent in a `hello` at connection time, remote completion by flush, then the `done` message
// as the notification). A side without UCX makes its peer fall back to the TCP payload.
// Frames: [u32 header bytes][u32 payload bytes][JSON header][payload].
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { KVPoll, type KVPollState } from './kv_poll.js';
import { RangeAllocator, ucxStagingBytes, ucxWorkerSettings, type UcxAddon, type UcxWorker } from './ucx_addon.js';

/** What the prefill side sends with the KV (SGLang's aux buffer: first token, its logprob, the room check). */
export interface AuxData {
  readonly room: number;
  readonly firstTokenId: number;
  /** [logprob, id] of the first token and its top alternatives, when the request returns logprobs. */
  readonly outputTokenLogprob?: [number, number] | null;
  readonly outputTopLogprobs?: [number, number][] | null;
  /** Prompt tokens the prefill side found in its prefix cache. */
  readonly cachedTokens: number;
}

/** A decode rank's destination for one room. */
export interface Destination {
  readonly room: number;
  readonly numTokens: number;
  /** Layout fingerprint of the decode pool (kv_pages.ts layoutFingerprint). */
  readonly layout: string;
  /** Payload bytes expected. */
  readonly bytes: number;
  /** UCX: where in the decode side's staging region the payload goes (absent: TCP payload). */
  readonly ucx?: { readonly offset: number; readonly length: number };
}

type Header =
  | { type: 'hello'; ucx: { address: string; rkey: string; base: string } }
  | { type: 'dst'; dst: Destination }
  | { type: 'kv'; room: number; start: number; count: number; ucx?: boolean }
  | { type: 'done'; aux: AuxData }
  | { type: 'fail'; room: number; message: string };

/** A decode peer reachable by UCX puts (prefill side). */
interface UcxPeer { readonly addon: UcxAddon; readonly worker: UcxWorker; readonly ep: number; readonly rkey: Buffer; readonly base: bigint }

function frame(h: Header, payload?: Uint8Array): Buffer {
  const hb = Buffer.from(JSON.stringify(h));
  const pre = Buffer.allocUnsafe(8);
  pre.writeUInt32LE(hb.length, 0);
  pre.writeUInt32LE(payload?.length ?? 0, 4);
  return payload ? Buffer.concat([pre, hb, payload]) : Buffer.concat([pre, hb]);
}

/** Splits a byte stream into frames. */
class FrameReader {
  private buf: Buffer = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private partBytes = 0;
  private need = 8;
  constructor(private readonly onFrame: (h: Header, payload: Buffer) => void) {}
  push(chunk: Buffer): void {
    // chunks are only joined once a whole frame is there (a multi-MB payload arrives in many 64 KiB reads)
    this.parts.push(chunk);
    this.partBytes += chunk.length;
    if (this.buf.length + this.partBytes < this.need) return;
    this.buf = Buffer.concat([this.buf, ...this.parts]);
    this.parts = [];
    this.partBytes = 0;
    for (;;) {
      this.need = this.buf.length < 8 ? 8 : 8 + this.buf.readUInt32LE(0) + this.buf.readUInt32LE(4);
      if (this.buf.length < 8) return;
      const hl = this.buf.readUInt32LE(0);
      const pl = this.buf.readUInt32LE(4);
      if (this.buf.length < 8 + hl + pl) return;
      const h = JSON.parse(this.buf.subarray(8, 8 + hl).toString('utf8')) as Header;
      const payload = this.buf.subarray(8 + hl, 8 + hl + pl);
      this.buf = this.buf.subarray(8 + hl + pl);
      this.onFrame(h, payload);
    }
  }
}

/** Prefill side: one room's sender (SGLang KVSender). */
export class TcpKVSender {
  state: KVPollState = KVPoll.Bootstrapping;
  error: string | null = null;
  dst: Destination | null = null;
  socket: net.Socket | null = null;
  /** Set when the decode peer takes UCX puts. */
  ucx: UcxPeer | null = null;
  bytesSent = 0;
  /** How the payload went: 'tcp' or 'ucx' (after send). */
  via: 'tcp' | 'ucx' | null = null;
  /** @param onEvent called when the state changes on a socket event (wakes the engine loop) */
  constructor(readonly room: number, private readonly onEvent: () => void = () => undefined) {}

  /** SGLang KVSender.poll. */
  poll(): KVPollState {
    return this.state;
  }

  /**
   * Sends the rows (one payload per run of consecutive source locs is not needed: the receiver maps token i to its
   * own i-th loc) and the aux data; Success once the socket has taken every byte.
   * @param payload rows of every token, as gatherKv packs them
   */
  send(payload: Buffer, aux: AuxData): void {
    const s = this.socket;
    if (!s || this.state !== KVPoll.WaitingForInput) {
      this.fail(`no decode destination for room ${this.room}`);
      return;
    }
    this.state = KVPoll.Transferring;
    const dst = this.dst!;
    const finish = (): void => {
      s.write(frame({ type: 'done', aux }), (err) => {
        if (this.state !== KVPoll.Transferring) return;
        if (err) this.fail(err.message);
        else this.state = KVPoll.Success;
        this.onEvent();
      });
    };
    this.bytesSent += payload.length;
    const u = this.ucx;
    if (u && dst.ucx && dst.ucx.length === payload.length) {
      this.via = 'ucx';
      u.addon.ucxPut(u.worker, u.ep, u.rkey, u.base + BigInt(dst.ucx.offset), payload).then(() => {
        if (this.state !== KVPoll.Transferring) return;
        s.write(frame({ type: 'kv', room: this.room, start: 0, count: dst.numTokens, ucx: true }));
        finish();
      }, (err: Error) => {
        this.abort(`UCX put failed: ${err.message}`);
        this.onEvent();
      });
      return;
    }
    this.via = 'tcp';
    s.write(frame({ type: 'kv', room: this.room, start: 0, count: dst.numTokens }, payload));
    finish();
  }

  /** Marks the transfer failed and tells the decode side (best effort). */
  abort(message: string): void {
    if (this.socket && !this.socket.destroyed && this.state !== KVPoll.Success) this.socket.write(frame({ type: 'fail', room: this.room, message }));
    this.fail(message);
  }

  fail(message: string): void {
    if (this.state === KVPoll.Success || this.state === KVPoll.Failed) return;
    this.state = KVPoll.Failed;
    this.error = message;
  }
}

/** Prefill side KVManager: the transfer endpoint decode ranks connect to. */
export class TcpPrefillKVManager {
  private readonly senders = new Map<number, TcpKVSender>();
  /** Destinations that arrived before their request. */
  private readonly early = new Map<number, { dst: Destination; socket: net.Socket }>();
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private readonly peers = new Map<net.Socket, UcxPeer>();
  private worker: UcxWorker | null = null;
  readonly backend: 'tcp' | 'ucx';

  /**
   * @param layout this pool's layout fingerprint (a decode pool of another layout is refused)
   * @param onEvent called when a destination arrives or a transfer ends (wakes the engine loop)
   * @param ucx the UCX addon (backend `ucx`), or null (`tcp`)
   * @param ucxSettings settings of this side's UCX worker (ucxWorkerSettings: the pinned network device)
   */
  constructor(private readonly layout: string, private readonly onEvent: () => void = () => undefined, private readonly ucx: UcxAddon | null = null, private readonly ucxSettings: Record<string, string> = {}) {
    this.backend = ucx ? 'ucx' : 'tcp';
  }

  /** Starts the endpoint. @returns the bound port */
  listen(host: string): Promise<number> {
    const server = net.createServer((socket) => {
      socket.setNoDelay(true);
      this.sockets.add(socket);
      const reader = new FrameReader((h) => {
        if (h.type === 'hello') {
          if (!this.ucx) return; // a tcp prefill side: the decode side gets TCP payloads
          try {
            this.worker ??= this.ucx.ucxCreateWorker(this.ucxSettings);
            const ep = this.ucx.ucxConnect(this.worker, Buffer.from(h.ucx.address, 'base64'));
            this.peers.set(socket, { addon: this.ucx, worker: this.worker, ep, rkey: Buffer.from(h.ucx.rkey, 'base64'), base: BigInt(h.ucx.base) });
          } catch {
            // no UCX path to that peer: its payloads go over TCP
          }
          return;
        }
        if (h.type !== 'dst') return;
        const s = this.senders.get(h.dst.room);
        if (h.dst.layout !== this.layout) {
          socket.write(frame({ type: 'fail', room: h.dst.room, message: `KV layouts differ between prefill and decode (prefill ${this.layout.slice(0, 80)}..., decode ${h.dst.layout.slice(0, 80)}...): same checkpoint, --kv-cache-dtype and --tp needed on both sides` }));
          s?.fail('decode KV layout differs');
          return;
        }
        if (s) this.attach(s, h.dst, socket);
        else this.early.set(h.dst.room, { dst: h.dst, socket });
      });
      socket.on('data', (c: Buffer) => reader.push(c));
      const gone = (): void => {
        this.sockets.delete(socket);
        this.peers.delete(socket);
        for (const s of this.senders.values()) if (s.socket === socket) s.fail('decode connection closed');
        for (const [room, e] of this.early) if (e.socket === socket) this.early.delete(room);
        this.onEvent();
      };
      socket.on('close', gone);
      socket.on('error', () => undefined);
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  private attach(s: TcpKVSender, dst: Destination, socket: net.Socket): void {
    s.dst = dst;
    s.socket = socket;
    s.ucx = this.peers.get(socket) ?? null;
    if (s.state === KVPoll.Bootstrapping) s.state = KVPoll.WaitingForInput;
    this.onEvent();
  }

  /** A sender for one room (SGLang KVSender(room)). */
  createSender(room: number): TcpKVSender {
    const s = new TcpKVSender(room, this.onEvent);
    this.senders.set(room, s);
    const e = this.early.get(room);
    if (e) {
      this.early.delete(room);
      this.attach(s, e.dst, e.socket);
    }
    return s;
  }

  /** Forgets a room's sender. */
  release(room: number): void {
    this.senders.delete(room);
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const srv = this.server;
    this.server = null;
    return srv ? new Promise((r) => srv.close(() => r())) : Promise.resolve();
  }
}

/** Decode side: one room's receiver (SGLang KVReceiver). */
export class TcpKVReceiver {
  state: KVPollState = KVPoll.Bootstrapping;
  error: string | null = null;
  aux: AuxData | null = null;
  payload: Buffer | null = null;
  /** The staging slot its UCX payload lands in. */
  slot: { offset: number; length: number } | null = null;
  constructor(readonly room: number, readonly addr: string) {}
  poll(): KVPollState {
    return this.state;
  }
  fail(message: string): void {
    if (this.state === KVPoll.Success || this.state === KVPoll.Failed) return;
    this.state = KVPoll.Failed;
    this.error = message;
  }
}

/** Decode side KVManager: one connection per prefill rank endpoint, rooms multiplexed on it. */
export class TcpDecodeKVManager {
  readonly backend: 'tcp' | 'ucx';
  private readonly conns = new Map<string, net.Socket>();
  private readonly receivers = new Map<number, TcpKVReceiver>();
  bytesReceived = 0;
  /** Payloads that arrived by UCX put. */
  ucxTransfers = 0;
  /** The UCX worker and its staging region (held here: a collected worker stops progressing), or null (tcp). */
  private readonly staging: { addon: UcxAddon; worker: UcxWorker; hello: Header; view: Uint8Array; ranges: RangeAllocator } | null = null;

  /**
   * @param onData called when a room's rows and aux arrived (the receiver is then Success), or with null on a failure
   * @param ucx the UCX addon (backend `ucx`: a staging region is mapped and progressed on its own thread), or null
   * @param ucxSettings settings of the UCX worker (ucxWorkerSettings: the pinned network device)
   * @throws Error from UCX when the worker or the region cannot be set up
   */
  constructor(private readonly onData: (r: TcpKVReceiver | null) => void, ucx: UcxAddon | null = null, stagingBytes = ucxStagingBytes(), ucxSettings: Record<string, string> = {}) {
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
    const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    if (this.staging) socket.write(frame(this.staging.hello));
    const pendingKv = new Map<number, Buffer>();
    const reader = new FrameReader((h, payload) => {
      if (h.type === 'kv') {
        const r0 = this.receivers.get(h.room);
        if (h.ucx && r0?.slot && this.staging) {
          // the payload is in the staging region already (put + flush happened before this message)
          const view = this.staging.view.subarray(r0.slot.offset, r0.slot.offset + r0.slot.length);
          pendingKv.set(h.room, Buffer.from(view));
          this.bytesReceived += view.length;
          this.ucxTransfers++;
        } else {
          pendingKv.set(h.room, Buffer.from(payload));
          this.bytesReceived += payload.length;
        }
        const r = this.receivers.get(h.room);
        if (r && r.state === KVPoll.WaitingForInput) r.state = KVPoll.Transferring;
      } else if (h.type === 'done') {
        const r = this.receivers.get(h.aux.room);
        if (!r) return;
        r.payload = pendingKv.get(h.aux.room) ?? null;
        pendingKv.delete(h.aux.room);
        r.aux = h.aux;
        if (!r.payload) r.fail('aux data arrived without KV');
        else {
          r.state = KVPoll.Success;
          this.onData(r);
        }
      } else if (h.type === 'fail') {
        this.receivers.get(h.room)?.fail(h.message);
        this.onData(null);
      }
    });
    socket.on('data', (c: Buffer) => reader.push(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.conns.get(addr) === socket) this.conns.delete(addr);
      for (const r of this.receivers.values()) if (r.addr === addr) r.fail(`connection to prefill transfer endpoint ${addr} closed`);
      this.onData(null);
    });
    this.conns.set(addr, socket);
    return socket;
  }

  /** A receiver for `room` whose KV comes from the prefill rank at `addr` (host:port). */
  createReceiver(addr: string, room: number): TcpKVReceiver {
    const r = new TcpKVReceiver(room, addr);
    this.receivers.set(room, r);
    return r;
  }

  /** Sends the destination of a receiver's room (SGLang KVReceiver.init): Bootstrapping → WaitingForInput. */
  init(r: TcpKVReceiver, dst: Destination): void {
    const s = this.connect(r.addr);
    const off = this.staging && dst.bytes > 0 ? this.staging.ranges.alloc(dst.bytes) : null;
    if (off !== null) r.slot = { offset: off, length: dst.bytes };
    // a room that does not fit the staging region right now gets a TCP payload
    s.write(frame({ type: 'dst', dst: r.slot ? { ...dst, ucx: r.slot } : dst }));
    if (r.state === KVPoll.Bootstrapping) r.state = KVPoll.WaitingForInput;
  }

  release(room: number): void {
    const r = this.receivers.get(room);
    if (r?.slot && this.staging) this.staging.ranges.release(r.slot.offset, r.slot.length);
    this.receivers.delete(room);
  }

  close(): void {
    for (const s of this.conns.values()) s.destroy();
    this.conns.clear();
    // (an addon built before ucxStopProgress existed lacks it: its thread then ends with the process)
    if (this.staging) this.staging.addon.ucxStopProgress?.(this.staging.worker);
  }
}

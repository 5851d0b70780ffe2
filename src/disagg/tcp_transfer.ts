// The `tcp` KV transfer backend behind SGLang's KVManager / KVSender / KVReceiver shape (disaggregation/base/conn.py):
// the decode side connects to the prefill rank's transfer endpoint (found through the bootstrap server), sends each
// room's destination (its KV locs and the pool layout); the prefill side writes the rows as runs of consecutive locs
// to that connection and then the aux data (first output token, its logprobs, the room); the decode side places them
// in its pool. Frames: [u32 header bytes][u32 payload bytes][JSON header][payload].
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { KVPoll, type KVPollState } from './kv_poll.js';

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
}

type Header = { type: 'dst'; dst: Destination } | { type: 'kv'; room: number; start: number; count: number } | { type: 'done'; aux: AuxData } | { type: 'fail'; room: number; message: string };

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
  bytesSent = 0;
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
    s.write(frame({ type: 'kv', room: this.room, start: 0, count: this.dst!.numTokens }, payload));
    this.bytesSent += payload.length;
    s.write(frame({ type: 'done', aux }), (err) => {
      if (this.state !== KVPoll.Transferring) return;
      if (err) this.fail(err.message);
      else this.state = KVPoll.Success;
      this.onEvent();
    });
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
  readonly backend = 'tcp';
  private readonly senders = new Map<number, TcpKVSender>();
  /** Destinations that arrived before their request. */
  private readonly early = new Map<number, { dst: Destination; socket: net.Socket }>();
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();

  /**
   * @param layout this pool's layout fingerprint (a decode pool of another layout is refused)
   * @param onEvent called when a destination arrives or a transfer ends (wakes the engine loop)
   */
  constructor(private readonly layout: string, private readonly onEvent: () => void = () => undefined) {}

  /** Starts the endpoint. @returns the bound port */
  listen(host: string): Promise<number> {
    const server = net.createServer((socket) => {
      socket.setNoDelay(true);
      this.sockets.add(socket);
      const reader = new FrameReader((h) => {
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
  readonly backend = 'tcp';
  private readonly conns = new Map<string, net.Socket>();
  private readonly receivers = new Map<number, TcpKVReceiver>();
  bytesReceived = 0;

  /** @param onData called when a room's rows and aux arrived (the receiver is then Success), or with null on a failure */
  constructor(private readonly onData: (r: TcpKVReceiver | null) => void) {}

  private connect(addr: string): net.Socket {
    const have = this.conns.get(addr);
    if (have && !have.destroyed) return have;
    const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
    const socket = net.connect({ host, port });
    socket.setNoDelay(true);
    const pendingKv = new Map<number, Buffer>();
    const reader = new FrameReader((h, payload) => {
      if (h.type === 'kv') {
        pendingKv.set(h.room, Buffer.from(payload));
        this.bytesReceived += payload.length;
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
    s.write(frame({ type: 'dst', dst }));
    if (r.state === KVPoll.Bootstrapping) r.state = KVPoll.WaitingForInput;
  }

  release(room: number): void {
    this.receivers.delete(room);
  }

  close(): void {
    for (const s of this.conns.values()) s.destroy();
    this.conns.clear();
  }
}

// The prefill side of the `tcp` and `ucx` KV transfer backends (SGLang KVManager / KVSender, disaggregation/base/
// conn.py): a transfer endpoint decode groups connect to; one sender per room. A room's destination (dst) moves its
// sender from Bootstrapping to WaitingForInput; each sendChunk ships a token range's rows — over the connection
// (`tcp`), or (`ucx`) as a one-sided UCX put into the decode side's UCX-mapped staging slot at the range's offset,
// flushed (remote completion) before the chunk's `kv` message goes out; finish sends the aux data after every chunk.
// The sender is Success once the connection has taken the last message. A decode side without UCX gets TCP payloads.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { KVPoll, type KVPollState } from './kv_poll.js';
import { frame, FrameReader, writeFrame, type AuxData, type Destination } from './transfer_frames.js';
import type { UcxAddon, UcxWorker } from './ucx_addon.js';

/** A decode peer reachable by UCX puts. */
interface UcxPeer { readonly addon: UcxAddon; readonly worker: UcxWorker; readonly ep: number; readonly rkey: Buffer; readonly base: bigint }

/** What the prefill loop needs of a sender (tcp/ucx here, fake_transfer.ts). */
export interface KVSenderLike {
  readonly room: number;
  readonly error: string | null;
  readonly dst: Destination | null;
  /** 'tcp' or 'ucx' once a chunk went out (null: none yet, or fake). */
  readonly via: 'tcp' | 'ucx' | null;
  /** Chunks sent. */
  readonly chunks: number;
  poll(): KVPollState;
  /** Ships the rows (wire layout) of tokens [start, start + count); `draft`: the draft model's rows (over TCP). */
  sendChunk(payload: Uint8Array, start: number, count: number, draft?: boolean): void;
  /** Sends the aux data after every chunk; Success once it is out. */
  finish(aux: AuxData): void;
  /** Fails the room and tells the decode side. */
  abort(message: string): void;
}

/** What the prefill loop needs of a manager. */
export interface PrefillKVManagerLike {
  readonly backend: 'tcp' | 'ucx' | 'fake';
  /** Starts the endpoint. @returns its port (0: none, fake) */
  listen(host: string): Promise<number>;
  createSender(room: number): KVSenderLike;
  release(room: number): void;
  close(): Promise<void>;
}

/** One room's sender. */
export class KVSender implements KVSenderLike {
  state: KVPollState = KVPoll.Bootstrapping;
  error: string | null = null;
  dst: Destination | null = null;
  socket: net.Socket | null = null;
  ucx: UcxPeer | null = null;
  via: 'tcp' | 'ucx' | null = null;
  chunks = 0;
  /** UCX puts run one after another; each chunk's `kv` message follows its put, `done` follows the last. */
  private tail: Promise<void> = Promise.resolve();
  private finishing = false;
  /** @param onEvent called when the state changes on a socket event (wakes the engine loop) */
  constructor(readonly room: number, private readonly onEvent: () => void = () => undefined) {}

  poll(): KVPollState {
    return this.state;
  }

  sendChunk(payload: Uint8Array, start: number, count: number, draft = false): void {
    const s = this.socket;
    const dst = this.dst;
    if (this.state === KVPoll.Failed || this.state === KVPoll.Success) return;
    if (!s || !dst || this.finishing) {
      this.fail(`no decode destination for room ${this.room}`);
      return;
    }
    this.state = KVPoll.Transferring;
    if (draft) {
      // (over the connection: the staging slot holds the target rows only; 'done' follows every chunk)
      writeFrame(s, { type: 'kv', room: this.room, start, count, draft: true }, payload);
      return;
    }
    this.chunks++;
    const u = this.ucx;
    const off = start * dst.bytesPerToken;
    if (u && dst.ucx && off + payload.length <= dst.ucx.length) {
      this.via = 'ucx';
      // (never rejects: a failed put fails the room, and the later steps see that)
      this.tail = this.tail.then(async () => {
        if (this.state !== KVPoll.Transferring) return;
        try {
          await u.addon.ucxPut(u.worker, u.ep, u.rkey, u.base + BigInt(dst.ucx!.offset + off), payload);
        } catch (err) {
          this.abort(`UCX put failed: ${(err as Error).message}`);
          this.onEvent();
          return;
        }
        if (this.state === KVPoll.Transferring) s.write(frame({ type: 'kv', room: this.room, start, count, ucx: true }));
      });
      return;
    }
    this.via = 'tcp';
    writeFrame(s, { type: 'kv', room: this.room, start, count }, payload);
  }

  finish(aux: AuxData): void {
    const s = this.socket;
    if (this.state === KVPoll.Failed || this.state === KVPoll.Success) return;
    if (!s) {
      this.fail(`no decode destination for room ${this.room}`);
      return;
    }
    this.finishing = true;
    this.state = KVPoll.Transferring;
    void this.tail.then(() => {
      if (this.state !== KVPoll.Transferring) return;
      s.write(frame({ type: 'done', aux }), (err) => {
        if (this.state !== KVPoll.Transferring) return;
        if (err) this.fail(err.message);
        else this.state = KVPoll.Success;
        this.onEvent();
      });
    });
  }

  /** Resolves once no UCX put of this room is running (a failed room starts none after the current one). */
  settled(): Promise<void> {
    return this.tail;
  }

  abort(message: string): void {
    if (this.socket && !this.socket.destroyed && this.state !== KVPoll.Success && this.state !== KVPoll.Failed) {
      this.socket.write(frame({ type: 'fail', room: this.room, message }));
    }
    this.fail(message);
  }

  fail(message: string): void {
    if (this.state === KVPoll.Success || this.state === KVPoll.Failed) return;
    this.state = KVPoll.Failed;
    this.error = message;
  }
}

/** The transfer endpoint of one prefill group. */
export class PrefillKVManager implements PrefillKVManagerLike {
  private readonly senders = new Map<number, KVSender>();
  /** Released senders whose last UCX put is still running (the decode side's fail is answered when it ends). */
  private readonly draining = new Map<number, KVSender>();
  /** Destinations that arrived before their request. */
  private readonly early = new Map<number, { dst: Destination; socket: net.Socket; at: number }>();
  /** Rooms the decode side gave up on before their request arrived. */
  private readonly earlyFail = new Map<number, { message: string; at: number }>();
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private readonly peers = new Map<net.Socket, UcxPeer>();
  /** This side's UCX worker (held here: a collected worker would stop). */
  private worker: UcxWorker | null = null;
  readonly backend: 'tcp' | 'ucx';

  /**
   * @param layout this side's wire-layout fingerprint (a decode side of another layout is refused)
   * @param onEvent called when a destination arrives or a transfer ends (wakes the engine loop)
   * @param ucx the UCX addon (backend `ucx`), or null (`tcp`)
   * @param ucxSettings settings of this side's UCX worker (ucxWorkerSettings: the pinned network device)
   */
  constructor(private readonly layout: string, private readonly onEvent: () => void = () => undefined, private readonly ucx: UcxAddon | null = null, private readonly ucxSettings: Record<string, string> = {}) {
    this.backend = ucx ? 'ucx' : 'tcp';
  }

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
        if (h.type === 'fail') {
          // the decode side gave up on the room (its waiting timeout, an abort): SGLang's abort notification
          const s = this.senders.get(h.room);
          if (s) s.fail(h.message);
          else if (!this.draining.has(h.room)) this.earlyFail.set(h.room, { message: h.message, at: Date.now() });
          this.early.delete(h.room);
          // the decode side keeps the room's staging slot until no put into it can land: answered once the room's
          // running put (if any) ended; the failed room starts no other
          const last = s ?? this.draining.get(h.room);
          const released = (): void => void (socket.destroyed || socket.write(frame({ type: 'released', room: h.room })));
          if (last) void last.settled().then(released);
          else released();
          this.onEvent();
          return;
        }
        if (h.type !== 'dst') return;
        const s = this.senders.get(h.dst.room);
        if (h.dst.layout !== this.layout) {
          const msg = `KV layouts differ between prefill and decode (prefill ${this.layout.slice(0, 80)}..., decode ${h.dst.layout.slice(0, 80)}...): the same checkpoint and --kv-cache-dtype are needed on both sides`;
          socket.write(frame({ type: 'fail', room: h.dst.room, message: msg }));
          s?.fail(msg);
          return;
        }
        if (s) this.attach(s, h.dst, socket);
        else this.early.set(h.dst.room, { dst: h.dst, socket, at: Date.now() });
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

  private attach(s: KVSender, dst: Destination, socket: net.Socket): void {
    s.dst = dst;
    s.socket = socket;
    s.ucx = this.peers.get(socket) ?? null;
    if (s.state === KVPoll.Bootstrapping) s.state = KVPoll.WaitingForInput;
    this.onEvent();
  }

  createSender(room: number): KVSender {
    const s = new KVSender(room, this.onEvent);
    this.senders.set(room, s);
    const f = this.earlyFail.get(room);
    if (f) {
      this.earlyFail.delete(room);
      s.fail(f.message);
      return s;
    }
    const e = this.early.get(room);
    if (e) {
      this.early.delete(room);
      this.attach(s, e.dst, e.socket);
    }
    // entries for rooms whose request never came are dropped after a while (the decode side times out on its own)
    const old = Date.now() - 600_000;
    for (const [r, x] of this.early) if (x.at < old) this.early.delete(r);
    for (const [r, x] of this.earlyFail) if (x.at < old) this.earlyFail.delete(r);
    return s;
  }

  release(room: number): void {
    const s = this.senders.get(room);
    this.senders.delete(room);
    if (s?.via === 'ucx') {
      this.draining.set(room, s);
      void s.settled().then(() => { if (this.draining.get(room) === s) this.draining.delete(room); });
    }
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const srv = this.server;
    this.server = null;
    return srv ? new Promise((r) => srv.close(() => r())) : Promise.resolve();
  }
}

// tsglang's TCP key-value store: the rendezvous of multi-node groups (torch.distributed's TCPStore role). Node 0 serves
// it on `--dist-init-addr host:port`; every node's bootstrap (TcpStoreClient, async, on the main thread) and every Gloo
// group (the C++ client in native/gloo/src/kv_store_client.cc, on the rank threads) talk to it.
//
// Wire format (little endian): request = u32 length of the rest, u8 op, fields…; reply = u32 length of the rest,
// u8 status (0 ok, 1 timeout, 2 error), fields…; field = u32 length, bytes; numbers are decimal ASCII.
//   1 SET(key, value) → ok          2 GET(key, timeoutMs) → value (waits for the key)
//   3 WAIT(timeoutMs, key…) → ok    4 ADD(key, delta) → new value (a missing key counts as 0)
//   5 CHECK(key…) → "1" | "0"       6 DELETE(key) → ok
//   7 HELLO(name) → ok: names the connection; when it closes, the server's onLost(name) runs (node liveness)
// A wait that times out answers status 1 with the missing keys (comma-separated) as its field.
import { createServer, Socket } from 'node:net';
import type { Server } from 'node:net';
import { DistributedError } from '../common/index.js';

const OP_SET = 1;
const OP_GET = 2;
const OP_WAIT = 3;
const OP_ADD = 4;
const OP_CHECK = 5;
const OP_DELETE = 6;
const OP_HELLO = 7;
const ST_OK = 0;
const ST_TIMEOUT = 1;
const ST_ERROR = 2;
/** A request larger than this is refused (the store holds addresses and small records). */
const MAX_FRAME = 64 << 20;

function frame(head: number, fields: readonly (Buffer | string)[]): Buffer {
  const bufs = fields.map((f) => (typeof f === 'string' ? Buffer.from(f, 'utf8') : f));
  const len = 1 + bufs.reduce((s, b) => s + 4 + b.length, 0);
  const out = Buffer.alloc(4 + len);
  out.writeUInt32LE(len, 0);
  out[4] = head;
  let pos = 5;
  for (const b of bufs) {
    out.writeUInt32LE(b.length, pos);
    b.copy(out, pos + 4);
    pos += 4 + b.length;
  }
  return out;
}

function parseFields(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let pos = 1;
  while (pos + 4 <= body.length) {
    const n = body.readUInt32LE(pos);
    out.push(body.subarray(pos + 4, pos + 4 + n));
    pos += 4 + n;
  }
  return out;
}

/** Splits a byte stream into frames (u32 length + body). */
class FrameReader {
  private buf: Buffer = Buffer.alloc(0);
  constructor(private readonly onFrame: (body: Buffer) => void) {}
  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (this.buf.length >= 4) {
      const n = this.buf.readUInt32LE(0);
      if (n === 0 || n > MAX_FRAME) throw new Error(`bad frame length ${n}`);
      if (this.buf.length < 4 + n) return;
      const body = this.buf.subarray(4, 4 + n);
      this.buf = this.buf.subarray(4 + n);
      this.onFrame(body);
    }
  }
}

interface Waiter {
  readonly keys: readonly string[];
  readonly done: () => void;
}

/** The store server (node 0). Runs on the event loop; never blocks it. */
export class TcpStoreServer {
  private readonly data = new Map<string, Buffer>();
  private waiters: Waiter[] = [];
  private readonly sockets = new Set<Socket>();
  private closing = false;
  /** Called with a HELLO name when that connection closes (not during close()). */
  onLost: ((name: string) => void) | null = null;

  private constructor(private readonly server: Server, readonly host: string, readonly port: number) {}

  /**
   * Listens on host:port (port 0: any free port, see .port).
   * @throws DistributedError when the address cannot be bound (in use, not local)
   */
  static listen(host: string, port: number): Promise<TcpStoreServer> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      let store: TcpStoreServer | null = null;
      server.on('connection', (s) => store?.accept(s));
      server.once('error', (err) => reject(new DistributedError(`cannot serve the TCP store on ${host}:${port} (--dist-init-addr): ${(err as Error).message}`)));
      server.listen(port, host, () => {
        const addr = server.address();
        const p = typeof addr === 'object' && addr ? addr.port : port;
        store = new TcpStoreServer(server, host, p);
        resolve(store);
      });
    });
  }

  /** Number of keys held (for tests). */
  get size(): number {
    return this.data.size;
  }

  private accept(s: Socket): void {
    s.setNoDelay(true);
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => s.destroy());
    const reader = new FrameReader((body) => this.handle(s, body));
    s.on('data', (chunk: Buffer) => {
      try {
        reader.push(chunk);
      } catch {
        s.destroy();
      }
    });
  }

  private notify(): void {
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (w.keys.every((k) => this.data.has(k))) w.done();
      else still.push(w);
    }
    this.waiters = still;
  }

  /** Answers once every key exists, or with status 1 after timeoutMs (< 0: never). */
  private waitFor(s: Socket, keys: readonly string[], timeoutMs: number, answer: () => Buffer): void {
    if (keys.every((k) => this.data.has(k))) {
      s.write(answer());
      return;
    }
    let timer: NodeJS.Timeout | null = null;
    const w: Waiter = {
      keys,
      done: () => {
        if (timer) clearTimeout(timer);
        if (!s.destroyed) s.write(answer());
      },
    };
    this.waiters.push(w);
    if (timeoutMs >= 0) {
      timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        if (!s.destroyed) s.write(frame(ST_TIMEOUT, [keys.filter((k) => !this.data.has(k)).join(',')]));
      }, timeoutMs);
      timer.unref();
    }
    s.once('close', () => {
      if (timer) clearTimeout(timer);
      this.waiters = this.waiters.filter((x) => x !== w);
    });
  }

  private handle(s: Socket, body: Buffer): void {
    const op = body[0];
    const f = parseFields(body);
    const str = (i: number) => (f[i] ?? Buffer.alloc(0)).toString('utf8');
    switch (op) {
      case OP_SET:
        this.data.set(str(0), Buffer.from(f[1] ?? Buffer.alloc(0)));
        s.write(frame(ST_OK, []));
        this.notify();
        return;
      case OP_GET: {
        const key = str(0);
        this.waitFor(s, [key], Number(str(1)), () => frame(ST_OK, [this.data.get(key)!]));
        return;
      }
      case OP_WAIT:
        this.waitFor(s, f.slice(1).map((b) => b.toString('utf8')), Number(str(0)), () => frame(ST_OK, []));
        return;
      case OP_ADD: {
        const key = str(0);
        const cur = this.data.has(key) ? BigInt(this.data.get(key)!.toString('utf8') || '0') : 0n;
        const next = cur + BigInt(str(1) || '0');
        this.data.set(key, Buffer.from(next.toString(), 'utf8'));
        s.write(frame(ST_OK, [next.toString()]));
        this.notify();
        return;
      }
      case OP_CHECK:
        s.write(frame(ST_OK, [f.every((b) => this.data.has(b.toString('utf8'))) ? '1' : '0']));
        return;
      case OP_DELETE:
        this.data.delete(str(0));
        s.write(frame(ST_OK, []));
        return;
      case OP_HELLO: {
        const name = str(0);
        s.once('close', () => {
          if (!this.closing) this.onLost?.(name);
        });
        s.write(frame(ST_OK, []));
        return;
      }
      default:
        s.write(frame(ST_ERROR, [`unknown op ${op}`]));
    }
  }

  /** Stops listening and drops every connection. */
  close(): Promise<void> {
    this.closing = true;
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** An async client of the store (the node bootstrap on the main thread). One request at a time, in order. */
export class TcpStoreClient {
  private chain: Promise<unknown> = Promise.resolve();
  private pending: ((body: Buffer | Error) => void)[] = [];
  private closedErr: DistributedError | null = null;
  private userClosed = false;

  private constructor(private readonly socket: Socket, readonly where: string) {
    const reader = new FrameReader((body) => this.pending.shift()?.(body));
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    const fail = (why: string) => {
      this.closedErr = new DistributedError(`lost the connection to the TCP store at ${where} (--dist-init-addr): ${why}`);
      for (const p of this.pending.splice(0)) p(this.closedErr);
    };
    socket.on('error', (err) => fail(err.message));
    socket.on('close', () => fail('closed'));
  }

  /** The local address this client uses to reach the store (the address peers reach this node at). */
  get localAddress(): string {
    return this.socket.localAddress ?? '127.0.0.1';
  }

  /**
   * Connects to host:port, retrying every 200 ms until timeoutMs.
   * @throws DistributedError naming the address when the store is not reachable in time
   */
  static async connect(host: string, port: number, timeoutMs: number): Promise<TcpStoreClient> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    for (;;) {
      try {
        const s = await new Promise<Socket>((resolve, reject) => {
          const sock = new Socket();
          sock.once('error', reject);
          sock.connect(port, host, () => {
            sock.removeListener('error', reject);
            resolve(sock);
          });
        });
        s.setNoDelay(true);
        return new TcpStoreClient(s, `${host}:${port}`);
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() >= deadline) {
        throw new DistributedError(`could not reach the TCP store of node 0 at --dist-init-addr ${host}:${port} within ${timeoutMs} ms (${last}); is node 0 running?`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private call(op: number, fields: readonly (Buffer | string)[]): Promise<Buffer[]> {
    const run = async (): Promise<Buffer[]> => {
      if (this.closedErr) throw this.closedErr;
      const body = await new Promise<Buffer | Error>((resolve) => {
        this.pending.push(resolve);
        this.socket.write(frame(op, fields));
      });
      if (body instanceof Error) throw body;
      const out = parseFields(body);
      if (body[0] === ST_TIMEOUT) throw new DistributedError(`timed out waiting for ${out[0]?.toString('utf8') ?? 'keys'} in the TCP store at ${this.where}`);
      if (body[0] !== ST_OK) throw new DistributedError(`TCP store at ${this.where}: ${out[0]?.toString('utf8') ?? 'error'}`);
      return out;
    };
    const p = this.chain.then(run, run);
    this.chain = p.catch(() => undefined);
    return p;
  }

  async set(key: string, value: Buffer | string): Promise<void> {
    await this.call(OP_SET, [key, value]);
  }

  /** Waits up to timeoutMs (< 0: forever) for the key. @throws DistributedError on timeout */
  async get(key: string, timeoutMs: number): Promise<Buffer> {
    return (await this.call(OP_GET, [key, String(Math.round(timeoutMs))]))[0];
  }

  /** Waits up to timeoutMs for every key. @throws DistributedError naming the missing keys on timeout */
  async wait(keys: readonly string[], timeoutMs: number): Promise<void> {
    await this.call(OP_WAIT, [String(Math.round(timeoutMs)), ...keys]);
  }

  /** Adds delta to the integer at key (0 when missing) and returns the new value. */
  async add(key: string, delta: number): Promise<number> {
    return Number((await this.call(OP_ADD, [key, String(delta)]))[0].toString('utf8'));
  }

  async check(keys: readonly string[]): Promise<boolean> {
    return (await this.call(OP_CHECK, keys))[0].toString('utf8') === '1';
  }

  async delete(key: string): Promise<void> {
    await this.call(OP_DELETE, [key]);
  }

  /** Names this connection: the server calls its onLost(name) when the connection closes. */
  async hello(name: string): Promise<void> {
    await this.call(OP_HELLO, [name]);
  }

  /** Called once when the connection to the store closes or fails (not after close()). */
  onClose(cb: (err: DistributedError) => void): void {
    const fire = () => {
      if (!this.userClosed) cb(this.closedErr ?? new DistributedError(`lost the connection to the TCP store at ${this.where} (--dist-init-addr)`));
    };
    if (this.socket.destroyed) fire();
    else this.socket.once('close', fire);
  }

  close(): void {
    this.userClosed = true;
    this.socket.destroy();
  }
}

// A message link over one TCP connection between two processes (nodes): each message is a structured-clonable value
// (plain objects, arrays, typed arrays — what crosses postMessage between threads) written with V8's serializer,
// framed by a 4-byte big-endian length. Used to carry the engine-core messages of a group hosted on another node.
import { createServer, Socket, type Server } from 'node:net';
import { deserialize, serialize } from 'node:v8';
import { DistributedError } from '../common/index.js';

/** Largest frame accepted (a corrupt or foreign stream is cut off instead of buffered). */
const MAX_FRAME_BYTES = 1 << 30;

/** One end of a link. Messages are delivered in order; after close or a lost peer nothing more is delivered. */
export class FramedLink {
  private handler: (msg: unknown) => void = () => {};
  private closeHandlers: ((err: Error | null) => void)[] = [];
  private buf: Buffer = Buffer.alloc(0);
  private ended = false;
  private closedByUs = false;

  constructor(private readonly socket: Socket, readonly peer: string) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.end(new DistributedError(`link to ${peer}: ${err.message}`)));
    socket.on('close', () => this.end(this.closedByUs ? null : new DistributedError(`link to ${peer}: the connection closed`)));
  }

  /**
   * Connects to host:port, retrying every 200 ms until `timeoutMs`.
   * @throws DistributedError naming the address when it cannot be reached in time
   */
  static async connect(host: string, port: number, timeoutMs: number): Promise<FramedLink> {
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
        return new FramedLink(s, `${host}:${port}`);
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() >= deadline) throw new DistributedError(`could not connect to ${host}:${port} within ${timeoutMs} ms (${last})`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Sends one message (structured-clonable). Ignored once the link is closed. */
  send(msg: unknown): void {
    if (this.ended) return;
    const body = serialize(msg);
    const head = Buffer.allocUnsafe(4);
    head.writeUInt32BE(body.length, 0);
    this.socket.write(Buffer.concat([head, body]));
  }

  /** Registers the single message handler. */
  onMessage(handler: (msg: unknown) => void): void {
    this.handler = handler;
  }

  /** Registers a handler for the end of the link: null after close(), the error when the peer or network failed. */
  onClose(handler: (err: Error | null) => void): void {
    this.closeHandlers.push(handler);
  }

  get isClosed(): boolean {
    return this.ended;
  }

  /** Closes the link after the queued messages are written (idempotent). */
  close(): void {
    if (this.ended) return;
    this.closedByUs = true;
    this.socket.end();
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    while (!this.ended && this.buf.length >= 4) {
      const n = this.buf.readUInt32BE(0);
      if (n > MAX_FRAME_BYTES) {
        this.end(new DistributedError(`link to ${this.peer}: a frame of ${n} bytes (corrupt stream)`));
        this.socket.destroy();
        return;
      }
      if (this.buf.length < 4 + n) return;
      const body = this.buf.subarray(4, 4 + n);
      this.buf = this.buf.subarray(4 + n);
      let msg: unknown;
      try {
        msg = deserialize(body);
      } catch (err) {
        this.end(new DistributedError(`link to ${this.peer}: undecodable message: ${(err as Error).message}`));
        this.socket.destroy();
        return;
      }
      this.handler(msg);
    }
  }

  private end(err: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    for (const h of this.closeHandlers.splice(0)) h(err);
  }
}

/**
 * Listens on host (port 0: a free port) and hands every accepted connection to `onLink`.
 * @returns the server and its port
 */
export async function listenFramed(host: string, onLink: (link: FramedLink) => void): Promise<{ server: Server; port: number }> {
  const server = createServer((sock) => onLink(new FramedLink(sock, `${sock.remoteAddress ?? '?'}:${sock.remotePort ?? '?'}`)));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : 0 };
}

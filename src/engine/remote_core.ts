// Engine cores on another node (multi-node DP-attention; SGLang's DP controller on node 0 pushes each DP rank's
// requests to that rank's scheduler, wherever it runs, and the schedulers send their outputs back). Here a node whose
// ranks lead attention-DP groups hosts those groups' engine cores (worker threads, as on node 0) behind a TCP listener
// (DpCoreHost); node 0's DP controller reaches each of them through a RemoteCoreTransport: the same ToCoreMsg /
// FromCoreMsg messages as with a local core, carried by a FramedLink (distributed/framed_link.ts).
import { DistributedError } from '../common/index.js';
import type { Logger } from '../common/index.js';
import { FramedLink, listenFramed } from '../distributed/index.js';
import type { FromCoreMsg, ToCoreMsg } from './messages.js';
import { WorkerTransport, type CoreTransport } from './transport.js';
import type { EngineOptions } from './types.js';

/** The first message on a link: which DP rank's core node 0 wants. */
interface HelloMsg {
  readonly type: 'hello';
  readonly dpRank: number;
}

/** How long close() waits for the remote core to leave after its shutdown before cutting the link. */
const REMOTE_SHUTDOWN_GRACE_MS = 10_000;

/** Node 0's end: a CoreTransport to the engine core of DP rank `dpRank`, hosted by another node. */
export class RemoteCoreTransport implements CoreTransport {
  private link: FramedLink | null = null;
  private readonly queue: ToCoreMsg[] = [];
  private handler: (msg: FromCoreMsg) => void = () => {};
  private fatalHandlers: ((err: Error) => void)[] = [];
  private closing = false;
  private failed: Error | null = null;
  private readonly connected: Promise<void>;

  /**
   * Connects (asynchronously; messages sent meanwhile are queued) to the core host at `addr`.
   * @param where who hosts it, for messages: "node 1 (ranks 8..15)"
   * @param timeoutMs how long to keep trying to connect (--dist-timeout)
   */
  constructor(addr: string, readonly dpRank: number, private readonly where: string, timeoutMs: number) {
    const i = addr.lastIndexOf(':');
    const host = addr.slice(0, i).replace(/^\[|\]$/g, '');
    const port = Number(addr.slice(i + 1));
    this.connected = FramedLink.connect(host, port, timeoutMs).then((link) => {
      if (this.closing) return link.close();
      this.link = link;
      link.onMessage((m) => this.handler(m as FromCoreMsg));
      link.onClose((err) => this.lost(err ?? (this.closing ? null : new DistributedError('the connection closed'))));
      link.send({ type: 'hello', dpRank } satisfies HelloMsg);
      for (const m of this.queue.splice(0)) link.send(m);
    }, (err: Error) => this.lost(err));
  }

  send(msg: ToCoreMsg): void {
    if (this.link) this.link.send(msg);
    else if (!this.failed) this.queue.push(msg);
  }

  onMessage(handler: (msg: FromCoreMsg) => void): void {
    this.handler = handler;
  }

  onFatal(handler: (err: Error) => void): void {
    if (this.failed) handler(this.failed);
    else this.fatalHandlers.push(handler);
  }

  private lost(err: Error | null): void {
    if (err === null || this.closing || this.failed) return;
    this.failed = new DistributedError(`its engine core on ${this.where} is gone: ${err.message}`, { cause: err });
    for (const h of this.fatalHandlers.splice(0)) h(this.failed);
  }

  /** Sends the shutdown and waits (up to a grace) for the host to close the link once its core has left. */
  async close(): Promise<void> {
    await this.connected.catch(() => undefined);
    this.closing = true;
    const link = this.link;
    if (!link || link.isClosed) return;
    const closed = new Promise<void>((resolve) => link.onClose(() => resolve()));
    link.send({ type: 'shutdown' } satisfies ToCoreMsg);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((r) => (timer = setTimeout(r, REMOTE_SHUTDOWN_GRACE_MS)))]);
    clearTimeout(timer);
    link.close();
  }
}

/** A node's host of the engine cores of the attention-DP groups its ranks lead. */
export class DpCoreHost {
  private readonly cores = new Map<number, WorkerTransport>();
  private readonly links = new Set<FramedLink>();
  private readonly exited: Promise<void>[] = [];
  private closed = false;

  private constructor(
    private readonly dpRanks: readonly number[],
    private readonly optionsOf: (dpRank: number) => EngineOptions,
    private readonly logger: Logger,
    private readonly server: { close(cb?: () => void): void },
    /** The port it listens on. */
    readonly port: number,
  ) {}

  /**
   * Listens on `host` (a free port) for node 0's DP controller; each link's hello names a DP rank of `dpRanks`,
   * whose engine core is then started (a worker thread with `optionsOf(dpRank)`) and bridged to the link.
   */
  static async listen(host: string, dpRanks: readonly number[], optionsOf: (dpRank: number) => EngineOptions, logger: Logger): Promise<DpCoreHost> {
    let self: DpCoreHost | null = null;
    const pending: FramedLink[] = [];
    const { server, port } = await listenFramed(host, (link) => (self ? self.accept(link) : pending.push(link)));
    self = new DpCoreHost(dpRanks, optionsOf, logger, server, port);
    for (const l of pending) self.accept(l);
    return self;
  }

  /** Resolves once every core this host started has left (after node 0's shutdown or a failure). */
  async allExited(): Promise<void> {
    await Promise.all(this.exited);
  }

  private accept(link: FramedLink): void {
    if (this.closed) return link.close();
    this.links.add(link);
    link.onClose(() => this.links.delete(link));
    link.onMessage((m) => {
      const hello = m as Partial<HelloMsg>;
      if (hello.type !== 'hello' || typeof hello.dpRank !== 'number' || !this.dpRanks.includes(hello.dpRank) || this.cores.has(hello.dpRank)) {
        this.logger.error(`core host: unexpected first message from ${link.peer}: ${JSON.stringify(m)}`);
        link.close();
        return;
      }
      this.bridge(hello.dpRank, link);
    });
  }

  /** Starts DP rank g's core and passes messages both ways until the shutdown or a lost link. */
  private bridge(g: number, link: FramedLink): void {
    const core = new WorkerTransport(this.optionsOf(g));
    this.cores.set(g, core);
    let done!: () => void;
    this.exited.push(new Promise<void>((r) => (done = r)));
    let closing = false;
    const stop = (): void => {
      if (closing) return;
      closing = true;
      void core.close().finally(() => {
        link.close();
        done();
      });
    };
    core.onMessage((m) => link.send(m));
    core.onFatal((e) => {
      if (closing) return;
      link.send({ type: 'fatal', message: `DP rank ${g}: ${e.message}` } satisfies FromCoreMsg);
      stop();
    });
    link.onMessage((m) => {
      const msg = m as ToCoreMsg;
      if (msg.type === 'shutdown') stop();
      else core.send(msg);
    });
    // node 0 gone (its shutdown reaches this node through the bootstrap too): the core leaves
    link.onClose(() => stop());
    this.logger.info(`DP rank ${g}: engine core started for node 0's DP controller (${link.peer})`);
  }

  /** Stops every core (their links close) and the listener; idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.server.close();
    await Promise.all([...this.cores.values()].map((c) => c.close().catch(() => undefined)));
    for (const l of this.links) l.close();
  }
}

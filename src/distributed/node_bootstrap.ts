// Multi-node start-up (SGLang's --nnodes / --node-rank / --dist-init-addr / --dist-timeout): one tsglang process per
// node; node 0 serves the TCP store on --dist-init-addr, every node (node 0 too) joins it, claims its node rank,
// publishes its address and start-up fingerprint, and waits for all the others. Afterwards the store carries the Gloo
// rendezvous of every cross-node group (prefixed with a run id drawn by node 0), node liveness (a node's store
// connection closing = the node is gone) and the shutdown announcement. Runs on the main thread, all async.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DistributedError } from '../common/index.js';
import type { GlooGroupSpec } from './gloo_communicator.js';
import type { GlooGroupRef } from './group_ref.js';
import { TcpStoreClient, TcpStoreServer } from './tcp_store.js';

/** host and port of `--dist-init-addr` ("host:port", "[v6]:port"). @throws DistributedError when malformed */
export function parseDistInitAddr(addr: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(addr) ?? /^([^:]+):(\d+)$/.exec(addr);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 1 && port <= 65535)) throw new DistributedError(`--dist-init-addr must be HOST:PORT (e.g. 10.0.0.1:5000), got '${addr}'`);
  return { host: m[1], port };
}

/** What bootstrapNodes needs. */
export interface NodeBootstrapOptions {
  readonly nnodes: number;
  readonly nodeRank: number;
  /** `--dist-init-addr` as given. */
  readonly distInitAddr: string;
  /** `--dist-timeout` in ms: how long a node waits for the store and for the other nodes. */
  readonly timeoutMs: number;
  /** Ranks this node runs (world size / nnodes). */
  readonly ranksPerNode: number;
  /** Flags every node must agree on (tp/ep sizes, model shape…): compared with node 0's, a mismatch names both. */
  readonly fingerprint: string;
}

/** A node's record in the store. */
interface NodeRecord {
  readonly nodeRank: number;
  readonly nnodes: number;
  readonly ranksPerNode: number;
  readonly fingerprint: string;
  readonly host: string;
  readonly addr: string;
  readonly pid: number;
}

/** This node's view of the joined cluster. */
export class NodeBootstrap {
  private fatalCbs: ((err: DistributedError) => void)[] = [];
  private fatal: DistributedError | null = null;
  private closed = false;
  /** Set by announceShutdown: nodes leaving afterwards are expected. */
  private stopping = false;

  constructor(
    readonly options: NodeBootstrapOptions,
    readonly storeHost: string,
    readonly storePort: number,
    /** This node's address as seen from the store host (what peers connect to). */
    readonly bindHost: string,
    readonly runId: string,
    readonly nodes: readonly NodeRecord[],
    private readonly client: TcpStoreClient,
    private readonly watcher: TcpStoreClient,
    private readonly server: TcpStoreServer | null,
  ) {
    if (server) {
      server.onLost = (name) => {
        const k = Number(/^node\/(\d+)$/.exec(name)?.[1] ?? NaN);
        if (!Number.isInteger(k) || k === 0) return;
        this.raise(new DistributedError(`${this.describeNode(k)} is gone: its connection to the TCP store closed (the process exited or the network failed) (${this.where()})`));
      };
    } else {
      watcher.onClose(() => this.raise(new DistributedError(`lost node 0: the TCP store at --dist-init-addr ${options.distInitAddr} closed the connection (node 0 exited or the network failed) (${this.where()})`)));
    }
  }

  /** "node k (ranks a..b)". */
  describeNode(k: number): string {
    const r = this.options.ranksPerNode;
    return `node ${k} (rank${r > 1 ? `s ${k * r}..${(k + 1) * r - 1}` : ` ${k * r}`})`;
  }

  /** Context for error messages: "node 1 of 2, --dist-init-addr 10.0.0.1:5000". */
  where(): string {
    return `node ${this.options.nodeRank} of ${this.options.nnodes}, --dist-init-addr ${this.options.distInitAddr}`;
  }

  /** The first global rank of this node. */
  get firstRank(): number {
    return this.options.nodeRank * this.options.ranksPerNode;
  }

  /**
   * The Gloo spec of global rank `rank` in the cross-node group `name` of `size` ranks (every node derives the same
   * prefix, so the group's ranks meet). Pass it to the rank's thread.
   */
  groupSpec(name: string, rank: number, size: number): GlooGroupSpec {
    return {
      name,
      storeHost: this.storeHost,
      storePort: this.storePort,
      prefix: `${this.runId}/${name}/`,
      rank,
      size,
      bindHost: this.bindHost,
      timeoutMs: this.options.timeoutMs,
      context: this.where(),
    };
  }

  /** The Gloo group `name` of `size` global ranks, as plain data (each rank thread opens it with its global rank). */
  groupRef(name: string, size: number): GlooGroupRef {
    const { rank: _rank, ...spec } = this.groupSpec(name, 0, size);
    return { backend: 'gloo', spec };
  }

  /** Publishes `value` under this start-up's `key` in the store (e.g. where a node serves its engine cores). */
  async publish(key: string, value: string): Promise<void> {
    await this.client.set(`${this.runId}/${key}`, value);
  }

  /**
   * Waits (up to --dist-timeout) for another node's `key` and returns its value.
   * @throws DistributedError naming the key and --dist-init-addr when it does not appear in time
   */
  async lookup(key: string): Promise<string> {
    try {
      return (await this.client.get(`${this.runId}/${key}`, this.options.timeoutMs)).toString('utf8');
    } catch (err) {
      throw new DistributedError(`'${key}' did not appear in the TCP store within ${this.options.timeoutMs / 1000} s (--dist-timeout) (${this.where()})`, { cause: err });
    }
  }

  /** Registers a callback for the first fatal fault (a node lost); called at most once. */
  onFatal(cb: (err: DistributedError) => void): void {
    if (this.fatal) cb(this.fatal);
    else this.fatalCbs.push(cb);
  }

  private raise(err: DistributedError): void {
    if (this.fatal || this.closed || this.stopping) return;
    this.fatal = err;
    for (const cb of this.fatalCbs.splice(0)) cb(err);
  }

  /** Node 0, when its shutdown begins: from now on other nodes leaving is expected (not fatal). */
  expectShutdown(): void {
    this.stopping = true;
  }

  /** Node 0: tells every other node to shut down (they see it in waitShutdown). */
  async announceShutdown(): Promise<void> {
    this.stopping = true;
    await this.client.set(`${this.runId}/shutdown`, '1');
  }

  /** Nodes > 0: resolves when node 0 announces the shutdown (rejects when node 0 is lost first). */
  waitShutdown(): Promise<void> {
    return this.watcher.get(`${this.runId}/shutdown`, -1).then(() => undefined);
  }

  /** Leaves the cluster: closes the store connections (and node 0's server). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.client.close();
    this.watcher.close();
    await this.server?.close();
  }
}

/**
 * Joins the cluster. Node 0 first serves the TCP store on --dist-init-addr.
 * @throws DistributedError, naming the node, the ranks and --dist-init-addr: the store cannot be served (node 0) or
 *   reached (others) within the timeout, the node rank is taken by another process, a node never joins, or a node was
 *   started with different flags
 */
export async function bootstrapNodes(o: NodeBootstrapOptions): Promise<NodeBootstrap> {
  const { host, port } = parseDistInitAddr(o.distInitAddr);
  const me = `node ${o.nodeRank} of ${o.nnodes}, --dist-init-addr ${o.distInitAddr}`;
  let server: TcpStoreServer | null = null;
  if (o.nodeRank === 0) {
    try {
      server = await TcpStoreServer.listen(host, port);
    } catch (err) {
      throw new DistributedError(`${(err as Error).message} (${me}; is another node already running with --node-rank 0?)`);
    }
  }
  const clients: TcpStoreClient[] = [];
  try {
    const client = await TcpStoreClient.connect(host, port, o.timeoutMs);
    clients.push(client);
    const watcher = await TcpStoreClient.connect(host, port, o.timeoutMs);
    clients.push(watcher);
    if (o.nodeRank === 0) await client.set('run', randomBytes(6).toString('hex'));
    const runId = (await client.get('run', o.timeoutMs)).toString('utf8');
    const claims = await client.add(`${runId}/claim/${o.nodeRank}`, 1);
    if (claims > 1) {
      throw new DistributedError(`another node already joined as --node-rank ${o.nodeRank} (${me}): every node needs its own --node-rank in [0, ${o.nnodes})`);
    }
    const rec: NodeRecord = { nodeRank: o.nodeRank, nnodes: o.nnodes, ranksPerNode: o.ranksPerNode, fingerprint: o.fingerprint, host: hostname(), addr: client.localAddress, pid: process.pid };
    await client.set(`${runId}/node/${o.nodeRank}`, JSON.stringify(rec));
    await watcher.hello(`node/${o.nodeRank}`);
    const keys = Array.from({ length: o.nnodes }, (_, k) => `${runId}/node/${k}`);
    try {
      await client.wait(keys, o.timeoutMs);
    } catch (err) {
      const missing: number[] = [];
      for (let k = 0; k < o.nnodes; k++) if (!(await client.check([keys[k]]))) missing.push(k);
      const names = missing.map((k) => `node ${k} (rank${o.ranksPerNode > 1 ? `s ${k * o.ranksPerNode}..${(k + 1) * o.ranksPerNode - 1}` : ` ${k * o.ranksPerNode}`})`);
      throw new DistributedError(`${names.join(', ')} did not join within ${o.timeoutMs / 1000} s (--dist-timeout) (${me})`, { cause: err });
    }
    const nodes: NodeRecord[] = [];
    for (const k of keys) nodes.push(JSON.parse((await client.get(k, o.timeoutMs)).toString('utf8')) as NodeRecord);
    for (const n of nodes) {
      if (n.nnodes !== o.nnodes || n.fingerprint !== o.fingerprint || n.ranksPerNode !== o.ranksPerNode) {
        throw new DistributedError(
          `node ${n.nodeRank} (${n.host}, pid ${n.pid}) was started with different settings than node ${o.nodeRank}: ` +
            `--nnodes ${n.nnodes} vs ${o.nnodes}, ${n.fingerprint} vs ${o.fingerprint} (${me})`,
        );
      }
    }
    return new NodeBootstrap(o, host, port, client.localAddress, runId, nodes, client, watcher, server);
  } catch (err) {
    for (const c of clients) c.close();
    await server?.close();
    throw err;
  }
}

// The decode-only loop around the scheduler (SGLang disaggregation/decode.py; serving-spec.md §5.4, decode side):
// every new request enters the prealloc queue (its prefill server's transfer endpoint is looked up through the
// bootstrap server, retried 15 × 1 s), gets a request slot and KV locs for its whole prompt when memory allows
// (keeping num_reserved_decode_tokens per running request free), sends that destination, and waits in the transfer
// queue; when the rows and the aux data arrive they are written into the pool, the room is checked, the first token
// appended, and the request joins the running batch without a forward (Scheduler.installPrebuilt).
import { Logger } from '../common/index.js';
import type { BootstrapInfo, Req, Scheduler } from '../scheduler/index.js';
import { layoutFingerprint, payloadBytesPerToken, scatterKv } from './kv_pages.js';
import { KVPoll, type DisaggEnv } from './kv_poll.js';
import { TcpDecodeKVManager, type TcpKVReceiver } from './tcp_transfer.js';
import type { UcxAddon } from './ucx_addon.js';
import { PollTimer } from './poll_timer.js';

interface Entry {
  readonly req: Req;
  readonly bootstrap: BootstrapInfo;
  readonly createdMs: number;
  receiver: TcpKVReceiver | null;
  /** host:port of the prefill rank's transfer endpoint, once known. */
  addr: string | null;
  sentMs: number;
}

/** Counters of the decode role (metrics and tests). */
export interface DecodeStats {
  numPreallocQueueReqs: number;
  numTransferQueueReqs: number;
  transfers: number;
  failedTransfers: number;
  bytesReceived: number;
  tokensReceived: number;
  /** Payloads that came by UCX put (the rest over TCP). */
  ucxTransfers: number;
}

/** Looks up a prefill server's rank-0 transfer endpoint (GET /route). @throws Error after the retries */
async function resolveEndpoint(host: string, port: number, retries: number): Promise<string> {
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  let last = '';
  for (let i = 0; i < retries; i++) {
    try {
      const topo = await fetch(`${base}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1`, { signal: AbortSignal.timeout(5000) });
      if (topo.ok) {
        await topo.arrayBuffer(); // (ucx and tcp sides interoperate: a side without UCX gets TCP payloads)
        const r = await fetch(`${base}/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=0&target_pp_rank=0`, { signal: AbortSignal.timeout(5000) });
        if (r.ok) {
          const info = (await r.json()) as { rank_ip: string; rank_port: number };
          // a prefill server bound to every interface advertises no address: use the one the router gave
          const ip = info.rank_ip === '' || info.rank_ip === '0.0.0.0' || info.rank_ip === '::' ? host : info.rank_ip;
          return `${ip}:${info.rank_port}`;
        }
        last = `GET /route answered ${r.status}`;
      } else last = `GET /route answered ${topo.status}`;
    } catch (e) {
      last = (e as Error).message;
    }
    if (i + 1 < retries) await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error(`could not fetch the prefill topology from the bootstrap server ${base} after ${retries} attempts: ${last}`);
}

/** PD decode role: the prealloc and transfer queues. */
export class DecodeLoop {
  private readonly entries = new Map<string, Entry>();
  private readonly endpoints = new Map<string, Promise<string>>();
  private readonly resolved = new Map<string, string>();
  private readonly kvm: TcpDecodeKVManager;
  readonly stats: DecodeStats = { numPreallocQueueReqs: 0, numTransferQueueReqs: 0, transfers: 0, failedTransfers: 0, bytesReceived: 0, tokensReceived: 0, ucxTransfers: 0 };
  private readonly layout: string;
  /** Timeouts and memory that frees up are noticed by polling (transfer events kick the loop themselves). */
  private readonly pollTimer = new PollTimer(20, () => this.entries.size > 0, () => this.kick());

  /**
   * @param ucx the UCX addon for the `ucx` backend (null: `tcp`)
   * @param ucxSettings settings of the UCX worker (the pinned network device)
   * @throws Error from UCX when its worker or staging region cannot be set up
   */
  constructor(private readonly scheduler: Scheduler, private readonly env: DisaggEnv, private readonly kick: () => void, private readonly logger: Logger, ucx: UcxAddon | null = null, ucxSettings: Record<string, string> = {}) {
    this.kvm = new TcpDecodeKVManager(() => this.kick(), ucx, undefined, ucxSettings);
    this.layout = layoutFingerprint(scheduler.runner.kvPool);
    scheduler.prebuilt = { onAdmit: (req) => this.onAdmit(req) };
  }

  /** The scheduler accepted a request (it is live, in no queue): it waits for its KV here. */
  private onAdmit(req: Req): void {
    const b = this.pendingBootstrap.get(req.rid);
    this.pendingBootstrap.delete(req.rid);
    if (!b) {
      this.scheduler.failPrebuilt(req, { type: 'abort', message: 'A decode server (--disaggregation-mode decode) takes requests through the router only: bootstrap_host, bootstrap_port and bootstrap_room are required.', statusCode: 400 });
      return;
    }
    if (req.grammar) {
      this.scheduler.failPrebuilt(req, { type: 'abort', message: 'Structured outputs (json_schema, regex, ebnf, structural_tag, response_format) through PD disaggregation are not supported by tsglang yet; send them to a regular server.', statusCode: 400 });
      return;
    }
    this.entries.set(req.rid, { req, bootstrap: b, createdMs: Date.now(), receiver: null, addr: null, sentMs: 0 });
    if (b.port === null) {
      this.fail(this.entries.get(req.rid)!, 'the request has no bootstrap port (the router was given `none`)');
      return;
    }
    this.lookup(b.host, b.port);
    this.pollTimer.ensure();
  }

  /** Starts looking up a prefill server's transfer endpoint, unless known or under way. */
  private lookup(host: string, port: number): void {
    const key = `${host}:${port}`;
    if (this.endpoints.has(key)) return;
    const p = resolveEndpoint(host, port, this.env.bootstrapRetries);
    this.endpoints.set(key, p);
    p.then((a) => this.resolved.set(key, a), (err: Error) => {
      this.endpoints.delete(key); // a later request tries again
      // the lookup failed: every request waiting on that prefill server fails (SGLang)
      for (const e of [...this.entries.values()]) if (!e.receiver && `${e.bootstrap.host}:${e.bootstrap.port}` === key) this.fail(e, err.message);
    }).finally(() => this.kick());
  }

  private readonly pendingBootstrap = new Map<string, BootstrapInfo>();

  /** Called before Scheduler.addRequest with the request's bootstrap fields. */
  expect(rid: string, b: BootstrapInfo | undefined): void {
    if (b) this.pendingBootstrap.set(rid, b);
  }

  /** Aborts a request still waiting for its KV. @returns true if it was one */
  abort(rid: string): boolean {
    const e = this.entries.get(rid);
    if (!e) return false;
    this.finish(e, { type: 'abort', message: 'Abort in waiting queue', statusCode: undefined });
    return true;
  }

  /** Aborts every waiting request. */
  abortAll(): void {
    for (const rid of [...this.entries.keys()]) this.abort(rid);
  }

  private finish(e: Entry, reason: { type: 'abort'; message: string; statusCode: number | undefined }): void {
    this.entries.delete(e.req.rid);
    this.kvm.release(e.bootstrap.room);
    const r = reason.statusCode === undefined ? { type: 'abort' as const, message: reason.message } : { type: 'abort' as const, message: reason.message, statusCode: reason.statusCode };
    this.scheduler.failPrebuilt(e.req, r);
  }

  private fail(e: Entry, why: string): void {
    this.stats.failedTransfers++;
    // a prefill server that went away may come back elsewhere: its endpoint is looked up again next time
    const key = `${e.bootstrap.host}:${e.bootstrap.port}`;
    if (e.addr !== null && this.resolved.get(key) === e.addr) {
      this.resolved.delete(key);
      this.endpoints.delete(key);
    }
    const msg = `Decode transfer failed for request rank=0 req.rid='${e.req.rid}' req.bootstrap_room=${e.bootstrap.room} with exception ${why}`;
    this.logger.error(msg);
    this.finish(e, { type: 'abort', message: msg, statusCode: 500 });
  }

  /** Advances the prealloc and transfer queues (called by the engine loop). */
  poll(): void {
    const mem = this.scheduler.mem;
    const now = Date.now();
    let prealloc = 0;
    let transfer = 0;
    for (const e of [...this.entries.values()]) {
      if (!e.receiver) {
        const got = this.resolved.get(`${e.bootstrap.host}:${e.bootstrap.port}`);
        if (got === undefined) {
          this.lookup(e.bootstrap.host, e.bootstrap.port!);
          prealloc++;
          continue;
        }
        e.addr = got;
        // memory: the prompt plus num_reserved_decode_tokens for every running request and this one
        const n = e.req.originInputIds.length;
        const reserve = this.env.numReservedDecodeTokens * (this.scheduler.running.length + 1);
        if (mem.availableWithEvictable() < n + Math.min(reserve, Math.max(0, mem.allocator.size - n)) || mem.reqToTokenPool.availableSize() === 0) { prealloc++; continue; }
        mem.admit(e.req, mem.cache.matchPrefix([]));
        if (!mem.allocTokens(e.req, n)) {
          mem.releaseRetracted(e.req);
          prealloc++;
          continue;
        }
        e.receiver = this.kvm.createReceiver(got, e.bootstrap.room);
        this.kvm.init(e.receiver, { room: e.bootstrap.room, numTokens: n, layout: this.layout, bytes: n * payloadBytesPerToken(this.scheduler.runner.kvPool) });
        e.sentMs = now;
      }
      const st = e.receiver.poll();
      if (st === KVPoll.Success) this.install(e);
      else if (st === KVPoll.Failed) this.fail(e, e.receiver.error ?? 'unknown');
      else if (now - e.sentMs > this.env.waitingTimeoutMs) this.fail(e, `no KV within ${this.env.waitingTimeoutMs / 1000} s (SGLANG_DISAGGREGATION_WAITING_TIMEOUT)`);
      else transfer++;
    }
    this.stats.numPreallocQueueReqs = prealloc;
    this.stats.numTransferQueueReqs = transfer;
    this.stats.bytesReceived = this.kvm.bytesReceived;
    this.stats.ucxTransfers = this.kvm.ucxTransfers;
  }

  private install(e: Entry): void {
    const r = e.receiver!;
    const aux = r.aux!;
    const req = e.req;
    if (aux.room !== e.bootstrap.room) {
      this.fail(e, `Metadata corruption detected: room ${aux.room} != ${e.bootstrap.room}`);
      return;
    }
    const n = req.originInputIds.length;
    const locs = this.scheduler.mem.reqToTokenPool.read(req.reqPoolIdx, 0, n);
    try {
      scatterKv(this.scheduler.runner.kvPool, locs, r.payload!);
    } catch (err) {
      this.fail(e, (err as Error).message);
      return;
    }
    this.entries.delete(req.rid);
    this.kvm.release(e.bootstrap.room);
    this.stats.transfers++;
    this.stats.tokensReceived += r.payload!.length / payloadBytesPerToken(this.scheduler.runner.kvPool);
    req.kvCommittedLen = n;
    req.cachedTokens = aux.cachedTokens;
    if (aux.firstTokenId >= 0 && req.maxNewTokens > 0) {
      if (req.returnLogprob && aux.outputTokenLogprob) {
        req.outputTokenLogprobs.push(aux.outputTokenLogprob);
        req.outputTopLogprobs.push(aux.outputTopLogprobs ?? []);
      }
      req.appendToken(aux.firstTokenId);
    } else req.finishReason = { type: 'length', length: 0 };
    this.scheduler.installPrebuilt(req);
  }

  /** True while requests wait for their KV. */
  get hasWork(): boolean {
    return this.entries.size > 0;
  }

  close(): void {
    this.pollTimer.stop();
    this.kvm.close();
  }
}

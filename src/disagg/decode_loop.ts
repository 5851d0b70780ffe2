// The decode-only loop around the scheduler (SGLang disaggregation/decode.py; serving-spec.md §5.4, decode side).
// Prealloc queue: a new request's prefill server is looked up through its bootstrap server (prefill_directory.ts:
// topology, rank mapping, the prefill DP rank of its room, the transfer endpoint); when KV memory allows (the prompt
// plus num_reserved_decode_tokens for every running request) it gets a request slot and KV locs for its whole prompt,
// and its destination goes to the prefill side. Transfer queue: each chunk that arrives is written into the pool (every
// attn_tp rank's heads, kv_io.ts); when the aux data is there the room is checked, the first token appended (through
// the grammar, for a constrained request: compiled here meanwhile) and the request joins the running batch without a
// forward (Scheduler.installPrebuilt). Failures answer 500 with SGLang's messages and free the request's KV;
// SGLANG_DISAGGREGATION_WAITING_TIMEOUT bounds the wait for the KV; a prefill server that misses its heartbeats fails
// its requests.
import { Logger } from '../common/index.js';
import type { BootstrapInfo, Req, Scheduler } from '../scheduler/index.js';
import { FakeDecodeKVManager } from './fake_transfer.js';
import type { GroupKv } from './kv_io.js';
import { KVPoll, type DisaggEnv } from './kv_poll.js';
import { DecodeKVManager, type DecodeKVManagerLike, type KVReceiverLike } from './kv_receiver.js';
import { PrefillDirectory, type PrefillInfo } from './prefill_directory.js';
import { kvTransferError } from './transfer_frames.js';
import { DraftKv } from './draft_kv.js';
import type { UcxAddon } from './ucx_addon.js';
import { PollTimer } from './poll_timer.js';

interface Entry {
  readonly req: Req;
  readonly bootstrap: BootstrapInfo;
  /** The bootstrap server's host:port. */
  readonly addr: string;
  readonly createdMs: number;
  receiver: KVReceiverLike | null;
  /** The prefill group's transfer endpoint (host:port). */
  endpoint: string | null;
  sentMs: number;
  /** Some chunk came by UCX put. */
  viaUcx: boolean;
  /** Draft-model tokens written (speculative decoding). */
  draftTokens: number;
}

/** Counters of the decode role (metrics and tests). */
export interface DecodeStats {
  numPreallocQueueReqs: number;
  numTransferQueueReqs: number;
  transfers: number;
  failedTransfers: number;
  bytesReceived: number;
  tokensReceived: number;
  /** Chunks written into the pool (a chunked prefill sends one per finished chunk). */
  chunksReceived: number;
  /** Transfers whose chunks came by UCX put (the rest over TCP). */
  ucxTransfers: number;
}

/** Options of the decode role. */
export interface DecodeLoopOptions {
  readonly scheduler: Scheduler;
  readonly kv: GroupKv;
  readonly env: DisaggEnv;
  readonly kick: () => void;
  readonly logger: Logger;
  readonly backend: 'tcp' | 'ucx' | 'fake';
  readonly ucx?: UcxAddon | null;
  readonly ucxSettings?: Record<string, string>;
  readonly pageSize: number;
  readonly kvCacheDtype: string;
}

/** PD decode role of one group: the prealloc and transfer queues. */
export class DecodeLoop {
  private readonly entries = new Map<string, Entry>();
  private readonly kvm: DecodeKVManagerLike;
  private readonly dir: PrefillDirectory;
  readonly stats: DecodeStats = { numPreallocQueueReqs: 0, numTransferQueueReqs: 0, transfers: 0, failedTransfers: 0, bytesReceived: 0, tokensReceived: 0, chunksReceived: 0, ucxTransfers: 0 };
  /** Timeouts and memory that frees up are noticed by polling (transfer events kick the loop themselves). */
  private readonly pollTimer = new PollTimer(20, () => this.entries.size > 0, () => this.kick());
  private readonly pendingBootstrap = new Map<string, BootstrapInfo>();
  private readonly scheduler: Scheduler;
  private readonly kv: GroupKv;
  private readonly env: DisaggEnv;
  private readonly kick: () => void;
  private readonly logger: Logger;
  /** Speculative decoding: this side's draft pool (the prefill side sends its draft rows and state). */
  private readonly draft: DraftKv | null;

  /** @throws Error from UCX when its worker or staging region cannot be set up */
  constructor(o: DecodeLoopOptions) {
    this.scheduler = o.scheduler;
    this.kv = o.kv;
    this.env = o.env;
    this.kick = o.kick;
    this.logger = o.logger;
    this.draft = o.scheduler.spec ? new DraftKv(o.scheduler.spec) : null;
    this.kvm = o.backend === 'fake' ? new FakeDecodeKVManager() : new DecodeKVManager(() => this.kick(), o.ucx ?? null, undefined, o.ucxSettings ?? {});
    const check = (info: PrefillInfo): string | null => {
      if (info.pageSize !== null && info.pageSize !== o.pageSize) return `Page size mismatch: prefill server has page_size=${info.pageSize}, but decode server has page_size=${o.pageSize}. Both servers must use the same --page-size value.`;
      if (info.kvCacheDtype !== null && info.kvCacheDtype !== o.kvCacheDtype) return `KV cache dtype mismatch: prefill server has kv_cache_dtype=${info.kvCacheDtype}, but decode server has kv_cache_dtype=${o.kvCacheDtype}. Both servers must use the same --kv-cache-dtype value.`;
      return null;
    };
    this.dir = new PrefillDirectory(o.kv.layout.spec.ranks, o.env, o.logger, check, (addr, eps) => this.onLost(addr, eps), () => this.kick());
    this.scheduler.prebuilt = { onAdmit: (req) => this.onAdmit(req) };
  }

  /** Called before Scheduler.addRequest with the request's bootstrap fields. */
  expect(rid: string, b: BootstrapInfo | undefined): void {
    if (b) this.pendingBootstrap.set(rid, b);
  }

  /** The scheduler refused the request expect() saw (its bootstrap fields are dropped). */
  forget(rid: string): void {
    this.pendingBootstrap.delete(rid);
  }

  /** The scheduler accepted a request (it is live, in no queue): it waits for its KV here. */
  private onAdmit(req: Req): void {
    const b = this.pendingBootstrap.get(req.rid);
    this.pendingBootstrap.delete(req.rid);
    if (!b) {
      this.scheduler.failPrebuilt(req, { type: 'abort', message: 'A decode server (--disaggregation-mode decode) takes requests through the router only: bootstrap_host, bootstrap_port and bootstrap_room are required.', statusCode: 400 });
      return;
    }
    // a constrained request's grammar compiles while its KV travels (SGLang's decode grammar queue)
    if (req.grammar && this.scheduler.grammar) this.scheduler.grammar.open(req.rid, req.grammar, req.requireReasoning);
    const e: Entry = { req, bootstrap: b, addr: `${b.host}:${b.port ?? ''}`, createdMs: Date.now(), receiver: null, endpoint: null, sentMs: 0, viaUcx: false, draftTokens: 0 };
    this.entries.set(req.rid, e);
    if (b.port === null && this.kvm.backend !== 'fake') {
      this.fail(e, 'the request has no bootstrap port (the router was given `none`)');
      return;
    }
    this.pollTimer.ensure();
  }

  /** Aborts a request still waiting for its KV (client abort). @returns true if it was one */
  abort(rid: string): boolean {
    const e = this.entries.get(rid);
    if (!e) return false;
    if (e.receiver) this.kvm.abort(e.receiver, 'Aborted by AbortReq.');
    this.finish(e, { type: 'abort', message: 'Abort in waiting queue', statusCode: undefined });
    return true;
  }

  /** Aborts every waiting request (shutdown, the engine's fatal error: their KV is freed). */
  abortAll(reason?: { message: string; statusCode: number }): void {
    for (const e of [...this.entries.values()]) {
      if (e.receiver) this.kvm.abort(e.receiver, reason?.message ?? 'Aborted by AbortReq.');
      this.finish(e, reason ? { type: 'abort', message: reason.message, statusCode: reason.statusCode } : { type: 'abort', message: 'Abort in waiting queue', statusCode: undefined });
    }
  }

  /** Ends a waiting request: its KV (allocated, not committed) is freed uncached, its grammar closed. */
  private finish(e: Entry, reason: { type: 'abort'; message: string; statusCode: number | undefined }): void {
    this.entries.delete(e.req.rid);
    this.kvm.release(e.bootstrap.room);
    this.dir.forgetRoom(e.bootstrap.room);
    if (e.req.grammar) this.scheduler.grammar?.close(e.req.rid);
    const r = reason.statusCode === undefined ? { type: 'abort' as const, message: reason.message } : { type: 'abort' as const, message: reason.message, statusCode: reason.statusCode };
    this.scheduler.failPrebuilt(e.req, r);
  }

  private fail(e: Entry, why: string): void {
    this.stats.failedTransfers++;
    const kind = e.receiver ? 'transfer' : 'handshake';
    const msg = `Decode ${kind} failed for request rank=0 decode_req.req.rid='${e.req.rid}' decode_req.req.bootstrap_room=${e.bootstrap.room} with exception ${kvTransferError(e.bootstrap.room, why)}`;
    this.logger.error(msg);
    this.finish(e, { type: 'abort', message: msg, statusCode: 500 });
  }

  /** A prefill server missed its heartbeats: its requests fail (SGLang _handle_node_failure). */
  private onLost(addr: string, endpoints: string[]): void {
    const why = `Lost connection with prefill instance (bootstrap_addr: ${addr})`;
    let n = 0;
    for (const e of [...this.entries.values()]) {
      if (e.addr !== addr) continue;
      n++;
      if (e.receiver) e.receiver.fail(why);
      else this.fail(e, why);
    }
    for (const ep of endpoints) (this.kvm as Partial<DecodeKVManager>).dropEndpoint?.(ep, why);
    this.logger.error(`${why}, ${n} requests affected`);
  }

  /** Advances the prealloc and transfer queues (called by the engine loop before each step). */
  poll(): void {
    const now = Date.now();
    let prealloc = 0;
    let transfer = 0;
    for (const e of [...this.entries.values()]) {
      if (!this.entries.has(e.req.rid)) continue;
      if (!e.receiver) {
        if (!this.prealloc(e)) {
          if (this.entries.has(e.req.rid)) prealloc++;
          continue;
        }
        e.sentMs = now;
      }
      const r = e.receiver!;
      try {
        for (const c of r.takeChunks()) {
          const locs = this.scheduler.mem.reqToTokenPool.read(e.req.reqPoolIdx, c.start, c.start + c.count);
          if (c.draft) {
            if (this.draft) this.draft.write(locs, c.data);
            e.draftTokens += c.count;
            continue;
          }
          this.kv.write(locs, c.data);
          this.stats.chunksReceived++;
          this.stats.bytesReceived += c.data.length;
          this.stats.tokensReceived += c.count;
          if (c.viaUcx) e.viaUcx = true;
        }
      } catch (err) {
        this.kvm.abort(r, (err as Error).message);
        this.fail(e, (err as Error).message);
        continue;
      }
      const st = r.poll();
      if (st === KVPoll.Success) {
        if (!this.install(e)) transfer++;
      } else if (st === KVPoll.Failed) this.fail(e, r.error ?? 'unknown');
      else if (now - e.sentMs > this.env.waitingTimeoutMs) {
        const why = `Request ${e.bootstrap.room} timed out after ${((now - e.sentMs) / 1000).toFixed(1)}s in KVPoll.WaitingForInput`;
        this.logger.warning('Some requests fail to receive KV Cache transfer done signal after bootstrapping. If a greater mean TTFT is acceptable, you can \'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600\' (10 minutes) to relax the timeout condition. ');
        this.kvm.abort(r, why);
        this.fail(e, why);
      } else transfer++;
    }
    this.stats.numPreallocQueueReqs = prealloc;
    this.stats.numTransferQueueReqs = transfer;
  }

  /** Looks up the prefill side and allocates the request's KV; sends its destination. @returns true once sent */
  private prealloc(e: Entry): boolean {
    let endpoint = '';
    let info: PrefillInfo | null = null;
    if (this.kvm.backend !== 'fake') {
      const onError = (why: string): void => {
        // the lookup failed: every request waiting on that prefill server fails (SGLang)
        this.dir.forget(e.addr);
        for (const x of [...this.entries.values()]) if (!x.receiver && x.addr === e.addr) this.fail(x, why);
      };
      info = this.dir.info(e.addr, onError) ?? null;
      if (!info) return false;
      const dp = this.dir.dpRank(e.addr, info, e.bootstrap.room);
      if (dp === undefined) return false;
      const ep = this.dir.endpoint(e.addr, info, dp, onError);
      if (ep === undefined) return false;
      endpoint = ep;
    }
    // memory: the prompt plus num_reserved_decode_tokens for every running request and this one
    const mem = this.scheduler.mem;
    const n = e.req.originInputIds.length;
    const reserve = this.env.numReservedDecodeTokens * (this.scheduler.running.length + 1);
    if (mem.availableWithEvictable() < n + Math.min(reserve, Math.max(0, mem.allocator.size - n)) || mem.reqToTokenPool.availableSize() === 0) return false;
    mem.admit(e.req, mem.cache.matchPrefix([]));
    if (!mem.allocTokens(e.req, n)) {
      mem.releaseRetracted(e.req);
      return false;
    }
    e.endpoint = endpoint;
    e.receiver = this.kvm.createReceiver(endpoint, e.bootstrap.room);
    const layout = this.kv.layout;
    this.kvm.init(e.receiver, {
      room: e.bootstrap.room, numTokens: n, layout: layout.fingerprint, bytesPerToken: layout.bytesPerToken, ...(info ? { decodeTp: this.dir.targets(info) } : {}),
      ...(this.draft ? { draft: { layout: this.draft.fingerprint, bytesPerToken: this.draft.bytesPerToken } } : {}),
    });
    return true;
  }

  /** The KV and the aux data are in: the request joins the running batch. @returns false while its grammar compiles */
  private install(e: Entry): boolean {
    const r = e.receiver!;
    const aux = r.aux!;
    const req = e.req;
    if (aux.room !== e.bootstrap.room) {
      this.fail(e, `Metadata corruption detected: room ${aux.room} != ${e.bootstrap.room}`);
      return true;
    }
    if (this.draft && this.kvm.backend !== 'fake' && (!aux.draft || e.draftTokens !== req.originInputIds.length)) {
      this.fail(e, `the prefill server sent no draft KV and state for speculative decoding (${e.draftTokens} of ${req.originInputIds.length} draft rows): run it with the same --speculative-algorithm and draft model as the decode server`);
      return true;
    }
    const g = req.grammar ? this.scheduler.grammar : null;
    if (g) {
      const phase = g.phase(req.rid);
      if (phase === 'compiling') return false;
      if (phase !== 'ready') {
        this.entries.delete(req.rid);
        this.kvm.release(e.bootstrap.room);
        g.close(req.rid);
        this.scheduler.failPrebuilt(req, { type: 'abort', message: `Failed to compile ${req.grammar!.kind} grammar: ${g.error(req.rid)?.message ?? 'unknown error'}`, statusCode: 400, errType: 'BadRequestError' });
        return true;
      }
    }
    this.entries.delete(req.rid);
    this.kvm.release(e.bootstrap.room);
    this.dir.forgetRoom(e.bootstrap.room);
    this.stats.transfers++;
    if (e.viaUcx) this.stats.ucxTransfers++;
    const n = req.originInputIds.length;
    if (this.draft && aux.draft) DraftKv.install(req, aux.draft);
    if (this.kvm.backend !== 'fake') this.kv.recordDigest(e.bootstrap.room, this.scheduler.mem.reqToTokenPool.read(req.reqPoolIdx, 0, n));
    req.kvCommittedLen = n;
    req.cachedTokens = aux.cachedTokens;
    if (aux.firstTokenId >= 0 && req.maxNewTokens > 0) {
      if (req.returnLogprob && aux.outputTokenLogprob) {
        req.outputTokenLogprobs.push(aux.outputTokenLogprob);
        req.outputTopLogprobs.push(aux.outputTopLogprobs ?? []);
      }
      req.appendToken(aux.firstTokenId);
      // the first token advances the grammar as a sampled one would (it was sampled under the same grammar on the
      // prefill side); a grammar that terminates with it finishes the request
      if (g && g.accept(req.rid, aux.firstTokenId) && !req.finishReason) req.finishReason = { type: 'stop', matched: aux.firstTokenId };
    } else req.finishReason = { type: 'length', length: 0 };
    if (req.isFinished && g) g.close(req.rid);
    this.scheduler.installPrebuilt(req);
    return true;
  }

  /** True while requests wait for their KV. */
  get hasWork(): boolean {
    return this.entries.size > 0;
  }

  /** The transfer backend in use. */
  get backend(): string {
    return this.kvm.backend;
  }

  close(): void {
    this.pollTimer.stop();
    this.dir.close();
    this.kvm.close();
  }
}

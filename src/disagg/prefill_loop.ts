// The prefill-only loop around the scheduler (SGLang disaggregation/prefill.py; serving-spec.md §5.4, prefill side):
// a PD request is prefilled with max_new_tokens 1; when it finishes, its prompt's KV rows are copied out of the pool
// (kv_pages.ts) before the pool caches or frees them, and sent with the aux data (first token, its logprobs, the room)
// once the decode side's destination is there. Its HTTP answer is held in the inflight queue until the transfer
// succeeded; a failed or timed-out transfer answers 500 "Prefill transfer failed …".
// [choice] SGLang holds a request in the bootstrap queue until the destination arrives, then writes straight from the
// pool; tsglang prefills at once and keeps the copied rows until then (the same bytes reach the decode pool; the
// prefill pool is free sooner, at the cost of one host copy).
import { Logger } from '../common/index.js';
import type { ReqTokenOutput, Req, Scheduler, TokenizedReq } from '../scheduler/index.js';
import { BootstrapServer } from './bootstrap_server.js';
import { gatherKv, layoutFingerprint } from './kv_pages.js';
import { KVPoll, type DisaggEnv } from './kv_poll.js';
import { TcpPrefillKVManager, type AuxData, type TcpKVSender } from './tcp_transfer.js';
import type { UcxAddon } from './ucx_addon.js';
import { PollTimer } from './poll_timer.js';

interface Entry {
  readonly rid: string;
  readonly room: number;
  readonly sender: TcpKVSender;
  readonly createdMs: number;
  /** Copied rows and aux, once the prefill finished. */
  pending: { payload: Buffer; aux: AuxData } | null;
  /** The request's final output, held until the transfer ends. */
  held: ReqTokenOutput | null;
}

/** Counters of the prefill role (metrics and tests). */
export interface PrefillStats {
  numBootstrapQueueReqs: number;
  numInflightQueueReqs: number;
  transfers: number;
  failedTransfers: number;
  bytesSent: number;
  tokensSent: number;
  /** Payloads sent by UCX put (the rest over TCP). */
  ucxTransfers: number;
}

/** PD prefill role: the bootstrap server, the transfer endpoint, and the bootstrap / inflight queues. */
export class PrefillLoop {
  private readonly entries = new Map<string, Entry>();
  readonly stats: PrefillStats = { numBootstrapQueueReqs: 0, numInflightQueueReqs: 0, transfers: 0, failedTransfers: 0, bytesSent: 0, tokensSent: 0, ucxTransfers: 0 };
  /** Socket events wake the loop themselves; this timer notices the bootstrap timeout. */
  private readonly pollTimer = new PollTimer(50, () => this.entries.size > 0, () => this.kick());

  private constructor(
    private readonly scheduler: Scheduler,
    private readonly kvm: TcpPrefillKVManager,
    private readonly bootstrap: BootstrapServer,
    readonly bootstrapPort: number,
    private readonly env: DisaggEnv,
    private readonly kick: () => void,
    private readonly logger: Logger,
  ) {
    scheduler.prefillFinished = (req) => this.onFinished(req);
  }

  /**
   * Starts the bootstrap server on host:bootstrapPort and the transfer endpoint, and registers this rank.
   * @throws Error when the bootstrap port is taken
   */
  static async start(o: { scheduler: Scheduler; host: string; bootstrapPort: number; advertiseHost: string; pageSize: number; kvCacheDtype: string; env: DisaggEnv; kick: () => void; logger: Logger; ucx?: UcxAddon | null; ucxSettings?: Record<string, string> }): Promise<PrefillLoop> {
    const bootstrap = new BootstrapServer();
    const port = await bootstrap.listen(o.host, o.bootstrapPort);
    const kvm = new TcpPrefillKVManager(layoutFingerprint(o.scheduler.runner.kvPool), o.kick, o.ucx ?? null, o.ucxSettings ?? {});
    const rankPort = await kvm.listen(o.host);
    bootstrap.register({
      attn_tp_size: 1, attn_tp_rank: 0, attn_cp_size: 1, attn_cp_rank: 0, attn_dp_size: 1, attn_dp_rank: 0, pp_size: 1, pp_rank: 0,
      system_dp_size: 1, system_dp_rank: 0, rank_ip: o.advertiseHost, rank_port: rankPort, page_size: o.pageSize, kv_cache_dtype: o.kvCacheDtype,
      load_balance_method: 'round_robin', transfer_backend: kvm.backend,
    });
    o.logger.info(`PD prefill: bootstrap server on ${o.host}:${port}, KV transfer endpoint (${kvm.backend}; control over TCP) on ${o.advertiseHost || o.host}:${rankPort}`);
    return new PrefillLoop(o.scheduler, kvm, bootstrap, port, o.env, o.kick, o.logger);
  }

  /**
   * A new request: PD requests get a sender and run with max_new_tokens 1 (the decode side generates the rest).
   * @returns the request as the scheduler should receive it
   */
  admit(t: TokenizedReq): TokenizedReq {
    if (!t.bootstrap) return t;
    const sender = this.kvm.createSender(t.bootstrap.room);
    this.entries.set(t.rid, { rid: t.rid, room: t.bootstrap.room, sender, createdMs: Date.now(), pending: null, held: null });
    this.pollTimer.ensure();
    return { ...t, params: { ...t.params, maxNewTokens: Math.min(1, t.params.maxNewTokens ?? 1) } };
  }

  /** Undo of admit when the scheduler refused the request. */
  forget(rid: string): void {
    const e = this.entries.get(rid);
    if (!e) return;
    this.entries.delete(rid);
    this.kvm.release(e.room);
  }

  private onFinished(req: Req): void {
    const e = this.entries.get(req.rid);
    if (!e || req.finishReason?.type === 'abort') return;
    const n = req.originInputIds.length;
    const locs = this.scheduler.mem.reqToTokenPool.read(req.reqPoolIdx, 0, n);
    const payload = gatherKv(this.scheduler.runner.kvPool, locs);
    const lp = req.returnLogprob && req.outputTokenLogprobs.length > 0 ? req.outputTokenLogprobs[0] : null;
    e.pending = {
      payload,
      aux: { room: e.room, firstTokenId: req.outputIds[0] ?? -1, outputTokenLogprob: lp, outputTopLogprobs: lp ? req.outputTopLogprobs[0] ?? null : null, cachedTokens: req.cachedTokens },
    };
  }

  /**
   * The step's outputs: a PD request's final output is held until its transfer ended; the rest pass.
   * @returns the outputs to emit now
   */
  filterOutputs(outputs: ReqTokenOutput[]): ReqTokenOutput[] {
    if (this.entries.size === 0) return outputs;
    const out: ReqTokenOutput[] = [];
    for (const o of outputs) {
      const e = this.entries.get(o.rid);
      if (!e || o.finishReason === null) out.push(o);
      else if (o.finishReason.type === 'abort') {
        e.sender.abort(o.finishReason.message);
        this.forget(o.rid);
        out.push(o);
      } else e.held = o;
    }
    return out;
  }

  /**
   * Advances the queues: sends KV whose destination arrived, releases answers of finished transfers, fails
   * transfers that timed out or broke. @returns outputs that became ready
   */
  poll(): ReqTokenOutput[] {
    const ready: ReqTokenOutput[] = [];
    const now = Date.now();
    let boot = 0;
    let inflight = 0;
    for (const e of [...this.entries.values()]) {
      const st = e.sender.poll();
      if (st === KVPoll.WaitingForInput && e.pending) {
        if (e.pending.payload.length > 0) this.stats.tokensSent += e.sender.dst!.numTokens;
        e.sender.send(e.pending.payload, e.pending.aux);
        this.stats.bytesSent += e.pending.payload.length;
        e.pending = null;
      } else if (st === KVPoll.Bootstrapping && now - e.createdMs > this.env.bootstrapTimeoutMs) {
        e.sender.fail(`the decode side sent no destination within ${this.env.bootstrapTimeoutMs / 1000} s (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT)`);
      }
      const s2 = e.sender.poll();
      if (s2 === KVPoll.Success && e.held) {
        this.stats.transfers++;
        if (e.sender.via === 'ucx') this.stats.ucxTransfers++;
        ready.push(e.held);
        this.forget(e.rid);
      } else if (s2 === KVPoll.Failed && (e.held || e.pending)) {
        this.stats.failedTransfers++;
        const msg = `Prefill transfer failed for request rank=0 req.rid='${e.rid}' req.bootstrap_room=${e.room} with exception ${e.sender.error ?? 'unknown'}`;
        this.logger.error(msg);
        const base = e.held;
        ready.push(base ? { ...base, finishReason: { type: 'abort', message: msg, statusCode: 500 } } : this.abortOutput(e.rid, msg));
        this.forget(e.rid);
      } else if (s2 === KVPoll.Bootstrapping) boot++;
      else inflight++;
    }
    this.stats.numBootstrapQueueReqs = boot;
    this.stats.numInflightQueueReqs = inflight;
    return ready;
  }

  private abortOutput(rid: string, message: string): ReqTokenOutput {
    return { rid, newIds: [], finishReason: { type: 'abort', message, statusCode: 500 }, promptTokens: 0, completionTokens: 0, cachedTokens: 0, numRetractions: 0 };
  }

  /** True while transfers are pending. */
  get hasWork(): boolean {
    return this.entries.size > 0;
  }

  /** Stops the servers. */
  async close(): Promise<void> {
    this.pollTimer.stop();
    await this.kvm.close();
    await this.bootstrap.close();
  }
}

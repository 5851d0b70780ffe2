// The prefill-only loop around the scheduler (SGLang disaggregation/prefill.py; serving-spec.md §5.4, prefill side).
// Bootstrap queue: a PD request gets a sender for its room and waits until the decode side's destination is there
// (KVPoll WaitingForInput) before it is queued (max_new_tokens 1: the decode side generates the rest). Each finished
// prefill chunk's pages go out as the chunk finishes (SGLang send_kv_chunk: whole pages; the last chunk sends the rest),
// read from the pool (kv_io.ts: every attn_tp rank's heads) into the wire layout. Inflight queue: the finished
// request's output is held until its sender is Success (then released) or Failed (500 "Prefill transfer failed …").
// A destination that never comes fails the request after SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (500 "Prefill
// bootstrap failed …").
import { Logger } from '../common/index.js';
import type { ReqTokenOutput, Req, Scheduler, TokenizedReq } from '../scheduler/index.js';
import { registerDpRank, registerToBootstrap, type RankRegistration } from './bootstrap_server.js';
import { FakePrefillKVManager } from './fake_transfer.js';
import type { GroupKv } from './kv_io.js';
import { KVPoll, type DisaggEnv } from './kv_poll.js';
import { PrefillKVManager, type KVSenderLike, type PrefillKVManagerLike } from './kv_sender.js';
import { kvTransferError } from './transfer_frames.js';
import { DraftKv } from './draft_kv.js';
import type { UcxAddon } from './ucx_addon.js';
import { PollTimer } from './poll_timer.js';

interface Entry {
  readonly rid: string;
  readonly room: number;
  readonly sender: KVSenderLike;
  readonly createdMs: number;
  /** The request while it waits in the bootstrap queue (null once queued in the scheduler). */
  held: TokenizedReq | null;
  /** Prompt tokens whose rows were sent. */
  sentTokens: number;
  /** The request's final output, held until the transfer ends. */
  output: ReqTokenOutput | null;
  /** The prefill finished and the aux data went out. */
  finished: boolean;
}

/** Counters of the prefill role (metrics and tests). */
export interface PrefillStats {
  numBootstrapQueueReqs: number;
  numInflightQueueReqs: number;
  transfers: number;
  failedTransfers: number;
  bytesSent: number;
  tokensSent: number;
  /** Chunks sent (one per finished prefill chunk of a PD request). */
  chunksSent: number;
  /** Transfers whose payload went by UCX put (the rest over TCP). */
  ucxTransfers: number;
}

/** Where this prefill group sits (its registration with the bootstrap server). */
export interface PrefillGroupInfo {
  /** The bootstrap server's URL (http://host:port), served by this server's main thread. */
  readonly bootstrapUrl: string;
  /** This server's DP size and this group's DP rank; attention: --enable-dp-attention (else DP replicas). */
  readonly dp: { readonly size: number; readonly rank: number; readonly attention: boolean };
  /** --load-balance-method as resolved (prefill: follow_bootstrap_room unless given). */
  readonly loadBalanceMethod: string;
  readonly pageSize: number;
  readonly kvCacheDtype: string;
}

/** PD prefill role of one group: its transfer endpoint and the bootstrap / inflight queues. */
export class PrefillLoop {
  private readonly entries = new Map<string, Entry>();
  readonly stats: PrefillStats = { numBootstrapQueueReqs: 0, numInflightQueueReqs: 0, transfers: 0, failedTransfers: 0, bytesSent: 0, tokensSent: 0, chunksSent: 0, ucxTransfers: 0 };
  /** Socket events wake the loop themselves; this timer notices the bootstrap timeout. */
  private readonly pollTimer = new PollTimer(50, () => this.entries.size > 0, () => this.kick());
  /** Speculative decoding: the draft pool whose rows (and the draft state) follow the target KV. */
  private readonly draft: DraftKv | null;

  private constructor(
    private readonly scheduler: Scheduler,
    private readonly kv: GroupKv,
    private readonly kvm: PrefillKVManagerLike,
    private readonly group: PrefillGroupInfo,
    private readonly env: DisaggEnv,
    private readonly kick: () => void,
    private readonly logger: Logger,
  ) {
    scheduler.prefillFinished = (req) => this.onFinished(req);
    scheduler.prefillChunkDone = (req) => this.onChunk(req);
    this.draft = scheduler.spec ? new DraftKv(scheduler.spec) : null;
    // a PD request finishes with its first token: its draft extend still runs (its state goes to the decode side)
    if (scheduler.spec) scheduler.spec.keepDraftOf = (req) => this.entries.has(req.rid);
  }

  /**
   * Starts the transfer endpoint and registers every attn_tp rank of this group with the bootstrap server (PUT /route).
   * @throws Error when the endpoint cannot listen or the bootstrap server cannot be reached
   */
  static async start(o: { scheduler: Scheduler; kv: GroupKv; host: string; advertiseHost: string; group: PrefillGroupInfo; env: DisaggEnv; kick: () => void; logger: Logger; backend: 'tcp' | 'ucx' | 'fake'; ucx?: UcxAddon | null; ucxSettings?: Record<string, string> }): Promise<PrefillLoop> {
    const kvm: PrefillKVManagerLike = o.backend === 'fake' ? new FakePrefillKVManager() : new PrefillKVManager(o.kv.layout.fingerprint, o.kick, o.ucx ?? null, o.ucxSettings ?? {});
    const rankPort = await kvm.listen(o.host);
    const g = o.group;
    const tp = o.kv.layout.spec.ranks;
    for (let r = 0; r < tp; r++) {
      // every attn_tp rank of the group is reached through the group's endpoint (the ranks are its threads)
      const reg: RankRegistration = {
        attn_tp_size: tp, attn_tp_rank: r, attn_cp_size: 1, attn_cp_rank: 0,
        attn_dp_size: g.dp.attention ? g.dp.size : 1, attn_dp_rank: g.dp.attention ? g.dp.rank : 0, pp_size: 1, pp_rank: 0,
        system_dp_size: g.dp.attention ? 1 : g.dp.size, system_dp_rank: g.dp.attention ? 0 : g.dp.rank,
        rank_ip: o.advertiseHost, rank_port: rankPort, page_size: g.pageSize, kv_cache_dtype: g.kvCacheDtype,
        load_balance_method: g.loadBalanceMethod, transfer_backend: kvm.backend, is_mla: o.kv.layout.spec.kvHeads === null,
      };
      await registerToBootstrap(g.bootstrapUrl, reg);
    }
    o.logger.info(`PD prefill DP${g.dp.rank}: KV transfer endpoint (${kvm.backend}${kvm.backend === 'fake' ? ': no transfer' : '; control over TCP'}) on ${o.advertiseHost || o.host}:${rankPort}, ${tp} attn_tp rank(s) registered with ${g.bootstrapUrl}`);
    return new PrefillLoop(o.scheduler, o.kv, kvm, g, o.env, o.kick, o.logger);
  }

  /**
   * A new request. A PD request gets a sender; it goes to the scheduler (max_new_tokens 1) once the decode side's
   * destination is there, and waits in the bootstrap queue until then.
   * @returns the request to queue now, or null when it waits
   * @throws InvalidRequestError from the scheduler's checks (the request is not kept)
   */
  admit(t: TokenizedReq): TokenizedReq | null {
    if (!t.bootstrap) return t;
    this.scheduler.validateRequest(t);
    const sender = this.kvm.createSender(t.bootstrap.room);
    const pd = { ...t, params: { ...t.params, maxNewTokens: Math.min(1, t.params.maxNewTokens ?? 1) } };
    const e: Entry = { rid: t.rid, room: t.bootstrap.room, sender, createdMs: Date.now(), held: pd, sentTokens: 0, output: null, finished: false };
    this.entries.set(t.rid, e);
    if (this.group.dp.size > 1 && this.group.loadBalanceMethod !== 'follow_bootstrap_room') {
      // the decode side finds this room's DP rank through the bootstrap server (SGLang _register_prefill_dp_rank)
      registerDpRank(this.group.bootstrapUrl, e.room, this.group.dp.rank).catch((err: Error) => this.logger.error(err.message));
    }
    this.pollTimer.ensure();
    if (sender.poll() !== KVPoll.WaitingForInput) return null;
    e.held = null;
    return pd;
  }

  /** Undo of admit when the scheduler refused the request. */
  forget(rid: string): void {
    const e = this.entries.get(rid);
    if (!e) return;
    this.entries.delete(rid);
    this.kvm.release(e.room);
  }

  /** Aborts a request still in the bootstrap queue. @returns its output, or null when it is not there */
  abort(rid: string): ReqTokenOutput | null {
    const e = this.entries.get(rid);
    if (!e?.held) return null;
    e.sender.abort('Aborted by AbortReq.');
    this.forget(rid);
    return this.abortOutput(e, 'Abort in waiting queue', undefined);
  }

  /** Aborts every request in the bootstrap queue. @returns their outputs */
  abortAll(): ReqTokenOutput[] {
    return [...this.entries.values()].filter((e) => e.held).map((e) => this.abort(e.rid)!);
  }

  /** Sends the rows of tokens [sentTokens, upTo) of a PD request. */
  private sendRows(e: Entry, req: Req, upTo: number): void {
    if (upTo <= e.sentTokens || e.sender.poll() === KVPoll.Failed) return;
    const locs = this.scheduler.mem.reqToTokenPool.read(req.reqPoolIdx, e.sentTokens, upTo);
    const wire = this.kv.read(locs);
    e.sender.sendChunk(wire, e.sentTokens, upTo - e.sentTokens);
    this.stats.chunksSent++;
    this.stats.bytesSent += wire.length;
    this.stats.tokensSent += upTo - e.sentTokens;
    e.sentTokens = upTo;
  }

  /** A non-final prefill chunk finished: its whole pages go out now (SGLang send_kv_chunk). */
  private onChunk(req: Req): void {
    const e = this.entries.get(req.rid);
    if (!e) return;
    const page = this.group.pageSize;
    this.sendRows(e, req, Math.floor(req.kvCommittedLen / page) * page);
  }

  /** The prefill finished: the remaining rows, then the aux data (first token, its logprobs, the room). */
  private onFinished(req: Req): void {
    const e = this.entries.get(req.rid);
    if (!e || req.finishReason?.type === 'abort') return;
    const n = req.originInputIds.length;
    this.sendRows(e, req, n);
    const locs = this.scheduler.mem.reqToTokenPool.read(req.reqPoolIdx, 0, n);
    this.kv.recordDigest(e.room, locs);
    // speculative decoding on both sides: the draft model's rows of the prompt and its state
    const wantsDraft = this.draft !== null && e.sender.dst?.draft?.layout === this.draft.fingerprint;
    if (wantsDraft) {
      const rows = this.draft!.read(locs);
      e.sender.sendChunk(rows, 0, n, true);
      this.stats.bytesSent += rows.length;
    }
    const lp = req.returnLogprob && req.outputTokenLogprobs.length > 0 ? req.outputTokenLogprobs[0] : null;
    e.sender.finish({
      room: e.room, firstTokenId: req.outputIds[0] ?? -1, outputTokenLogprob: lp, outputTopLogprobs: lp ? req.outputTopLogprobs[0] ?? null : null, cachedTokens: req.cachedTokens,
      ...(wantsDraft ? { draft: DraftKv.stateOf(req) } : {}),
    });
    e.finished = true;
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
      } else e.output = o;
    }
    return out;
  }

  /**
   * Advances the queues: queues requests whose destination arrived, releases answers of finished transfers, fails
   * bootstraps that timed out and transfers that broke.
   * @returns outputs that became ready
   */
  poll(): ReqTokenOutput[] {
    const ready: ReqTokenOutput[] = [];
    const now = Date.now();
    let boot = 0;
    let inflight = 0;
    for (const e of [...this.entries.values()]) {
      let st = e.sender.poll();
      if (e.held) {
        if (st === KVPoll.Bootstrapping && now - e.createdMs > this.env.bootstrapTimeoutMs) {
          const why = `Request ${e.room} timed out after ${((now - e.createdMs) / 1000).toFixed(1)}s in KVPoll.Bootstrapping`;
          this.logger.warning('Some requests timed out when bootstrapping, which means prefill instances fail to receive the KV indices from the decode instance of this request. If a greater mean TTFT is acceptable, you can \'export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600\' (10 minutes) to relax the timeout condition.');
          e.sender.abort(why);
          st = KVPoll.Failed;
        }
        if (st === KVPoll.Failed) {
          this.stats.failedTransfers++;
          const msg = `Prefill bootstrap failed for request rank=0 req.rid='${e.rid}' req.bootstrap_room=${e.room} with exception ${kvTransferError(e.room, e.sender.error ?? 'unknown')}`;
          this.logger.error(msg);
          this.forget(e.rid);
          ready.push(this.abortOutput(e, msg, 500));
        } else if (st === KVPoll.Bootstrapping) boot++;
        else {
          const t = e.held;
          e.held = null;
          try {
            this.scheduler.addRequest(t);
          } catch (err) {
            this.forget(e.rid);
            ready.push(this.abortOutput(e, (err as Error).message, 400));
          }
          inflight++;
        }
        continue;
      }
      if (st === KVPoll.Success && e.output) {
        this.stats.transfers++;
        if (e.sender.via === 'ucx') this.stats.ucxTransfers++;
        ready.push(e.output);
        this.forget(e.rid);
      } else if (st === KVPoll.Failed && (e.output || e.finished || e.sentTokens > 0)) {
        this.stats.failedTransfers++;
        const msg = `Prefill transfer failed for request rank=0 req.rid='${e.rid}' req.bootstrap_room=${e.room} with exception ${kvTransferError(e.room, e.sender.error ?? 'unknown')}`;
        this.logger.error(msg);
        this.forget(e.rid);
        if (e.output) ready.push({ ...e.output, finishReason: { type: 'abort', message: msg, statusCode: 500 } });
        else if (!this.scheduler.finishReq(e.rid, { type: 'abort', message: msg, statusCode: 500 })) ready.push(this.abortOutput(e, msg, 500)); // still prefilling: stopped, its output comes from the scheduler
      } else inflight++;
    }
    this.stats.numBootstrapQueueReqs = boot;
    this.stats.numInflightQueueReqs = inflight;
    return ready;
  }

  private abortOutput(e: Entry, message: string, statusCode: number | undefined): ReqTokenOutput {
    const reason = statusCode === undefined ? { type: 'abort' as const, message } : { type: 'abort' as const, message, statusCode };
    return { rid: e.rid, newIds: [], finishReason: reason, promptTokens: e.held?.inputIds.length ?? 0, completionTokens: 0, cachedTokens: 0, numRetractions: 0 };
  }

  /** True while requests wait or transfer. */
  get hasWork(): boolean {
    return this.entries.size > 0;
  }

  /** The transfer backend in use. */
  get backend(): string {
    return this.kvm.backend;
  }

  /** Stops the endpoint. */
  async close(): Promise<void> {
    this.pollTimer.stop();
    await this.kvm.close();
  }
}

// The engine core's PD role (--disaggregation-mode prefill|decode): starts the prefill-only or decode-only loop
// (disagg/) around the core's scheduler and gives the core the few calls it makes into it, so engine_core.ts stays
// one loop. Outside PD the core has no CoreDisagg. Under TP / DP-attention each core is one group (an attention-DP
// group, or the whole TP group) and moves its attn_tp ranks' KV through the model's KV steps.
import { Logger, UnsupportedFeatureError } from '../common/index.js';
import { DecodeLoop, GroupKv, KvWireLayout, loadUcxAddon, PrefillLoop, readDisaggEnv, resolveTransferBackend, ucxWorkerSettings, type KvShardSpec, type TransferBackendChoice } from '../disagg/index.js';
import type { ReqTokenOutput, Scheduler, TokenizedReq } from '../scheduler/index.js';
import type { DisaggregationLoad, DisaggregationOptions } from './types.js';

/** Where this core sits in its server (what PD registers and maps). */
export interface CoreDisaggPlacement {
  /** The server's DP size, this core's DP rank, and whether the DP ranks are attention-DP groups. */
  readonly dp: { readonly size: number; readonly rank: number; readonly attention: boolean };
  /** --load-balance-method as resolved. */
  readonly loadBalanceMethod: string;
  /** GQA/MHA: the model's KV heads and head size; null for MLA. */
  readonly kvHeads: { readonly numKvHeads: number; readonly headDim: number } | null;
}

/** The PD role of one engine core. */
export class CoreDisagg {
  private prefill: PrefillLoop | null = null;
  private decode: DecodeLoop | null = null;
  private readonly backend: TransferBackendChoice;
  private readonly kv: GroupKv;
  /** Forward steps with an extend (prefill) part. */
  numPrefillSteps = 0;
  /** Outputs produced outside a step (requests aborted in the prefill bootstrap queue). */
  private readonly pending: ReqTokenOutput[] = [];

  /**
   * @throws UnsupportedFeatureError for a transfer backend that cannot run here (naming those that can), or
   *   speculative decoding
   */
  constructor(private readonly opts: DisaggregationOptions, private readonly scheduler: Scheduler, private readonly kvCacheDtype: string, private readonly placement: CoreDisaggPlacement, private readonly kick: () => void, private readonly logger: Logger) {
    if (scheduler.spec && !scheduler.spec.draft.needsHidden) {
      throw new UnsupportedFeatureError(
        `--disaggregation-mode ${opts.mode} with --speculative-algorithm STANDALONE is not built: PD carries EAGLE's draft state (SGLang's ` +
        'topk_p / topk_index / hidden states of the last prompt position and the draft KV); use --speculative-algorithm EAGLE (or NEXTN) on both servers.',
      );
    }
    this.backend = resolveTransferBackend(opts.transferBackend);
    const model = scheduler.runner.model;
    const spec: KvShardSpec = { ranks: model.kvRanks ?? 1, kvHeads: placement.kvHeads };
    this.kv = new GroupKv(scheduler.runner.kvPool, model, new KvWireLayout(scheduler.runner.kvPool, spec));
    logger.info(`PD disaggregation: ${opts.mode} server, KV transfer backend ${this.backend}${opts.transferBackend === null ? ' (the best available here: --disaggregation-transfer-backend not given)' : ''}`);
  }

  /** Starts the role (prefill: the transfer endpoint, registered with the bootstrap server). @throws Error when it cannot */
  async start(): Promise<void> {
    const env = readDisaggEnv();
    const ucx = this.backend === 'ucx' ? loadUcxAddon().addon : null;
    const ucxSettings = ucxWorkerSettings(this.opts.host);
    const backend = this.backend;
    if (this.opts.mode === 'prefill') {
      const wildcard = this.opts.host === '0.0.0.0' || this.opts.host === '::';
      // SGLang registers with the bootstrap server on --host (a wildcard as loopback)
      const bsHost = this.opts.host === '::' ? '[::1]' : wildcard ? '127.0.0.1' : this.opts.host.includes(':') ? `[${this.opts.host}]` : this.opts.host;
      this.prefill = await PrefillLoop.start({
        scheduler: this.scheduler, kv: this.kv, host: this.opts.host, advertiseHost: wildcard ? '' : this.opts.host, env, kick: this.kick, logger: this.logger, backend, ucx, ucxSettings,
        group: { bootstrapUrl: `http://${bsHost}:${this.opts.bootstrapPort}`, dp: this.placement.dp, loadBalanceMethod: this.placement.loadBalanceMethod, pageSize: this.scheduler.cfg.pageSize, kvCacheDtype: this.kvCacheDtype },
      });
    } else {
      this.decode = new DecodeLoop({ scheduler: this.scheduler, kv: this.kv, env, kick: this.kick, logger: this.logger, backend, ucx, ucxSettings, pageSize: this.scheduler.cfg.pageSize, kvCacheDtype: this.kvCacheDtype });
    }
  }

  /**
   * A new request, before Scheduler.addRequest. @returns the request the scheduler gets now, or null when the role
   * holds it (prefill: in the bootstrap queue until the decode side's destination arrives)
   * @throws InvalidRequestError from the scheduler's checks
   */
  admit(t: TokenizedReq): TokenizedReq | null {
    if (this.prefill) return this.prefill.admit(t);
    this.decode?.expect(t.rid, t.bootstrap);
    return t;
  }

  /** The scheduler refused a request admit() saw. */
  refused(rid: string): void {
    this.prefill?.forget(rid);
    this.decode?.forget(rid);
  }

  /** Aborts a request the role holds (prefill: bootstrap queue; decode: waiting for its KV). @returns true if it was one */
  abort(rid: string): boolean {
    const o = this.prefill?.abort(rid) ?? null;
    if (o) {
      this.pending.push(o);
      return true;
    }
    return this.decode?.abort(rid) ?? false;
  }

  /** Aborts every request the role holds (their KV freed); `reason` for a fatal error (status 500). */
  abortAll(reason?: { message: string; statusCode: number }): void {
    if (this.prefill) this.pending.push(...this.prefill.abortAll());
    this.decode?.abortAll(reason);
  }

  /** Before each scheduler step: decode advances its prealloc and transfer queues. */
  beforeStep(): void {
    this.decode?.poll();
  }

  /** After each step: prefill holds finished PD requests' outputs until their transfer ended, and releases those that did. */
  afterStep(outputs: ReqTokenOutput[], ranPrefill: boolean): ReqTokenOutput[] {
    if (ranPrefill) this.numPrefillSteps++;
    const held = this.pending.splice(0);
    const out = this.prefill ? [...this.prefill.filterOutputs(outputs), ...this.prefill.poll()] : outputs;
    return held.length > 0 ? [...held, ...out] : out;
  }

  /** True while transfers are pending. */
  get hasWork(): boolean {
    return this.pending.length > 0 || (this.prefill?.hasWork ?? false) || (this.decode?.hasWork ?? false);
  }

  /** The role's counters. */
  load(): DisaggregationLoad {
    const p = this.prefill?.stats;
    const d = this.decode?.stats;
    const page = this.scheduler.cfg.pageSize;
    const tokens = p?.tokensSent ?? d?.tokensReceived ?? 0;
    return {
      mode: this.opts.mode,
      transferBackend: this.backend,
      numBootstrapQueueReqs: p?.numBootstrapQueueReqs ?? 0,
      numInflightQueueReqs: p?.numInflightQueueReqs ?? 0,
      numPreallocQueueReqs: d?.numPreallocQueueReqs ?? 0,
      numTransferQueueReqs: d?.numTransferQueueReqs ?? 0,
      transfers: p?.transfers ?? d?.transfers ?? 0,
      ucxTransfers: p?.ucxTransfers ?? d?.ucxTransfers ?? 0,
      failedTransfers: p?.failedTransfers ?? d?.failedTransfers ?? 0,
      kvBytes: p?.bytesSent ?? d?.bytesReceived ?? 0,
      kvTokens: tokens,
      kvPages: Math.ceil(tokens / page),
      kvChunks: p?.chunksSent ?? d?.chunksReceived ?? 0,
      attnTpSize: this.kv.layout.spec.ranks,
      kvBytesPerToken: this.kv.layout.bytesPerToken,
      numPrefillSteps: this.numPrefillSteps,
      ...(this.kv.digests ? { kvDigests: Object.fromEntries(this.kv.digests) } : {}),
    };
  }

  async close(): Promise<void> {
    this.decode?.close();
    await this.prefill?.close();
  }
}

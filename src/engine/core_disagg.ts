// The engine core's PD role (--disaggregation-mode prefill|decode): starts the prefill-only or decode-only loop
// (disagg/) around the core's scheduler and gives the core the few calls it makes into it, so engine_core.ts stays
// one loop. Outside PD the core has no CoreDisagg.
import { Logger, UnsupportedFeatureError } from '../common/index.js';
import { DecodeLoop, loadUcxAddon, PrefillLoop, readDisaggEnv, resolveTransferBackend, ucxWorkerSettings } from '../disagg/index.js';
import type { ReqTokenOutput, Scheduler, TokenizedReq } from '../scheduler/index.js';
import type { DisaggregationLoad, DisaggregationOptions } from './types.js';

/** The PD role of one engine core. */
export class CoreDisagg {
  private prefill: PrefillLoop | null = null;
  private decode: DecodeLoop | null = null;
  private readonly backend: string;
  /** Forward steps with an extend (prefill) part. */
  numPrefillSteps = 0;

  /**
   * @throws UnsupportedFeatureError for a transfer backend that cannot run here (naming those that can), or --tp > 1
   */
  constructor(private readonly opts: DisaggregationOptions, private readonly scheduler: Scheduler, private readonly kvCacheDtype: string, tpSize: number, private readonly kick: () => void, private readonly logger: Logger) {
    if (tpSize > 1) throw new UnsupportedFeatureError(`--disaggregation-mode ${opts.mode} with --tp ${tpSize} is not built yet (PD runs with --tp 1 on both sides)`);
    if (scheduler.spec) throw new UnsupportedFeatureError(`--disaggregation-mode ${opts.mode} with --speculative-algorithm is not built yet`);
    this.backend = resolveTransferBackend(opts.transferBackend);
    logger.info(`PD disaggregation: ${opts.mode} server, KV transfer backend ${this.backend}${opts.transferBackend === null ? ' (the default: --disaggregation-transfer-backend not given)' : ''}`);
  }

  /** Starts the role's servers (prefill: bootstrap server and transfer endpoint). @throws Error when a port is taken */
  async start(): Promise<void> {
    const env = readDisaggEnv();
    const ucx = this.backend === 'ucx' ? loadUcxAddon().addon : null;
    const ucxSettings = ucxWorkerSettings(this.opts.host);
    if (this.opts.mode === 'prefill') {
      const advertise = this.opts.host === '0.0.0.0' || this.opts.host === '::' ? '' : this.opts.host;
      this.prefill = await PrefillLoop.start({
        scheduler: this.scheduler, host: this.opts.host, bootstrapPort: this.opts.bootstrapPort, advertiseHost: advertise,
        pageSize: this.scheduler.cfg.pageSize, kvCacheDtype: this.kvCacheDtype, env, kick: this.kick, logger: this.logger, ucx, ucxSettings,
      });
    } else {
      this.decode = new DecodeLoop(this.scheduler, env, this.kick, this.logger, ucx, ucxSettings);
    }
  }

  /** A new request, before Scheduler.addRequest. @returns the request the scheduler gets */
  admit(t: TokenizedReq): TokenizedReq {
    if (this.prefill) return this.prefill.admit(t);
    this.decode?.expect(t.rid, t.bootstrap);
    return t;
  }

  /** The scheduler refused a request admit() saw. */
  refused(rid: string): void {
    this.prefill?.forget(rid);
  }

  /** Aborts a request the role holds (decode: waiting for its KV). @returns true if it was one */
  abort(rid: string): boolean {
    return this.decode?.abort(rid) ?? false;
  }

  abortAll(): void {
    this.decode?.abortAll();
  }

  /** Before each scheduler step: decode advances its prealloc and transfer queues. */
  beforeStep(): void {
    this.decode?.poll();
  }

  /** After each step: prefill holds finished PD requests' outputs until their transfer ended, and releases those that did. */
  afterStep(outputs: ReqTokenOutput[], ranPrefill: boolean): ReqTokenOutput[] {
    if (ranPrefill) this.numPrefillSteps++;
    return this.prefill ? [...this.prefill.filterOutputs(outputs), ...this.prefill.poll()] : outputs;
  }

  /** True while transfers are pending. */
  get hasWork(): boolean {
    return (this.prefill?.hasWork ?? false) || (this.decode?.hasWork ?? false);
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
      numPrefillSteps: this.numPrefillSteps,
    };
  }

  async close(): Promise<void> {
    this.decode?.close();
    await this.prefill?.close();
  }
}

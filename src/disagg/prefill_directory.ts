// The decode side's view of the prefill servers it receives from (SGLang CommonKVManager decode parts): per bootstrap
// address the prefill topology (GET /route with -1s, retried 15 × 1 s: SGLang's prefill_info_table) with the rank
// mapping of this decode group's ranks (rank_mapping.ts), the transfer endpoint of each prefill DP rank (GET /route per
// target TP rank), a room's prefill DP rank (room mod dp_size with follow_bootstrap_room, else POST /query_dp_ranks),
// and the heartbeat: GET /health every SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL (at least 2 s); after
// SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE failures in a row the prefill server is declared lost (onLost) and
// forgotten.
import type { Logger } from '../common/index.js';
import type { DisaggEnv } from './kv_poll.js';
import { resolveRankMapping, type RankMapping } from './rank_mapping.js';
import type { DecodeRankTargets } from './transfer_frames.js';

/** A prefill server's topology as its bootstrap server reports it, with this decode group's rank mapping. */
export interface PrefillInfo {
  readonly attnTpSize: number;
  readonly dpSize: number;
  readonly followBootstrapRoom: boolean;
  readonly pageSize: number | null;
  readonly kvCacheDtype: string | null;
  readonly isMla: boolean;
  /** Per decode attn_tp rank. */
  readonly mapping: readonly RankMapping[];
}

/** The URL of a bootstrap address (host:port, IPv6 hosts bracketed). */
function baseUrl(addr: string): string {
  const i = addr.lastIndexOf(':');
  const host = addr.slice(0, i);
  return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${addr.slice(i + 1)}`;
}

async function getJson(url: string, init?: RequestInit): Promise<{ status: number; body: unknown; text: string }> {
  const r = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
  const text = await r.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: r.status, body, text };
}

/** Lookups and heartbeats of the prefill servers one decode group talks to. */
export class PrefillDirectory {
  private readonly infos = new Map<string, PrefillInfo>();
  private readonly infoLookups = new Map<string, Promise<PrefillInfo>>();
  /** `${addr}#${dpRank}` → the group's transfer endpoint (host:port). */
  private readonly endpoints = new Map<string, string>();
  private readonly endpointLookups = new Map<string, Promise<string>>();
  /** Rooms whose prefill DP rank was queried and found. */
  private readonly dpRanks = new Map<number, number>();
  private readonly failures = new Map<string, number>();
  private heartbeat: NodeJS.Timeout | null = null;
  private beating = false;

  /**
   * @param decodeTp this group's attn_tp size (the rank mapping's decode side)
   * @param check called with a new prefill server's info; returns why it cannot be used (page size, KV dtype), or null
   * @param onLost called when a prefill server missed too many heartbeats (its requests must fail)
   * @param onChange called when a lookup finished (wakes the engine loop)
   */
  constructor(
    private readonly decodeTp: number,
    private readonly env: DisaggEnv,
    private readonly logger: Logger,
    private readonly check: (info: PrefillInfo) => string | null,
    private readonly onLost: (addr: string, endpoints: string[]) => void,
    private readonly onChange: () => void,
  ) {}

  /** The prefill server's info, or undefined while it is looked up (started here). Rejections are reported through onError. */
  info(addr: string, onError: (why: string) => void): PrefillInfo | undefined {
    const have = this.infos.get(addr);
    if (have) return have;
    if (!this.infoLookups.has(addr)) {
      const p = this.fetchInfo(addr);
      this.infoLookups.set(addr, p);
      p.then((info) => {
        this.infos.set(addr, info);
        this.ensureHeartbeat();
      }, (e: Error) => onError(e.message)).finally(() => {
        this.infoLookups.delete(addr);
        this.onChange();
      });
    }
    return undefined;
  }

  private async fetchInfo(addr: string): Promise<PrefillInfo> {
    const base = baseUrl(addr);
    let last = '';
    for (let i = 0; i < this.env.bootstrapRetries; i++) {
      try {
        const r = await getJson(`${base}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1`);
        if (r.status === 200 && r.body && typeof r.body === 'object') {
          const b = r.body as Record<string, unknown>;
          const attnTpSize = Number(b['attn_tp_size']);
          const isMla = b['is_mla'] === true;
          const info: PrefillInfo = {
            attnTpSize, dpSize: Number(b['dp_size']), followBootstrapRoom: b['follow_bootstrap_room'] === true,
            pageSize: typeof b['page_size'] === 'number' ? b['page_size'] : null, kvCacheDtype: typeof b['kv_cache_dtype'] === 'string' ? b['kv_cache_dtype'] : null, isMla,
            mapping: Array.from({ length: this.decodeTp }, (_, d) => resolveRankMapping(this.decodeTp, d, attnTpSize, isMla)),
          };
          const bad = this.check(info);
          if (bad) throw new Error(bad);
          return info;
        }
        last = `GET /route answered ${r.status}: ${r.text.slice(0, 200)}`;
      } catch (e) {
        if (/mismatch/.test((e as Error).message)) throw e;
        last = (e as Error).message;
      }
      if (i + 1 < this.env.bootstrapRetries) await new Promise((res) => setTimeout(res, 1000));
    }
    throw new Error(`Could not fetch prefill parallel info from bootstrap_addr: ${addr} after ${this.env.bootstrapRetries} attempts (${last})`);
  }

  /** The rank mapping of this group's ranks against `info`, as sent with a destination. */
  targets(info: PrefillInfo): { attnTpSize: number; ranks: DecodeRankTargets[] } {
    return {
      attnTpSize: this.decodeTp,
      ranks: info.mapping.map((m, d) => ({ tpRank: d, targets: m.targetTpRanks, dummy: info.isMla ? m.targetTpRanks.filter((t) => t !== m.targetTpRank) : [] })),
    };
  }

  /**
   * The prefill DP rank of `room`: 0 with one DP rank, room mod dp_size with follow_bootstrap_room, else what the
   * bootstrap server says (POST /query_dp_ranks; undefined until the prefill side registered it).
   */
  dpRank(addr: string, info: PrefillInfo, room: number): number | undefined {
    if (info.dpSize <= 1) return 0;
    if (info.followBootstrapRoom) return room % info.dpSize;
    const have = this.dpRanks.get(room);
    if (have !== undefined) return have;
    void getJson(`${baseUrl(addr)}/query_dp_ranks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bootstrap_rooms: [room] }) }).then((r) => {
      const v = (r.body as Record<string, number> | null)?.[String(room)];
      if (typeof v === 'number') {
        this.dpRanks.set(room, v);
        this.onChange();
      }
    }, () => undefined);
    return undefined;
  }

  /** Forgets a room's queried DP rank. */
  forgetRoom(room: number): void {
    this.dpRanks.delete(room);
  }

  /**
   * The transfer endpoint of prefill DP rank `dp` (every target TP rank of every decode rank looked up: SGLang's
   * per-rank bootstrap infos), or undefined while looked up (started here).
   */
  endpoint(addr: string, info: PrefillInfo, dp: number, onError: (why: string) => void): string | undefined {
    const key = `${addr}#${dp}`;
    const have = this.endpoints.get(key);
    if (have) return have;
    if (!this.endpointLookups.has(key)) {
      const p = this.fetchEndpoint(addr, info, dp);
      this.endpointLookups.set(key, p);
      p.then((ep) => this.endpoints.set(key, ep), (e: Error) => onError(e.message)).finally(() => {
        this.endpointLookups.delete(key);
        this.onChange();
      });
    }
    return undefined;
  }

  private async fetchEndpoint(addr: string, info: PrefillInfo, dp: number): Promise<string> {
    const host = addr.slice(0, addr.lastIndexOf(':'));
    const targets = [...new Set(info.mapping.flatMap((m) => m.targetTpRanks))];
    const found = new Set<string>();
    for (const t of targets) {
      const r = await getJson(`${baseUrl(addr)}/route?prefill_dp_rank=${dp}&prefill_cp_rank=0&target_tp_rank=${t}&target_pp_rank=0`);
      const b = r.body as { rank_ip?: string; rank_port?: number } | null;
      if (r.status !== 200 || !b || typeof b.rank_port !== 'number') {
        throw new Error(`Could not fetch bootstrap info for: prefill_dp_rank: ${dp} prefill_cp_rank: 0 target_tp_rank: ${t} and target_pp_rank 0 (${r.status} ${r.text.slice(0, 120)})`);
      }
      // a prefill server bound to every interface advertises no address: use the one the router gave
      const ip = !b.rank_ip || b.rank_ip === '0.0.0.0' || b.rank_ip === '::' ? host : b.rank_ip;
      found.add(`${ip}:${b.rank_port}`);
    }
    if (found.size !== 1) throw new Error(`prefill DP rank ${dp} registered ${found.size} transfer endpoints for its ranks; tsglang's prefill groups have one`);
    return [...found][0];
  }

  /** Starts the heartbeat timer once a prefill server is known. */
  private ensureHeartbeat(): void {
    if (this.heartbeat) return;
    const ms = Math.max(this.env.heartbeatIntervalMs, 2000);
    this.heartbeat = setInterval(() => void this.beat(), ms);
    this.heartbeat.unref();
  }

  private async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      await Promise.all([...this.infos.keys()].map(async (addr) => {
        let ok = false;
        try {
          const r = await fetch(`${baseUrl(addr)}/health`, { signal: AbortSignal.timeout(3000) });
          ok = r.status === 200;
          await r.arrayBuffer();
        } catch {
          ok = false;
        }
        if (ok) {
          this.failures.set(addr, 0);
          return;
        }
        this.logger.info(`Attempting to reconnect to ${addr}...`);
        const n = (this.failures.get(addr) ?? 0) + 1;
        this.failures.set(addr, n);
        if (n >= this.env.heartbeatMaxFailure) this.lost(addr);
      }));
    } finally {
      this.beating = false;
    }
  }

  /** A prefill server is gone: forget it and everything looked up through it. */
  private lost(addr: string): void {
    this.infos.delete(addr);
    this.failures.delete(addr);
    const eps: string[] = [];
    for (const [k, ep] of this.endpoints) {
      if (k.startsWith(`${addr}#`)) {
        eps.push(ep);
        this.endpoints.delete(k);
      }
    }
    this.onLost(addr, eps);
    this.onChange();
  }

  /** Drops what is known about `addr` (it will be looked up again). */
  forget(addr: string): void {
    this.infos.delete(addr);
    for (const k of [...this.endpoints.keys()]) if (k.startsWith(`${addr}#`)) this.endpoints.delete(k);
  }

  close(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }
}

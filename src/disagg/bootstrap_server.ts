// The prefill side's bootstrap server (SGLang disaggregation/common/conn.py CommonKVBootstrapServer; serving-spec.md
// §5.3): prefill ranks register where their transfer endpoint is; decode servers ask for the topology and for a
// rank's address; DP-rank registration per room. HTTP on --disaggregation-bootstrap-port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One prefill rank's registration (PUT /route). */
export interface RankRegistration {
  readonly attn_tp_size: number;
  readonly attn_tp_rank: number;
  readonly attn_cp_size: number;
  readonly attn_cp_rank: number;
  readonly attn_dp_size: number;
  readonly attn_dp_rank: number;
  readonly pp_size: number;
  readonly pp_rank: number;
  readonly system_dp_size: number;
  readonly system_dp_rank: number;
  readonly rank_ip: string;
  readonly rank_port: number;
  readonly page_size: number;
  readonly kv_cache_dtype: string;
  readonly load_balance_method: string;
  /** tsglang: the transfer backend this rank speaks (decode checks it matches its own). */
  readonly transfer_backend?: string;
  /** tsglang: the KV is MLA (replicated on every attn_tp rank: SGLang's decode side reads it from one rank). */
  readonly is_mla?: boolean;
}

const REQUIRED: readonly (keyof RankRegistration)[] = ['attn_tp_size', 'attn_tp_rank', 'attn_dp_size', 'attn_dp_rank', 'pp_size', 'pp_rank', 'rank_ip', 'rank_port'];

/** Entries of POST /register_dp_rank expire after this long (SGLANG_DISAGGREGATION_BOOTSTRAP_ENTRY_CLEANUP_INTERVAL, 120 s). */
function entryTtlMs(env: NodeJS.ProcessEnv): number {
  const v = Number(env['SGLANG_DISAGGREGATION_BOOTSTRAP_ENTRY_CLEANUP_INTERVAL']);
  return (Number.isFinite(v) && v > 0 ? v : 120) * 1000;
}

/** The bootstrap server. */
export class BootstrapServer {
  private readonly ranks = new Map<string, RankRegistration>();
  private readonly dpRanks = new Map<number, { dpRank: number; at: number }>();
  private server: http.Server | null = null;
  private readonly ttlMs: number;
  private expected: { dp: number; cp: number; tp: number; pp: number } | null = null;

  constructor(env: NodeJS.ProcessEnv = process.env) {
    this.ttlMs = entryTtlMs(env);
  }

  /** Records a rank (what PUT /route does; the prefill engine calls it directly for its own ranks). */
  register(r: RankRegistration): void {
    // a DP rank is an attention-DP group (--enable-dp-attention) or a DP replica (system DP): prefill_dp_rank counts both
    const sys = r.system_dp_size ?? 1;
    this.expected ??= { dp: r.attn_dp_size * sys, cp: r.attn_cp_size ?? 1, tp: r.attn_tp_size, pp: r.pp_size };
    const dp = (r.system_dp_rank ?? 0) * r.attn_dp_size + r.attn_dp_rank;
    this.ranks.set(`${dp}/${r.attn_cp_rank ?? 0}/${r.attn_tp_rank}/${r.pp_rank}`, r);
  }

  private get complete(): boolean {
    const e = this.expected;
    return e !== null && this.ranks.size >= e.dp * e.cp * e.tp * e.pp;
  }

  /**
   * Answers one request. @returns [status, JSON body or text]
   */
  route(method: string, path: string, query: URLSearchParams, body: unknown): [number, unknown] {
    if (path === '/health') return [200, 'OK'];
    if (path === '/route' && method === 'PUT') {
      const r = body as Partial<RankRegistration> | null;
      const missing = REQUIRED.filter((k) => r?.[k] === undefined);
      if (!r || missing.length > 0) return [400, `Missing fields: ${missing.join(', ')}`];
      this.register(r as RankRegistration);
      return [200, 'OK'];
    }
    if (path === '/route' && method === 'GET') {
      const names = ['prefill_dp_rank', 'prefill_cp_rank', 'target_tp_rank', 'target_pp_rank'];
      const vals = names.map((n) => query.get(n));
      if (vals.some((v) => v === null || v === '' || !Number.isInteger(Number(v)))) return [400, 'Missing inputs for bootstrap server.'];
      const [dp, cp, tp, pp] = vals.map(Number);
      if (!this.complete) return [503, 'Prefill server is not ready: not every rank has registered yet.'];
      if (dp === -1 && cp === -1 && tp === -1 && pp === -1) {
        const any = [...this.ranks.values()][0];
        const e = this.expected!;
        return [200, { attn_tp_size: e.tp, attn_cp_size: e.cp, dp_size: e.dp, pp_size: e.pp, page_size: any.page_size, kv_cache_dtype: any.kv_cache_dtype, follow_bootstrap_room: any.load_balance_method === 'follow_bootstrap_room', transfer_backend: any.transfer_backend ?? null, is_mla: any.is_mla ?? null }];
      }
      const r = this.ranks.get(`${dp}/${cp}/${tp}/${pp}`);
      if (!r) return [404, `Bootstrap info not found for prefill_dp_rank ${dp}, prefill_cp_rank ${cp}, target_tp_rank ${tp}, target_pp_rank ${pp}.`];
      return [200, { rank_ip: r.rank_ip, rank_port: r.rank_port }];
    }
    if (path === '/register_dp_rank' && method === 'POST') {
      const b = body as { bootstrap_room?: unknown; dp_rank?: unknown } | null;
      if (typeof b?.bootstrap_room !== 'number' || typeof b.dp_rank !== 'number') return [400, 'bootstrap_room and dp_rank are required'];
      this.expire();
      this.dpRanks.set(b.bootstrap_room, { dpRank: b.dp_rank, at: Date.now() });
      return [200, 'OK'];
    }
    if (path === '/query_dp_ranks' && method === 'POST') {
      const rooms = (body as { bootstrap_rooms?: unknown } | null)?.bootstrap_rooms;
      if (!Array.isArray(rooms)) return [400, 'bootstrap_rooms is required'];
      this.expire();
      const out: Record<string, number> = {};
      for (const room of rooms) {
        const e = this.dpRanks.get(Number(room));
        if (e) out[String(room)] = e.dpRank;
      }
      return [200, out];
    }
    return [404, 'Not Found'];
  }

  private expire(): void {
    const t = Date.now() - this.ttlMs;
    for (const [k, v] of this.dpRanks) if (v.at < t) this.dpRanks.delete(k);
  }

  /**
   * Serves the routes on host:port. @returns the bound port
   * @throws Error when the port is taken (EADDRINUSE), with the flag to change
   */
  listen(host: string, port: number): Promise<number> {
    const server = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://x');
        let body: unknown = null;
        try {
          body = parts.length ? JSON.parse(Buffer.concat(parts).toString('utf8')) : null;
        } catch {
          body = null;
        }
        const [status, out] = this.route(req.method ?? 'GET', url.pathname, url.searchParams, body);
        const text = typeof out === 'string' ? out : JSON.stringify(out);
        res.writeHead(status, { 'content-type': typeof out === 'string' ? 'text/plain' : 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) => reject(new Error(e.code === 'EADDRINUSE' ? `bootstrap port ${port} is in use (--disaggregation-bootstrap-port)` : e.message)));
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  /** Stops serving. */
  close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return Promise.resolve();
    s.closeAllConnections();
    return new Promise((r) => s.close(() => r()));
  }
}

/**
 * Registers one prefill rank with the bootstrap server (SGLang CommonKVManager.register_to_bootstrap: PUT /route,
 * retried 5 times with exponential backoff from 1 s, at most 30 s, jittered).
 * @param url the bootstrap server, e.g. http://127.0.0.1:8998
 * @throws Error after the last attempt failed
 */
export async function registerToBootstrap(url: string, reg: RankRegistration): Promise<void> {
  let last = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const r = await fetch(`${url}/route`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(reg), signal: AbortSignal.timeout(5000) });
      if (r.ok) return;
      last = `status ${r.status}: ${await r.text()}`;
    } catch (e) {
      last = (e as Error).message;
    }
    if (attempt < 4) await new Promise((res) => setTimeout(res, Math.min(1000 * 2 ** attempt, 30_000) * (0.75 + 0.25 * Math.random())));
  }
  throw new Error(`Prefill instance failed to register to bootstrap server ${url} after 5 retries: ${last}`);
}

/** Registers a prefill room's DP rank (SGLang CommonKVSender._register_prefill_dp_rank); failures are only logged by the caller. */
export async function registerDpRank(url: string, room: number, dpRank: number): Promise<void> {
  const r = await fetch(`${url}/register_dp_rank`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ bootstrap_room: room, dp_rank: dpRank }), signal: AbortSignal.timeout(5000) });
  if (!r.ok) throw new Error(`Failed to register prefill dp_rank: ${r.status}, ${await r.text()}`);
}

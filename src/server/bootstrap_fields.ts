// The fields the router injects into generation requests: PD's bootstrap_host, bootstrap_port, bootstrap_room (scalars,
// or arrays with one entry per sequence for batches and n > 1; serving-spec.md §5.2), read into the engine's per-choice
// BootstrapInfo list, and --dp-aware's data_parallel_rank (the DP rank that serves the request). Bodies without them
// give nothing (a normal request).
import { InvalidRequestError } from '../common/index.js';
import type { BootstrapInfo } from '../scheduler/index.js';

/**
 * The bootstrap entries of sequences [offset, offset + count) of a request.
 * @returns `{ bootstrap }` for GenerateRequest, or {} when the request carries no bootstrap_room
 * @throws InvalidRequestError for fields of the wrong type or arrays too short for the request
 */
export function bootstrapSlice(body: unknown, offset: number, count: number): { bootstrap?: BootstrapInfo[] } {
  const b = body as Record<string, unknown> | null;
  const room = b?.['bootstrap_room'];
  if (room === undefined || room === null) return {};
  const host = b!['bootstrap_host'];
  const port = b!['bootstrap_port'];
  const at = (v: unknown, i: number): unknown => (Array.isArray(v) ? v[offset + i] : v);
  const out: BootstrapInfo[] = [];
  for (let i = 0; i < count; i++) {
    const r = at(room, i);
    const h = at(host, i);
    const p = at(port, i);
    if (typeof r !== 'number' || !Number.isInteger(r) || r < 0) throw new InvalidRequestError(`bootstrap_room must be a non-negative integer (or one per sequence), got ${JSON.stringify(r ?? null)}`, 'bootstrap_room');
    if (typeof h !== 'string' || h === '') throw new InvalidRequestError('bootstrap_host is required with bootstrap_room', 'bootstrap_host');
    if (p !== null && p !== undefined && (typeof p !== 'number' || !Number.isInteger(p) || p <= 0 || p > 65535)) throw new InvalidRequestError(`bootstrap_port must be a port number or null, got ${JSON.stringify(p)}`, 'bootstrap_port');
    out.push({ host: h, port: typeof p === 'number' ? p : null, room: r });
  }
  return { bootstrap: out };
}

/**
 * The request's data_parallel_rank (SGLang GenerateReqInput.data_parallel_rank: the DP rank that serves it, set by the
 * router's --dp-aware). @returns `{ dataParallelRank }` or {} when absent
 * @throws InvalidRequestError when it is not an integer in [0, dpSize)
 */
export function dataParallelRankOf(body: unknown, dpSize: number): { dataParallelRank?: number } {
  const r = (body as Record<string, unknown> | null)?.['data_parallel_rank'];
  if (r === undefined || r === null) return {};
  if (typeof r !== 'number' || !Number.isInteger(r) || r < 0 || r >= dpSize) {
    throw new InvalidRequestError(`data_parallel_rank must be an integer in [0, ${dpSize}) (dp_size ${dpSize}), got ${JSON.stringify(r)}`, 'data_parallel_rank');
  }
  return { dataParallelRank: r };
}

/** The server's --dp-size (1 when its args do not say). */
export function dpSizeOf(deps: { readonly serverArgs: Readonly<Record<string, unknown>> }): number {
  const d = deps.serverArgs['dp_size'];
  return typeof d === 'number' && d >= 1 ? d : 1;
}

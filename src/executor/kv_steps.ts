// PD disaggregation's KV steps over a group's step channel (SGLang moves each TP rank's KV from its own GPU; here the
// attn_tp ranks of a group are threads behind its leader, so the leader reaches their pools with two steps):
// `kv_gather` — every rank copies the rows of some locs out of its pool and the rows meet on the leader in one
// all-gather; `kv_scatter` — the leader broadcasts every rank's rows in the step and each rank writes its own. Both
// travel on the same ordered channel as the forward steps, so a scatter lands before the decode step that reads it.
import { InternalError } from '../common/index.js';
import type { Communicator } from '../distributed/index.js';
import { gatherKvRows, kvRowBytesPerToken, scatterKvRows, type KVPool } from '../mem_cache/index.js';
import type { StepChannel } from './rank_channel.js';
import { encodeKvStep, type KvStep } from './step_codec.js';

/**
 * A rank's part of a KV step (in its step loop).
 * @param comm the group the leader gathers over (the step channel's communicator); `rank` is this rank's index in it
 * @throws DistributedError when a peer fails
 */
export function runKvStep(step: KvStep, pool: KVPool, comm: Communicator): void {
  if (step.kind === 'kv_scatter') {
    const mine = step.rows[comm.rank];
    if (!mine) throw new InternalError(`kv_scatter step without rows for rank ${comm.rank}`);
    scatterKvRows(pool, step.locs, mine);
    return;
  }
  // (plain Uint8Arrays on both ends: a communicator wants src and dst of one type)
  const rows = gatherKvRows(pool, step.locs, new Uint8Array(step.locs.length * kvRowBytesPerToken(pool)));
  comm.allGather(rows, new Uint8Array(rows.length * comm.size));
}

/**
 * The leader's side of a `kv_gather`: sends the step, copies its own rows and all-gathers every rank's.
 * @returns per rank (group order) its rows of `locs`, layer-major as gatherKvRows packs them
 * @throws DistributedError when a rank fails
 */
export function leaderGatherKv(channel: StepChannel, comm: Communicator, pool: KVPool, kvPoolId: number, locs: Int32Array): Uint8Array[] {
  channel.send(encodeKvStep({ kind: 'kv_gather', kvMaxLocs: pool.maxLocs, kvPoolId, locs }));
  const n = locs.length * kvRowBytesPerToken(pool);
  const mine = gatherKvRows(pool, locs, new Uint8Array(n));
  const all = new Uint8Array(n * comm.size);
  comm.allGather(mine, all);
  return Array.from({ length: comm.size }, (_, r) => all.subarray(r * n, (r + 1) * n));
}

/**
 * The leader's side of a `kv_scatter`: sends every rank's rows in the step and writes its own (rows[0]).
 * @throws DistributedError when a rank fails; InternalError for a row count that is not the group size
 */
export function leaderScatterKv(channel: StepChannel, size: number, pool: KVPool, kvPoolId: number, locs: Int32Array, rows: readonly Uint8Array[]): void {
  if (rows.length !== size) throw new InternalError(`kv_scatter: ${rows.length} rank rows for a group of ${size}`);
  channel.send(encodeKvStep({ kind: 'kv_scatter', kvMaxLocs: pool.maxLocs, kvPoolId, locs, rows }));
  scatterKvRows(pool, locs, rows[0]);
}

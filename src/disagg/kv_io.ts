// A group's KV in wire layout: read out of the pools of its attn_tp ranks (prefill) and written into them (decode).
// With one rank the pool is read and written directly; with several, through the model's KV steps
// (executor/kv_steps.ts), and the rows are converted between the ranks' heads and the wire layout (kv_layout.ts).
import { createHash } from 'node:crypto';
import { gatherKvRows, scatterKvRows, type KVPool } from '../mem_cache/index.js';
import type { ForwardModel } from '../executor/index.js';
import type { KvWireLayout } from './kv_layout.js';

/** How many rooms' digests a side keeps (the most recent). */
const MAX_DIGESTS = 256;

/** Reads and writes one group's KV rows in wire layout. */
export class GroupKv {
  /**
   * Test hook (TSGLANG_PD_KV_DIGEST=1): per room, the SHA-256 of the prompt's KV in wire layout as this side holds it
   * — the prefill side when it finished the prefill, the decode side read back from its pools (every rank) once the
   * transfer ended — so a test compares the two sides' bytes instead of trusting the transfer.
   */
  readonly digests: Map<number, string> | null;

  constructor(private readonly pool: KVPool, private readonly model: ForwardModel, readonly layout: KvWireLayout, env: NodeJS.ProcessEnv = process.env) {
    this.digests = env['TSGLANG_PD_KV_DIGEST'] === '1' ? new Map() : null;
  }

  /** Records the digest of the rows at `locs` (the whole prompt) for `room`, when the hook is on. */
  recordDigest(room: number, locs: Int32Array): void {
    if (!this.digests) return;
    this.digests.set(room, createHash('sha256').update(this.read(locs)).digest('hex'));
    if (this.digests.size > MAX_DIGESTS) this.digests.delete(this.digests.keys().next().value!);
  }

  /**
   * The wire payload of the rows at `locs` (token order).
   * @throws DistributedError when a rank fails
   */
  read(locs: Int32Array): Uint8Array {
    if (!this.layout.needsAllRanks || !this.model.gatherRankKv) return this.layout.toWire([gatherKvRows(this.pool, locs)], locs.length);
    return this.layout.toWire(this.model.gatherRankKv(this.pool, locs), locs.length);
  }

  /**
   * Writes a wire payload of `locs.length` tokens at `locs` into every rank's pool.
   * @throws InternalError for a payload of the wrong size; DistributedError when a rank fails
   */
  write(locs: Int32Array, wire: Uint8Array): void {
    const rows = this.layout.fromWire(wire, locs.length);
    if (rows.length === 1 || !this.model.scatterRankKv) scatterKvRows(this.pool, locs, rows[0]);
    else this.model.scatterRankKv(this.pool, locs, rows);
  }
}

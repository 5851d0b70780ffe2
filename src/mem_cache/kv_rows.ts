// A pool's KV rows as bytes: copied out for a set of locs (in token order) and written back at other locs of a pool of
// the same layout. Layer-major: for each layer, for each buffer, the rows of every token — the (address, length) runs
// over per-layer buffers that SGLang's transfer engines move. Rows stay in the pool's codec (FP8 stays FP8), so the
// receiving pool holds the same bytes. Used by PD disaggregation (disagg/) and the TP ranks' KV steps (executor/).
import { InternalError } from '../common/index.js';
import type { KVPool } from './kv_pool.js';

/** A run of `count` consecutive locs starting at `start`. */
export interface LocRun {
  readonly start: number;
  readonly count: number;
}

/** Collapses locs (in token order) into runs of consecutive locs. */
export function locRuns(locs: ArrayLike<number>): LocRun[] {
  const runs: LocRun[] = [];
  let i = 0;
  while (i < locs.length) {
    let j = i + 1;
    while (j < locs.length && locs[j] === locs[j - 1] + 1) j++;
    runs.push({ start: locs[i], count: j - i });
    i = j;
  }
  return runs;
}

/** Bytes of one token's rows over every layer and buffer of `pool` (the payload per token). */
export function kvRowBytesPerToken(pool: KVPool): number {
  let n = 0;
  for (let l = 0; l < pool.layout.numLayers; l++) for (const b of pool.layout.buffers) n += pool.store(l, b.name).rowFloats * 4;
  return n;
}

/**
 * Copies the rows of `locs` (token order) out of the pool: layer by layer, buffer by buffer, run by run.
 * @param out where to write (default: a new buffer)
 * @returns [locs.length · kvRowBytesPerToken] bytes
 * @throws InternalError when `out` is too small
 */
export function gatherKvRows(pool: KVPool, locs: ArrayLike<number>, out?: Uint8Array): Uint8Array {
  const need = locs.length * kvRowBytesPerToken(pool);
  const dst = out ?? Buffer.allocUnsafe(need);
  if (dst.length < need) throw new InternalError(`gatherKvRows: ${dst.length} bytes given, ${need} needed`);
  let off = 0;
  forEachKvRun(pool, locs, (bytes, start, len) => {
    dst.set(bytes.subarray(start, start + len), off);
    off += len;
  });
  return dst.length === need ? dst : dst.subarray(0, need);
}

/**
 * Writes rows from {@link gatherKvRows} into the rows of `locs` (token order) of a pool of the same layout, growing
 * its storage as needed.
 * @throws InternalError when the payload's size does not match the locs and the layout
 */
export function scatterKvRows(pool: KVPool, locs: ArrayLike<number>, payload: Uint8Array): void {
  const per = kvRowBytesPerToken(pool);
  if (payload.length !== locs.length * per) {
    throw new InternalError(`KV payload of ${payload.length} bytes does not fit ${locs.length} tokens of ${per} bytes`);
  }
  let maxLoc = 0;
  for (let i = 0; i < locs.length; i++) maxLoc = Math.max(maxLoc, locs[i]);
  if (locs.length > 0) pool.ensureLocs(maxLoc + 1);
  let off = 0;
  forEachKvRun(pool, locs, (bytes, start, len) => {
    bytes.set(payload.subarray(off, off + len), start);
    off += len;
  });
}

/**
 * Visits the byte ranges that hold the rows of `locs` in the pool, in the payload order of {@link gatherKvRows}:
 * layer by layer, buffer by buffer, run of consecutive locs by run.
 * @param visit called with the store's bytes, the run's first byte and its length in bytes
 */
function forEachKvRun(pool: KVPool, locs: ArrayLike<number>, visit: (bytes: Uint8Array, start: number, len: number) => void): void {
  const runs = locRuns(locs);
  for (let l = 0; l < pool.layout.numLayers; l++) {
    for (const b of pool.layout.buffers) {
      const st = pool.store(l, b.name);
      const bytes = new Uint8Array(st.raw.buffer, st.raw.byteOffset, st.raw.byteLength);
      const row = st.rowFloats * 4;
      for (const r of runs) visit(bytes, r.start * row, r.count * row);
    }
  }
}

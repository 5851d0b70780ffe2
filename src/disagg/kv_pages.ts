// KV rows of a request as transfer payload: runs of consecutive locs ((address, length) runs over the per-layer
// buffers, as SGLang's transfer engines move them), gathered from the prefill pool and scattered into the decode
// pool. Every layout is moved the same way — MiniMax K/V, DeepSeek MLA latent + rope key, DSA indexer keys — in the
// pool's own codec (FP8 rows stay FP8), so the receiving pool holds the same bytes.
import { TsglangError } from '../common/index.js';
import type { KVPool } from '../mem_cache/index.js';

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

/**
 * A pool layout's fingerprint: layers, and per buffer its name, width, codec and row size. Both sides must agree on
 * it before a transfer (different checkpoints, KV dtypes or TP splits would scramble the cache).
 */
export function layoutFingerprint(pool: KVPool): string {
  const parts: string[] = [`layers=${pool.layout.numLayers}`];
  for (let l = 0; l < pool.layout.numLayers; l++) {
    for (const b of pool.layout.buffers) {
      const st = pool.store(l, b.name);
      parts.push(`${l}:${b.name}:${b.width}:${st.codec.kind}:${st.rowFloats}`);
    }
  }
  return parts.join(',');
}

/** Bytes of one token's rows over every layer and buffer (the payload per token). */
export function payloadBytesPerToken(pool: KVPool): number {
  let n = 0;
  for (let l = 0; l < pool.layout.numLayers; l++) for (const b of pool.layout.buffers) n += pool.store(l, b.name).rowFloats * 4;
  return n;
}

/**
 * Copies the rows of `locs` (token order) out of the pool: layer by layer, buffer by buffer, run by run.
 * @returns [locs.length · payloadBytesPerToken] bytes
 */
export function gatherKv(pool: KVPool, locs: ArrayLike<number>): Buffer {
  const out = Buffer.allocUnsafe(locs.length * payloadBytesPerToken(pool));
  const runs = locRuns(locs);
  let off = 0;
  for (let l = 0; l < pool.layout.numLayers; l++) {
    for (const b of pool.layout.buffers) {
      const st = pool.store(l, b.name);
      const src = new Uint8Array(st.raw.buffer, st.raw.byteOffset, st.raw.byteLength);
      const row = st.rowFloats * 4;
      for (const r of runs) {
        out.set(src.subarray(r.start * row, (r.start + r.count) * row), off);
        off += r.count * row;
      }
    }
  }
  return out;
}

/**
 * Writes a payload from {@link gatherKv} into the rows of `locs` (token order) of a pool of the same layout.
 * @throws TsglangError when the payload's size does not match the locs and the layout
 */
export function scatterKv(pool: KVPool, locs: ArrayLike<number>, payload: Uint8Array): void {
  const per = payloadBytesPerToken(pool);
  if (payload.length !== locs.length * per) {
    throw new TsglangError('internal', `KV payload of ${payload.length} bytes does not fit ${locs.length} tokens of ${per} bytes`);
  }
  let maxLoc = 0;
  for (let i = 0; i < locs.length; i++) maxLoc = Math.max(maxLoc, locs[i]);
  pool.ensureLocs(maxLoc + 1);
  const runs = locRuns(locs);
  let off = 0;
  for (let l = 0; l < pool.layout.numLayers; l++) {
    for (const b of pool.layout.buffers) {
      const st = pool.store(l, b.name);
      const dst = new Uint8Array(st.raw.buffer, st.raw.byteOffset, st.raw.byteLength);
      const row = st.rowFloats * 4;
      for (const r of runs) {
        dst.set(payload.subarray(off, off + r.count * row), r.start * row);
        off += r.count * row;
      }
    }
  }
}

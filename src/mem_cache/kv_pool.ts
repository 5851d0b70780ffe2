// Per-layer KV storage indexed by loc. Owns only storage and growth; never sees a Req or a token id.
//
// Layout per family (each "buffer" holds one row per loc; a row is `width` elements in the buffer's KV codec,
// common/kv_dtype.ts: f32 with --kv-cache-dtype auto, else bf16 / FP8 as SGLang stores them):
//   GQA/MHA (MiniMax-M2):   'k' width numKvHeads*headDim, 'v' width numKvHeads*headDim
//   MLA (DeepSeek-V3.x):    'kv' width kvLoraRank + qkRopeHeadDim (normalized latent, then rope key)
//   DSA (DeepSeek-V3.2):    + 'index_k' width indexHeadDim (the indexer's key)
import { assert, decodeKvRow, encodeKvRow, F32_CODEC, kvRowBytes } from '../common/index.js';
import type { KvCodec, KvStore } from '../common/index.js';

/** One named per-token buffer of every layer: `width` elements per loc, stored in `codec` (default f32). */
export interface KVBufferSpec {
  readonly name: string;
  readonly width: number;
  /** The buffer's encoding: one for every layer, or one per layer (per-layer k_scale / v_scale). Default f32. */
  readonly codec?: KvCodec | readonly KvCodec[];
}

/** Shape of a KV pool: which buffers each layer holds. Loc 0 is never handed out by allocators (padding slot). */
export interface KVPoolLayout {
  readonly numLayers: number;
  readonly buffers: readonly KVBufferSpec[];
}

/**
 * KV cache storage: for every layer and buffer `capacityLocs` rows in the buffer's codec, held in one Float32Array
 * (rows are whole 4-byte words; an f32 buffer is exactly `[capacityLocs, width]` f32).
 * Storage grows on demand (`ensureLocs`) up to `maxLocs`, so a tiny model never commits memory it does not use.
 * NOTE: growth replaces the arrays; never keep a buffer across a call to `ensureLocs` — fetch it per forward.
 */
export class KVPool {
  readonly layout: KVPoolLayout;
  /** Upper bound of locs (token capacity + 1 padding slot). */
  readonly maxLocs: number;
  private capacityLocs: number;
  private readonly storage: Map<string, Float32Array>[];
  /** Per layer and buffer: the codec and row stride in 4-byte words. */
  private readonly formats: Map<string, { codec: KvCodec; rowFloats: number }>[];

  /**
   * @param layout buffers per layer
   * @param maxLocs maximum number of locs (tokens) the pool may ever hold, including loc 0
   * @param initialLocs locs committed up front (default: min(maxLocs, 1024))
   * @param alloc zeroed f32 storage of n elements for one buffer (default: a plain Float32Array), e.g.
   *   `Ops.allocateKvBuffer`, which puts large buffers on huge pages
   * @throws InternalError if sizes are not positive
   */
  constructor(layout: KVPoolLayout, maxLocs: number, initialLocs = Math.min(maxLocs, 1024), private readonly alloc: (n: number) => Float32Array = (n) => new Float32Array(n)) {
    assert(maxLocs > 0 && layout.numLayers >= 0, 'KVPool: sizes must be positive');
    this.layout = layout;
    this.maxLocs = maxLocs;
    this.capacityLocs = Math.max(1, Math.min(initialLocs, maxLocs));
    this.storage = [];
    this.formats = [];
    for (let l = 0; l < layout.numLayers; l++) {
      const m = new Map<string, Float32Array>();
      const f = new Map<string, { codec: KvCodec; rowFloats: number }>();
      for (const b of layout.buffers) {
        const codec = b.codec === undefined ? F32_CODEC : Array.isArray(b.codec) ? (b.codec as readonly KvCodec[])[l] : (b.codec as KvCodec);
        assert(codec !== undefined, () => `KVPool: buffer '${b.name}' has no codec for layer ${l}`);
        const rowFloats = kvRowBytes(codec, b.width) / 4;
        f.set(b.name, { codec, rowFloats });
        m.set(b.name, this.alloc(this.capacityLocs * rowFloats));
      }
      this.storage.push(m);
      this.formats.push(f);
    }
  }

  /** Locs currently backed by memory. */
  get committedLocs(): number {
    return this.capacityLocs;
  }

  /** Bytes of KV storage per token over all layers (each buffer's row size in its codec). */
  get bytesPerToken(): number {
    return kvBytesPerToken(this.layout);
  }

  /**
   * Makes sure locs [0, numLocs) are backed by memory, growing geometrically (contents are kept).
   * @throws InternalError if numLocs > maxLocs
   */
  ensureLocs(numLocs: number): void {
    assert(numLocs <= this.maxLocs, () => `KVPool: ${numLocs} locs requested, max ${this.maxLocs}`);
    if (numLocs <= this.capacityLocs) return;
    const newCap = Math.min(this.maxLocs, Math.max(numLocs, this.capacityLocs * 2));
    for (let l = 0; l < this.storage.length; l++) {
      const m = this.storage[l];
      for (const b of this.layout.buffers) {
        const old = m.get(b.name)!;
        const grown = this.alloc(newCap * this.formats[l].get(b.name)!.rowFloats);
        grown.set(old);
        m.set(b.name, grown);
      }
    }
    this.capacityLocs = newCap;
  }

  /**
   * The storage of one f32 buffer of one layer.
   * @returns [committedLocs, width] f32 (row `loc` is that token's slot)
   * @throws InternalError for an unknown layer or buffer name, or a buffer stored in another codec (use store())
   */
  buffer(layer: number, name: string): Float32Array {
    const st = this.store(layer, name);
    assert(st.codec.kind === 'f32', () => `KVPool: buffer '${name}' is stored as ${st.codec.kind}; read it through store()`);
    return st.raw;
  }

  /**
   * One buffer of one layer in its codec, for the attention kernels (which dequantize as they read).
   * NOTE: invalid after a growth (ensureLocs); fetch it per forward.
   * @throws InternalError for an unknown layer or buffer name
   */
  store(layer: number, name: string): KvStore {
    const m = this.storage[layer];
    assert(m !== undefined, () => `KVPool: no layer ${layer}`);
    const raw = m.get(name);
    assert(raw !== undefined, () => `KVPool: no buffer '${name}' in layer ${layer}`);
    const f = this.formats[layer].get(name)!;
    return { codec: f.codec, raw, rowFloats: f.rowFloats, width: this.width(name) };
  }

  /**
   * Writes (encodes) tokens' rows: row t of `src` (elements `t·srcStride .. +width`) goes to loc `locs[t]`.
   * @param count rows to write
   * @throws InternalError when a loc lies outside the committed storage
   */
  write(layer: number, name: string, locs: Int32Array, count: number, src: Float32Array, srcStride: number): void {
    const st = this.store(layer, name);
    for (let t = 0; t < count; t++) encodeKvRow(st, locs[t], src, t * srcStride);
  }

  /** Reads (dequantizes) elements [off, off + n) of one row into dst (tests, cross-checks). */
  read(layer: number, name: string, loc: number, off: number, n: number, dst: Float32Array): void {
    decodeKvRow(this.store(layer, name), loc, off, n, dst);
  }

  /** Width (f32 per loc) of a named buffer. @throws InternalError if unknown */
  width(name: string): number {
    const spec = this.layout.buffers.find((b) => b.name === name);
    assert(spec !== undefined, () => `KVPool: no buffer '${name}'`);
    return spec.width;
  }
}

/** KV bytes per token over all layers of a layout (each buffer's row size in its codec, per layer). */
export function kvBytesPerToken(layout: KVPoolLayout): number {
  let total = 0;
  for (let l = 0; l < layout.numLayers; l++) {
    for (const b of layout.buffers) {
      const codec = b.codec === undefined ? F32_CODEC : Array.isArray(b.codec) ? (b.codec as readonly KvCodec[])[l] : (b.codec as KvCodec);
      total += kvRowBytes(codec, b.width);
    }
  }
  return total;
}

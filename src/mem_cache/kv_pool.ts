// Per-layer KV storage indexed by loc. Owns only storage and growth; never sees a Req or a token id.
//
// Layout per family (each "buffer" is [capacityLocs, width] f32, row = one token's slot):
//   GQA/MHA (MiniMax-M2):   'k' width numKvHeads*headDim, 'v' width numKvHeads*headDim
//   MLA (DeepSeek-V3.x):    'kv' width kvLoraRank + qkRopeHeadDim (normalized latent, then rope key)
//   DSA (DeepSeek-V3.2):    + 'index_k' width indexHeadDim (the indexer's key)
import { assert } from '../common/index.js';

/** One named per-token buffer of every layer: `width` f32 per loc. */
export interface KVBufferSpec {
  readonly name: string;
  readonly width: number;
}

/** Shape of a KV pool: which buffers each layer holds. Loc 0 is never handed out by allocators (padding slot). */
export interface KVPoolLayout {
  readonly numLayers: number;
  readonly buffers: readonly KVBufferSpec[];
}

/**
 * KV cache storage: for every layer and buffer a Float32Array of `[capacityLocs, width]`.
 * Storage grows on demand (`ensureLocs`) up to `maxLocs`, so a tiny model never commits memory it does not use.
 * NOTE: growth replaces the arrays; never keep a buffer across a call to `ensureLocs` — fetch it per forward.
 */
export class KVPool {
  readonly layout: KVPoolLayout;
  /** Upper bound of locs (token capacity + 1 padding slot). */
  readonly maxLocs: number;
  private capacityLocs: number;
  private readonly storage: Map<string, Float32Array>[];

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
    for (let l = 0; l < layout.numLayers; l++) {
      const m = new Map<string, Float32Array>();
      for (const b of layout.buffers) m.set(b.name, this.alloc(this.capacityLocs * b.width));
      this.storage.push(m);
    }
  }

  /** Locs currently backed by memory. */
  get committedLocs(): number {
    return this.capacityLocs;
  }

  /** Bytes of KV storage per token over all layers (f32 storage). */
  get bytesPerToken(): number {
    return this.layout.numLayers * this.layout.buffers.reduce((s, b) => s + b.width, 0) * 4;
  }

  /**
   * Makes sure locs [0, numLocs) are backed by memory, growing geometrically (contents are kept).
   * @throws InternalError if numLocs > maxLocs
   */
  ensureLocs(numLocs: number): void {
    assert(numLocs <= this.maxLocs, () => `KVPool: ${numLocs} locs requested, max ${this.maxLocs}`);
    if (numLocs <= this.capacityLocs) return;
    const newCap = Math.min(this.maxLocs, Math.max(numLocs, this.capacityLocs * 2));
    for (const m of this.storage) {
      for (const b of this.layout.buffers) {
        const old = m.get(b.name)!;
        const grown = this.alloc(newCap * b.width);
        grown.set(old);
        m.set(b.name, grown);
      }
    }
    this.capacityLocs = newCap;
  }

  /**
   * The storage of one buffer of one layer.
   * @returns [committedLocs, width] f32 (row `loc` is that token's slot)
   * @throws InternalError for an unknown layer or buffer name
   */
  buffer(layer: number, name: string): Float32Array {
    const m = this.storage[layer];
    assert(m !== undefined, () => `KVPool: no layer ${layer}`);
    const buf = m.get(name);
    assert(buf !== undefined, () => `KVPool: no buffer '${name}' in layer ${layer}`);
    return buf;
  }

  /** Width (f32 per loc) of a named buffer. @throws InternalError if unknown */
  width(name: string): number {
    const spec = this.layout.buffers.find((b) => b.name === name);
    assert(spec !== undefined, () => `KVPool: no buffer '${name}'`);
    return spec.width;
  }
}

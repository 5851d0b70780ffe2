// NativeOps: the Ops interface over the C++ addon (AVX2/FMA kernels, persistent thread pool). Weights stay in their
// stored encoding (FP8 block-scaled, BF16, F16, F32) and are decoded in registers by the kernels.
import { assert, f32KvStore, KV_KIND_ID, numel } from '../../common/index.js';
import type { KvStore } from '../../common/index.js';
import type { AttentionBatch, AttentionParams, ExpertWeights, GroupedMatmulLayout, IndexerParams, Ops, RopeParams, RopeTarget, SparseKeys, StoredTensor, TopKResult, Weight } from '../ops.js';
import { storedToF32 } from '../cpu/quant.js';
import { registerComputeBackend, type NativeAddon, type NativeHandle } from './native_addon.js';

/** How large-M matmuls run: 'own' (default, batch invariant) or OpenBLAS sgemm for M ≥ blasMinM (when linked). */
export type GemmMode = 'own' | 'blas';

/** Options of a NativeOps instance. */
export interface NativeOpsOptions {
  /** Threads of this instance's pool, including the calling thread (≥ 1). */
  readonly threads: number;
  readonly gemm?: GemmMode;
  /** Smallest M sent to sgemm in 'blas' mode (default 32). */
  readonly blasMinM?: number;
}

/** Bytes of one weight arena (a multiple of the 2 MiB huge page). */
const WEIGHT_ARENA_BYTES = 64 << 20;
/** KV buffers from this size on get a huge-page mapping of their own (smaller ones would waste most of a 2 MiB page). */
const KV_HUGE_MIN_BYTES = 1 << 20;

const FORMAT_CODE = { f32: 0, bf16: 1, f16: 2, fp8_block: 3 } as const;
const ELEMENTWISE = { add: 0, sigmoid: 1, siluAndMul: 2 } as const;

/** Reinterprets stored bytes as a typed array of `ctor`, copying only when the offset is misaligned. */
function viewAs<T extends Uint16Array | Float32Array>(bytes: Uint8Array, ctor: { new (b: ArrayBufferLike, off: number, len: number): T; new (len: number): T; BYTES_PER_ELEMENT: number }, n: number): T {
  if (bytes.byteOffset % ctor.BYTES_PER_ELEMENT === 0) return new ctor(bytes.buffer, bytes.byteOffset, n);
  const copy = new ctor(n);
  new Uint8Array(copy.buffer).set(bytes.subarray(0, n * ctor.BYTES_PER_ELEMENT));
  return copy;
}

/**
 * The native backend. Every method computes each row with fixed arithmetic (see native/src/gemm.h), so results are
 * bit-identical whatever the batch composition or thread count (in 'own' GEMM mode). Accumulation is f32 where the
 * reference uses f64 (matmul, attention): expect relative differences ~1e-6 vs the reference.
 */
/** A KV buffer as the addon reads it: a plain f32 buffer of rows of `rowWidth`, or a KvStore in its codec. */
function kvStoreOf(buf: Float32Array | KvStore, rowWidth: number): KvStore {
  return buf instanceof Float32Array ? f32KvStore(buf, rowWidth) : buf;
}

/** [kind, rowFloats, fp8Dims] of a store (native/src/kv_codec.h KvLayout). */
function kvLayoutInts(s: KvStore): [number, number, number] {
  return [KV_KIND_ID[s.codec.kind], s.rowFloats, s.codec.kind === 'fp8_block' ? s.codec.fp8Dims : 0];
}

/** The scalar dequant multiplier of a store (1 for f32 and block-scaled codecs). */
function kvScale(s: KvStore): number {
  return s.codec.kind === 'bf16' || s.codec.kind === 'fp8_e4m3' || s.codec.kind === 'fp8_e5m2' ? s.codec.scale : 1;
}

export class NativeOps implements Ops {
  readonly name = 'native';
  readonly threads: number;
  readonly gemm: GemmMode;
  /** True when the addon was linked against OpenBLAS. */
  readonly blasLinked: boolean;
  private readonly backend: NativeHandle;
  private readonly handles = new WeakMap<Weight, NativeHandle>();
  /** The arena weight bytes are currently carved from (see allocateWeightBytes). */
  private arena: { bytes: Uint8Array; used: number } | null = null;
  private readonly expertCache = new WeakMap<readonly (ExpertWeights | null)[], { sources: (ExpertWeights | null | undefined)[]; handles: unknown[] }>();

  /** @throws InternalError for threads < 1 */
  constructor(private readonly addon: NativeAddon, options: NativeOpsOptions) {
    assert(Number.isInteger(options.threads) && options.threads >= 1, () => `NativeOps: threads must be an integer ≥ 1, got ${options.threads}`);
    this.threads = options.threads;
    this.blasLinked = addon.buildInfo().blas;
    this.gemm = options.gemm === 'blas' && this.blasLinked ? 'blas' : 'own';
    this.backend = addon.createBackend(this.threads, this.gemm === 'blas' ? 1 : 0, options.blasMinM ?? 32);
    registerComputeBackend(this.threads, this.backend); // the sampler shares this pool (one pool per thread)
  }

  /**
   * Keeps 2-D FP8 (block-scaled), BF16, F16 and F32 tensors in their stored encoding (a view on the loader's bytes,
   * no copy); other tensors (1-D norms and biases, integer or unscaled FP8) are decoded to f32.
   */
  /**
   * Weight bytes are carved from arenas of WEIGHT_ARENA_BYTES (a tensor of a quarter arena or more gets its own),
   * 64-byte aligned, mapped by the addon on 2 MiB-aligned transparent huge pages; plain arrays when the addon cannot
   * map memory. Arena bytes stay resident as long as any weight of that arena is alive (the model's lifetime).
   */
  allocateWeightBytes(byteLength: number): Uint8Array {
    if (byteLength >= WEIGHT_ARENA_BYTES / 4) return this.hugeBytes(byteLength);
    if (this.arena === null || this.arena.used + byteLength > this.arena.bytes.length) this.arena = { bytes: this.hugeBytes(WEIGHT_ARENA_BYTES), used: 0 };
    const arena = this.arena;
    const off = arena.used;
    arena.used = Math.ceil((off + byteLength) / 64) * 64;
    return arena.bytes.subarray(off, off + byteLength);
  }

  /**
   * KV-cache buffers of 1 MiB and more get their own huge-page mapping (freed by the ArrayBuffer's finalizer, so a
   * pool that grows drops its old buffers); smaller ones, or when the addon cannot map memory, a plain array.
   * Bench MiniMax decode attention (512 keys, caches cold), paired runs: 362 → 334 µs and 398 → 362 µs per layer.
   */
  allocateKvBuffer(floats: number): Float32Array {
    assert(Number.isInteger(floats) && floats >= 0, () => `allocateKvBuffer: bad length ${floats}`);
    if (floats * 4 < KV_HUGE_MIN_BYTES) return new Float32Array(floats);
    const bytes = this.hugeBytes(floats * 4);
    return new Float32Array(bytes.buffer, bytes.byteOffset, floats);
  }

  private hugeBytes(byteLength: number): Uint8Array {
    const ab = byteLength > 0 ? this.addon.allocWeightMemory?.(byteLength) ?? null : null;
    return ab ? new Uint8Array(ab) : new Uint8Array(byteLength);
  }

  prepareWeight(t: StoredTensor): Weight {
    const n = numel(t.shape);
    const shape = [...t.shape];
    if (t.shape.length === 2) {
      if (t.dtype === 'f8_e4m3' && t.scale) {
        assert(t.bytes.length >= n, () => `${t.name}: ${t.bytes.length} bytes for ${n} FP8 values`);
        return { format: 'fp8_block', shape, data: t.bytes.subarray(0, n), scale: t.scale };
      }
      if (t.dtype === 'bf16') return { format: 'bf16', shape, data: viewAs(t.bytes, Uint16Array, n) };
      if (t.dtype === 'f16') return { format: 'f16', shape, data: viewAs(t.bytes, Uint16Array, n) };
      if (t.dtype === 'f32') return { format: 'f32', shape, data: viewAs(t.bytes, Float32Array, n) };
    }
    return { format: 'f32', shape, data: storedToF32(t) };
  }

  /** The native view of a 2-D weight (cached per Weight object). */
  private handle(w: Weight): NativeHandle {
    let h = this.handles.get(w);
    if (h) return h;
    assert(w.shape.length === 2, () => `native: weight must be 2-D, got [${w.shape.join(', ')}]`);
    const [n, k] = w.shape;
    assert(w.data.length >= n * k, () => `native: weight data has ${w.data.length} elements, shape needs ${n}×${k}`);
    if (w.format === 'fp8_block') {
      const s = w.scale;
      h = this.addon.makeWeight(FORMAT_CODE.fp8_block, w.data, n, k, s.data, s.shape[0], s.shape[1], s.blockSize[0], s.blockSize[1]);
    } else {
      h = this.addon.makeWeight(FORMAT_CODE[w.format], w.data, n, k, null, 0, 0, 1, 1);
    }
    this.handles.set(w, h);
    return h;
  }

  matmul(x: Float32Array, numRows: number, w: Weight, out?: Float32Array): Float32Array {
    assert(w.shape.length === 2, 'matmul: weight must be 2-D');
    const [n, k] = w.shape;
    assert(x.length >= numRows * k, () => `matmul: x has ${x.length} elements, need ${numRows}×${k}`);
    const y = out ?? new Float32Array(numRows * n);
    assert(y.length >= numRows * n, 'matmul: out too small');
    if (numRows > 0 && n > 0) this.addon.matmul(this.backend, x, numRows, this.handle(w), y);
    return y;
  }

  groupedMatmul(x: Float32Array, numRows: number, groups: number, w: Weight, layout?: GroupedMatmulLayout, out?: Float32Array): Float32Array {
    assert(w.shape.length === 2 && groups >= 1 && w.shape[0] % groups === 0, () => `groupedMatmul: ${groups} groups do not divide weight [${w.shape.join(', ')}]`);
    const [rows, k] = w.shape;
    const n = rows / groups;
    const xRowStride = layout?.xRowStride ?? groups * k, xGroupStride = layout?.xGroupStride ?? k;
    const outRowStride = layout?.outRowStride ?? groups * n, outGroupStride = layout?.outGroupStride ?? n;
    const y = out ?? new Float32Array(numRows * outRowStride);
    if (numRows === 0 || n === 0) return y;
    assert(x.length >= (numRows - 1) * xRowStride + (groups - 1) * xGroupStride + k, 'groupedMatmul: x too small');
    assert(y.length >= (numRows - 1) * outRowStride + (groups - 1) * outGroupStride + n, 'groupedMatmul: out too small');
    this.addon.groupedMatmul(this.backend, x, numRows, this.handle(w), Int32Array.of(groups, xRowStride, xGroupStride, outRowStride, outGroupStride), y);
    return y;
  }

  embedding(ids: Int32Array, table: Weight, out?: Float32Array): Float32Array {
    const [v, d] = table.shape;
    const y = out ?? new Float32Array(ids.length * d);
    for (let t = 0; t < ids.length; t++) assert(ids[t] >= 0 && ids[t] < v, () => `embedding: id ${ids[t]} outside [0, ${v})`);
    if (ids.length > 0) this.addon.embedding(this.backend, ids, this.handle(table), y);
    return y;
  }

  rmsNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, eps: number, out?: Float32Array, xRowStride = width): Float32Array {
    assert(weight.length === width, () => `rmsNorm: weight length ${weight.length} != width ${width}`);
    const y = out ?? new Float32Array(numRows * width);
    if (numRows > 0) this.addon.rmsNorm(this.backend, x, numRows, width, xRowStride, weight, eps, y);
    return y;
  }

  layerNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, bias: Float32Array, eps: number, out?: Float32Array): Float32Array {
    assert(weight.length === width && bias.length === width, 'layerNorm: weight/bias length != width');
    const y = out ?? new Float32Array(numRows * width);
    if (numRows > 0) this.addon.layerNorm(this.backend, x, numRows, width, weight, bias, eps, y);
    return y;
  }

  rope(x: Float32Array, numTokens: number, positions: Int32Array, target: RopeTarget, params: RopeParams): void {
    const { numHeads, headDim } = target;
    const rowStride = target.rowStride ?? numHeads * headDim;
    const offset = target.offset ?? 0;
    const d = params.rotaryDim;
    assert(d % 2 === 0 && offset + d <= headDim, () => `rope: rotaryDim ${d} at offset ${offset} exceeds headDim ${headDim}`);
    assert(params.invFreq.length >= d / 2, 'rope: invFreq shorter than rotaryDim/2');
    if (numTokens === 0 || d === 0) return;
    this.addon.rope(this.backend, x, numTokens, positions, numHeads, headDim, rowStride, offset, params.invFreq, d, params.style === 'interleaved', params.mscale ?? 1);
  }

  softmax(x: Float32Array, numRows: number, width: number, out?: Float32Array): Float32Array {
    const y = out ?? new Float32Array(numRows * width);
    if (numRows > 0 && width > 0) this.addon.softmax(this.backend, x, numRows, width, y);
    return y;
  }

  add(a: Float32Array, b: Float32Array, out?: Float32Array): Float32Array {
    assert(b.length >= a.length, 'add: operands differ in length');
    const y = out ?? new Float32Array(a.length);
    this.addon.elementwise(ELEMENTWISE.add, a, b, y);
    return y;
  }

  sigmoid(x: Float32Array, out?: Float32Array): Float32Array {
    const y = out ?? new Float32Array(x.length);
    this.addon.elementwise(ELEMENTWISE.sigmoid, x, null, y);
    return y;
  }

  siluAndMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array {
    assert(up.length >= gate.length, 'siluAndMul: operands differ in length');
    const y = out ?? new Float32Array(gate.length);
    this.addon.elementwise(ELEMENTWISE.siluAndMul, gate, up, y);
    return y;
  }

  topk(x: Float32Array, numRows: number, width: number, k: number): TopKResult {
    assert(k >= 1 && k <= width, () => `topk: k=${k} outside [1, ${width}]`);
    const indices = new Int32Array(numRows * k);
    const values = new Float32Array(numRows * k);
    if (numRows > 0) this.addon.topk(this.backend, x, numRows, width, k, indices, values);
    return { indices, values };
  }

  attention(q: Float32Array, numTokens: number, p: AttentionParams, batch: AttentionBatch, sparse?: SparseKeys): Float32Array {
    const { numHeads, numKvHeads, headDim, vHeadDim } = p;
    assert(numHeads % numKvHeads === 0, () => `attention: ${numHeads} heads not divisible by ${numKvHeads} kv heads`);
    const out = new Float32Array(numTokens * numHeads * vHeadDim);
    if (numTokens === 0) return out;
    const ints = Int32Array.of(numHeads, numKvHeads, headDim, vHeadDim, p.kRowWidth, p.kOffset, p.vRowWidth, p.vOffset,
      batch.numReqs, batch.reqToTokenStride, sparse ? sparse.width : 0);
    const k = kvStoreOf(p.kBuf, p.kRowWidth);
    const v = kvStoreOf(p.vBuf, p.vRowWidth);
    assert(k.codec.kind === v.codec.kind, 'attention: K and V must share one KV codec');
    this.addon.attention(this.backend, q, numTokens, ints, p.scale, k.raw, v.raw, batch.extendStartLoc, batch.extendSeqLens,
      batch.extendPrefixLens, batch.reqPoolIndices, batch.reqToToken, sparse ? sparse.indices : null, out,
      Int32Array.of(...kvLayoutInts(k), ...kvLayoutInts(v)), Float32Array.of(kvScale(k), kvScale(v)));
    return out;
  }

  indexerTopK(q: Float32Array, weights: Float32Array, numTokens: number, p: IndexerParams, batch: AttentionBatch): Int32Array {
    assert(p.topK >= 1 && p.headDim >= 1 && p.numHeads >= 1 && p.kRowWidth >= p.headDim, 'indexerTopK: bad geometry');
    const out = new Int32Array(numTokens * p.topK);
    if (numTokens === 0) return out;
    const ints = Int32Array.of(p.numHeads, p.headDim, p.topK, p.kRowWidth, batch.numReqs, batch.reqToTokenStride);
    const k = kvStoreOf(p.kBuf, p.kRowWidth);
    this.addon.indexerTopK(this.backend, q, weights, numTokens, ints, k.raw, batch.extendStartLoc, batch.extendSeqLens,
      batch.extendPrefixLens, batch.reqPoolIndices, batch.reqToToken, out, Int32Array.of(...kvLayoutInts(k)), kvScale(k));
    return out;
  }

  fusedMoe(x: Float32Array, numTokens: number, hiddenSize: number, experts: readonly (ExpertWeights | null)[], topkIds: Int32Array, topkWeights: Float32Array, topK: number, out?: Float32Array): Float32Array {
    const res = out ?? new Float32Array(numTokens * hiddenSize);
    if (numTokens === 0) return res;
    let cache = this.expertCache.get(experts);
    if (!cache || cache.handles.length !== experts.length) {
      cache = { sources: new Array<ExpertWeights | null | undefined>(experts.length), handles: new Array<unknown>(experts.length) };
      this.expertCache.set(experts, cache);
    }
    for (let i = 0; i < numTokens * topK; i++) {
      const e = topkIds[i];
      if (e < 0) continue;
      assert(e < experts.length, () => `fusedMoe: expert id ${e} >= ${experts.length}`);
      const ex = experts[e];
      if (cache.sources[e] === ex && cache.handles[e] !== undefined) continue;
      cache.sources[e] = ex;
      cache.handles[e] = ex === null ? null : [this.handle(ex.gate), this.handle(ex.up), this.handle(ex.down)];
    }
    this.addon.fusedMoe(this.backend, x, numTokens, hiddenSize, cache.handles, topkIds, topkWeights, topK, res);
    return res;
  }

  /** Bench helper: FMA peak of this instance's threads, GFLOP/s, measured over about `seconds`. */
  measureFmaPeak(seconds: number): number {
    return this.addon.measureFmaPeak(this.backend, seconds);
  }

  /** Bench helper: read bandwidth (GB/s) streaming a `bytes`-sized buffer with this instance's threads (best of `reps`). */
  measureReadBandwidth(bytes: number, reps: number): number {
    return this.addon.measureReadBandwidth(this.backend, bytes, reps);
  }
}

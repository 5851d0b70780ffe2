// The Ops interface: every compute primitive the models use, with shapes and dtypes. Model code calls only
// these; a backend (the f32 reference in cpu/, a native addon later) implements them. Knows no model.
//
// Conventions (all backends):
// - Activations are row-major f32 `Float32Array`s; a "row" is one token. Shapes are given as [rows, cols].
// - Linear weights keep PyTorch layout `[N, K]` (out, in): y = x · Wᵀ.
// - Batch invariance: every op computes each row with a fixed reduction order that never depends on how many
//   rows share the call or what they hold. A token's result is bit-identical alone or in any batch.
// - Ops return a fresh output unless `out` is passed; in-place ops say so.
import type { DType, KvStore } from '../common/index.js';

export type { KvStore };

/** FP8 block-scale side data: `W[n,k] = fp8(code[n,k]) · scaleInv[floor(n/bn), floor(k/bk)]` (model-spec §1.2). */
export interface BlockScale {
  /** [ceil(N/bn), ceil(K/bk)] f32 multipliers (the checkpoint's `weight_scale_inv`). */
  readonly data: Float32Array;
  /** [rows, cols] of `data`. */
  readonly shape: readonly [number, number];
  /** [bn, bk] block size (quantization_config.weight_block_size, usually [128, 128]). */
  readonly blockSize: readonly [number, number];
}

/**
 * A tensor as read from a checkpoint, before a backend decides how to hold it.
 * `bytes` is a fresh, 8-byte-aligned buffer of little-endian elements (the backend may keep or drop it).
 */
export interface StoredTensor {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly bytes: Uint8Array;
  /** Present for block-FP8 weights (dtype f8_e4m3 with a `weight_scale_inv`). */
  readonly scale?: BlockScale;
}

/** A weight held by a backend. The f32 reference keeps `f32`; a fast backend may keep the stored encoding. */
export type Weight =
  | { readonly format: 'f32'; readonly shape: readonly number[]; readonly data: Float32Array }
  | { readonly format: 'bf16'; readonly shape: readonly number[]; readonly data: Uint16Array }
  | { readonly format: 'f16'; readonly shape: readonly number[]; readonly data: Uint16Array }
  | { readonly format: 'fp8_block'; readonly shape: readonly number[]; readonly data: Uint8Array; readonly scale: BlockScale };

/** RoPE rotation style (model-spec §1.5): NeoX half-split pairs (i, i+d/2) or GPT-J interleaved pairs (2i, 2i+1). */
export type RopeStyle = 'neox' | 'interleaved';

/** Rotary parameters: which dims rotate and at what frequencies. */
export interface RopeParams {
  /** [rotaryDim / 2] f32 inverse frequencies (base^(-2i/rotaryDim), or YaRN-corrected). */
  readonly invFreq: Float32Array;
  /** Number of rotated dims per head (even, ≤ headDim). */
  readonly rotaryDim: number;
  readonly style: RopeStyle;
  /** Multiplier on cos and sin (YaRN mscale; default 1). */
  readonly mscale?: number;
}

/** Where the heads to rotate sit in `x`. Row t, head h, dim d is at `t*rowStride + h*headDim + offset + d`. */
export interface RopeTarget {
  readonly numHeads: number;
  /** Elements per head in x (the rotated slice lies inside it). */
  readonly headDim: number;
  /** Elements per token row of x (default numHeads*headDim). */
  readonly rowStride?: number;
  /** First rotated dim inside each head (default 0; DeepSeek MLA q heads are [nope | rope]: offset = nope). */
  readonly offset?: number;
}

/**
 * The per-request geometry attention needs (a structural subset of ForwardBatch, which kernels may not import).
 * Token rows of req i are [extendStartLoc[i], extendStartLoc[i] + extendSeqLens[i]); the row at offset j of req i
 * is sequence index `extendPrefixLens[i] + j` and may attend to sequence indices 0..that index (causal).
 */
export interface AttentionBatch {
  readonly numReqs: number;
  readonly extendStartLoc: Int32Array;
  readonly extendSeqLens: Int32Array;
  readonly extendPrefixLens: Int32Array;
  readonly reqPoolIndices: Int32Array;
  /** [rows, reqToTokenStride] i32: req row × sequence index → KV loc. */
  readonly reqToToken: Int32Array;
  readonly reqToTokenStride: number;
}

/**
 * Attention over a paged KV cache. Key of (loc, kvHead) = elements `kOffset + kvHead*headDim ..+headDim` of row `loc`
 * of `kBuf`, value = elements `vOffset + kvHead*vHeadDim ..+vHeadDim` of row `loc` of `vBuf`. A Float32Array buffer
 * holds rows of `kRowWidth` (`vRowWidth`) f32; a KvStore holds rows in its codec (--kv-cache-dtype: bf16, FP8 with a
 * scale, FP8 with 128-block scales), which the kernels dequantize as they read (`kRowWidth` is then the store's width). Query head h uses kvHead
 * `floor(h / (numHeads/numKvHeads))` (GQA; numKvHeads = 1 is MQA, e.g. MLA-absorbed with K = [latent | rope]
 * and V = latent in the same buffer).
 */
export interface AttentionParams {
  readonly numHeads: number;
  readonly numKvHeads: number;
  /** Query/key dim per head. */
  readonly headDim: number;
  /** Value dim per head (output dim). */
  readonly vHeadDim: number;
  /** Softmax scale (e.g. headDim^-0.5). */
  readonly scale: number;
  readonly kBuf: Float32Array | KvStore;
  readonly kRowWidth: number;
  readonly kOffset: number;
  readonly vBuf: Float32Array | KvStore;
  readonly vRowWidth: number;
  readonly vOffset: number;
}

/** Optional sparse selection (DeepSeek DSA): each query row attends only to the listed sequence indices. */
export interface SparseKeys {
  /** [numTokens, width] i32 sequence indices (not locs); -1 = unused slot. Indices beyond the causal limit are skipped. */
  readonly indices: Int32Array;
  readonly width: number;
}

/**
 * Element strides of {@link Ops.groupedMatmul} (defaults: contiguous [numRows, groups, K] in, [numRows, groups, N] out).
 * Element (row m, group g, i) of x is at `m·xRowStride + g·xGroupStride + i`; of the output at `m·outRowStride + g·outGroupStride + i`.
 */
export interface GroupedMatmulLayout {
  readonly xRowStride?: number;
  readonly xGroupStride?: number;
  readonly outRowStride?: number;
  readonly outGroupStride?: number;
}

/**
 * DSA indexer geometry: the index key of loc l is elements 0..headDim of row l of `kBuf` (KVPool buffer 'index_k':
 * f32 rows of kRowWidth, or a KvStore in its codec, SGLang's FP8 with a 128-block scale under an FP8/BF16 KV cache).
 */
export interface IndexerParams {
  readonly numHeads: number;
  readonly headDim: number;
  /** Keys kept per query row (index_topk). */
  readonly topK: number;
  readonly kBuf: Float32Array | KvStore;
  readonly kRowWidth: number;
}

/** One routed expert's SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)). MiniMax w1/w3/w2, DeepSeek gate/up/down_proj. */
export interface ExpertWeights {
  /** [I, D] */
  readonly gate: Weight;
  /** [I, D] */
  readonly up: Weight;
  /** [D, I] */
  readonly down: Weight;
}

/** Top-k result: per row, the k largest values in descending order (ties: lower index first). */
export interface TopKResult {
  /** [numRows, k] i32 column indices. */
  readonly indices: Int32Array;
  /** [numRows, k] f32 values at those indices. */
  readonly values: Float32Array;
}

/**
 * The compute backend. All methods are synchronous and pure except where "in place" is stated.
 * @throws InternalError (through assert) on inconsistent sizes: a bug in the caller, never user input.
 */
export interface Ops {
  /** Backend name for logs and the conformance suite (e.g. 'cpu-ref'). */
  readonly name: string;

  /**
   * Turns a checkpoint tensor into the form this backend computes with. Called once per tensor while loading,
   * so the stored bytes can be dropped immediately (one copy of each weight). The f32 reference dequantizes.
   */
  prepareWeight(t: StoredTensor): Weight;

  /**
   * Zeroed memory for the stored bytes of one checkpoint tensor, before it is read from disk and handed to
   * `prepareWeight`: a backend that keeps weights in their stored encoding places them where it streams them
   * fastest (the native backend: 2 MiB-aligned arenas on transparent huge pages); the f32 reference returns a plain
   * array it can drop after dequantizing.
   * @param byteLength bytes (≥ 0)
   * @returns a Uint8Array of exactly `byteLength` bytes
   */
  allocateWeightBytes(byteLength: number): Uint8Array;

  /**
   * Zeroed f32 storage for one KV-cache buffer (`KVPool`): attention streams the whole cache every decode step, so a
   * backend places it where it reads fastest (the native backend: its own 2 MiB-aligned mapping on transparent huge
   * pages for 1 MiB and more, released when the array is collected; a plain array otherwise and in the f32
   * reference). Contents and arithmetic are the same either way.
   * @param floats f32 elements (≥ 0)
   * @returns a zeroed Float32Array of exactly `floats` elements, not shared with any other allocation
   */
  allocateKvBuffer(floats: number): Float32Array;

  /**
   * Linear layer without bias: y = x · Wᵀ.
   * @param x [numRows, K] f32
   * @param w [N, K] weight (PyTorch layout)
   * @returns [numRows, N] f32
   */
  matmul(x: Float32Array, numRows: number, w: Weight, out?: Float32Array): Float32Array;

  /**
   * Per-group linear layers in one call (MLA's absorbed per-head products, SGLang's `torch.bmm` over heads):
   * `y[m, g, :] = x[m, g, :] · W_gᵀ` with `W_g` = rows g·N .. g·N+N−1 of `w`. Each element is computed exactly as
   * `matmul` computes it (so a group equals matmul of the row against those weight rows).
   * @param x [numRows, groups, K] f32 at the layout's strides
   * @param w [groups·N, K] weight (PyTorch layout per group)
   * @param out written at the layout's strides (other elements untouched); a fresh output is [numRows, outRowStride]
   * @returns [numRows, groups, N] f32 (at the layout's strides)
   */
  groupedMatmul(x: Float32Array, numRows: number, groups: number, w: Weight, layout?: GroupedMatmulLayout, out?: Float32Array): Float32Array;

  /**
   * Embedding lookup: rows of `table`.
   * @param ids [n] i32, each in [0, V)
   * @param table [V, D]
   * @returns [n, D] f32
   */
  embedding(ids: Int32Array, table: Weight, out?: Float32Array): Float32Array;

  /**
   * RMSNorm (model-spec §1.4): y = x / sqrt(mean(x²) + eps) · w, reduction over `width`.
   * @param x [numRows, xRowStride] f32 (the first `width` of each row are normalized)
   * @param weight [width] f32
   * @returns [numRows, width] f32
   */
  rmsNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, eps: number, out?: Float32Array, xRowStride?: number): Float32Array;

  /**
   * LayerNorm: y = (x − mean) / sqrt(var + eps) · w + b (biased variance).
   * @param x [numRows, width] f32
   * @param weight [width] f32
   * @param bias [width] f32
   * @returns [numRows, width] f32
   */
  layerNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, bias: Float32Array, eps: number, out?: Float32Array): Float32Array;

  /**
   * Rotary position embedding, in place, on dims [offset, offset+rotaryDim) of every head (model-spec §1.5).
   * Angle θ_i = f32(pos · invFreq[i]); other dims are untouched.
   * @param x [numTokens, rowStride] f32, modified in place
   * @param positions [numTokens] i32 absolute positions
   */
  rope(x: Float32Array, numTokens: number, positions: Int32Array, target: RopeTarget, params: RopeParams): void;

  /**
   * Row softmax in f32 (max-subtracted).
   * @param x [numRows, width] f32
   * @returns [numRows, width] f32 (may be `x` itself when out === x)
   */
  softmax(x: Float32Array, numRows: number, width: number, out?: Float32Array): Float32Array;

  /** Element-wise a + b. @param a [n] f32 @param b [n] f32 @returns [n] f32 (out may alias a) */
  add(a: Float32Array, b: Float32Array, out?: Float32Array): Float32Array;

  /** Element-wise logistic sigmoid 1/(1+e^-x). @param x [n] f32 @returns [n] f32 */
  sigmoid(x: Float32Array, out?: Float32Array): Float32Array;

  /** SwiGLU gate: silu(gate) ⊙ up, silu(z) = z/(1+e^-z) (model-spec §1.6). @param gate [n] f32 @param up [n] f32 @returns [n] f32 */
  siluAndMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array;

  /**
   * Top-k per row (ties: lower column first; NaN ranks lowest).
   * @param x [numRows, width] f32
   * @param k 1 ≤ k ≤ width
   */
  topk(x: Float32Array, numRows: number, width: number, k: number): TopKResult;

  /**
   * Causal attention of a flat multi-request batch over the paged KV cache (K/V of this step already written).
   * @param q [numTokens, numHeads, headDim] f32
   * @param sparse optional per-row key subset (DSA top-k)
   * @returns [numTokens, numHeads, vHeadDim] f32
   */
  attention(q: Float32Array, numTokens: number, p: AttentionParams, batch: AttentionBatch, sparse?: SparseKeys): Float32Array;

  /**
   * DSA lightning-indexer top-k (DeepSeek-V3.2, model-spec §3.8.2–§3.8.3): for row t with sequence index `last`, all
   * positions 0..last when last+1 ≤ topK; otherwise the topK positions s with the largest
   * `I[s] = Σ_h weights[t,h]·ReLU(q[t,h]·k_s)` (k_s read through reqToToken → loc → p.kBuf), ties → lower position.
   * @param q [numTokens, numHeads, headDim] f32 rotated indexer queries (only read for rows with more than topK keys)
   * @param weights [numTokens, numHeads] f32 head weights (likewise)
   * @returns [numTokens, topK] i32 selected sequence indices per row, ascending, −1 padded
   */
  indexerTopK(q: Float32Array, weights: Float32Array, numTokens: number, p: IndexerParams, batch: AttentionBatch): Int32Array;

  /**
   * Routed experts: out[t] = Σ_j topkWeights[t,j] · Expert_{topkIds[t,j]}(x[t]). Each token's terms are summed in
   * ascending expert id (not batch dependent). Ids < 0 or with a null expert (not local) contribute nothing.
   * @param x [numTokens, D] f32
   * @param experts [E] expert weights (null = absent on this rank)
   * @param topkIds [numTokens, topK] i32
   * @param topkWeights [numTokens, topK] f32
   * @returns [numTokens, D] f32
   */
  fusedMoe(x: Float32Array, numTokens: number, hiddenSize: number, experts: readonly (ExpertWeights | null)[], topkIds: Int32Array, topkWeights: Float32Array, topK: number, out?: Float32Array): Float32Array;
}

// DSA lightning indexer layer (DeepSeek-V3.2): index keys into the KVPool, then per-query top-k keys through
// Ops.indexerTopK (index scores + causal top-k in one backend call).
//
// Formulas: model-spec.md §3.8.1–§3.8.3; upstream python/sglang/srt/layers/attention/nsa/nsa_indexer.py
// (Indexer), DeepSeek-V3.2-Exp inference/model.py (Indexer.forward). Like the float64 oracle of the fixtures we
// compute exact scores: the Hadamard rotation is orthonormal (no effect in exact maths) and the FP8 quantisation of
// q/k that the GPU kernels do is not emulated.
import type { AttentionBatch, Ops, RopeParams, SparseKeys, Weight } from '../../kernels/index.js';
import type { KVPool } from '../../mem_cache/index.js';

// The per-row maths (index scores, causal top-k) is the Ops.indexerTopK reference (kernels/cpu/indexer.ts).
export { indexScores, selectTopKCausal } from '../../kernels/index.js';

/** Indexer sizes (HF config names in brackets). */
export interface DsaIndexerDims {
  /** [hidden_size] */
  readonly hiddenSize: number;
  /** [q_lora_rank] width of the normalised q latent the indexer query is projected from */
  readonly qLoraRank: number;
  /** [index_n_heads] */
  readonly numHeads: number;
  /** [index_head_dim] */
  readonly headDim: number;
  /** [qk_rope_head_dim] rotated dims at the start of each indexer head */
  readonly ropeDim: number;
  /** [index_topk] keys kept per query token */
  readonly topK: number;
}

/** Weights of one layer's indexer (checkpoint `self_attn.indexer.*`). */
export interface DsaIndexerWeights {
  /** wq_b [numHeads·headDim, qLoraRank] */
  readonly wqB: Weight;
  /** wk [headDim, hiddenSize] */
  readonly wk: Weight;
  /** k_norm.weight [headDim] f32 */
  readonly kNormWeight: Float32Array;
  /** k_norm.bias [headDim] f32 */
  readonly kNormBias: Float32Array;
  /** weights_proj [numHeads, hiddenSize] */
  readonly weightsProj: Weight;
}

/** KVPool buffer holding each token's indexer key (width index_head_dim). */
export const INDEX_K_BUFFER = 'index_k';

/**
 * The DSA lightning indexer of one layer (model-spec.md §3.8): computes and caches every token's index key, then
 * selects for each query row the `topK` causal key positions with the largest index score (all of them when the row's
 * sequence index + 1 ≤ topK). Rows are independent of each other (batch invariant); decode reads earlier keys from the
 * KVPool, so one prefill, chunked prefill and token-by-token decode select the same keys.
 */
export class DsaIndexer {
  private readonly softmaxFold: number;

  /**
   * @param rope NeoX half-split rope params on the first `ropeDim` dims of each head (deepseekRopeParams(..., 'neox'))
   */
  constructor(
    private readonly ops: Ops,
    private readonly w: DsaIndexerWeights,
    readonly dims: DsaIndexerDims,
    private readonly rope: RopeParams,
  ) {
    this.softmaxFold = 1 / Math.sqrt(dims.numHeads) / Math.sqrt(dims.headDim);
  }

  /**
   * Writes this step's index keys into `kvPool` (buffer 'index_k' of `kvLayer`) and returns the selected key positions.
   * @param hidden [numTokens, hiddenSize] f32 normalised layer input (the `a` of model-spec §3.7)
   * @param qLatent [numTokens, qLoraRank] f32 normalised q latent (`c_q`)
   * @param positions [numTokens] i32 RoPE positions
   * @param outCacheLoc [numTokens] i32 loc each token's index key is written to
   * @param batch request geometry: row t of req i has sequence index extendPrefixLens[i]+j and sees keys 0..that index
   * @param kvPool pool holding buffer 'index_k' (one row of headDim per loc, in the pool's codec: f32, or SGLang's FP8
   *   e4m3 with a 128-block scale under an FP8/BF16 KV cache) for layer `kvLayer`
   * @param onSelection optional observer of each row's selection (debugging, golden tests)
   * @returns [numTokens, topK] i32 selected sequence indices per row, ascending, −1 padded
   * @throws InternalError (from the pool) when the layer or buffer does not exist
   */
  forward(
    hidden: Float32Array, qLatent: Float32Array, numTokens: number, positions: Int32Array, outCacheLoc: Int32Array,
    batch: AttentionBatch, kvPool: KVPool, kvLayer: number, onSelection?: (row: number, keys: Int32Array) => void,
  ): SparseKeys {
    const { numHeads, headDim, topK } = this.dims;
    const ops = this.ops;
    // 1. key: LayerNorm(wk·a), NeoX rope on its first ropeDim dims; cache it
    const k = ops.matmul(hidden, numTokens, this.w.wk); // [T, headDim]
    ops.layerNorm(k, numTokens, headDim, this.w.kNormWeight, this.w.kNormBias, 1e-6, k);
    ops.rope(k, numTokens, positions, { numHeads: 1, headDim }, this.rope);
    kvPool.write(kvLayer, INDEX_K_BUFFER, outCacheLoc, numTokens, k, headDim);
    const indexK = kvPool.store(kvLayer, INDEX_K_BUFFER);
    // 2. queries and head weights — only needed when some row has more causal keys than topK ("k-only" otherwise,
    //    as SGLang's indexer skips the logits when max_kv_len <= index_topk)
    let maxKeys = 0;
    for (let i = 0; i < batch.numReqs; i++) maxKeys = Math.max(maxKeys, batch.extendPrefixLens[i] + batch.extendSeqLens[i]);
    let q: Float32Array = new Float32Array(0);
    let weights: Float32Array = new Float32Array(0);
    if (maxKeys > topK) {
      q = ops.matmul(qLatent, numTokens, this.w.wqB); // [T, numHeads·headDim]
      ops.rope(q, numTokens, positions, { numHeads, headDim }, this.rope);
      weights = ops.matmul(hidden, numTokens, this.w.weightsProj); // [T, numHeads]
      for (let i = 0; i < weights.length; i++) weights[i] *= this.softmaxFold;
    }
    // 3. per row: scores over its causal keys, top-k (one backend call for the whole batch)
    const indices = ops.indexerTopK(q, weights, numTokens, { numHeads, headDim, topK, kBuf: indexK, kRowWidth: headDim }, batch);
    if (onSelection) {
      for (let t = 0; t < numTokens; t++) {
        const row = indices.subarray(t * topK, (t + 1) * topK);
        let n = 0;
        while (n < topK && row[n] >= 0) n++;
        onSelection(t, row.subarray(0, n));
      }
    }
    return { indices, width: topK };
  }
}

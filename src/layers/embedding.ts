// Token embedding and LM head (SGLang `layers/vocab_parallel_embedding.py`; vocab sharding comes with TP).
import type { Ops, Weight } from '../kernels/index.js';

/** Embedding table lookup (no scaling). */
export class VocabEmbedding {
  readonly vocabSize: number;
  readonly hiddenSize: number;

  /** @param weight [vocabSize, hiddenSize] */
  constructor(readonly weight: Weight, private readonly ops: Ops) {
    this.vocabSize = weight.shape[0];
    this.hiddenSize = weight.shape[1];
  }

  /**
   * @param ids [numTokens] i32 in [0, vocabSize)
   * @param out [numTokens, hiddenSize] f32 written in full (default: a new array)
   * @returns [numTokens, hiddenSize] f32 (`out` when given)
   */
  forward(ids: Int32Array, out?: Float32Array): Float32Array {
    return this.ops.embedding(ids, this.weight, out);
  }
}

/** Output projection hidden → vocab logits: logits = h · Wᵀ. */
export class ParallelLMHead {
  readonly vocabSize: number;

  /** @param weight [vocabSize, hiddenSize] (lm_head.weight, or embed_tokens.weight when tied) */
  constructor(readonly weight: Weight, private readonly ops: Ops) {
    this.vocabSize = weight.shape[0];
  }

  /**
   * @param h [numRows, hiddenSize] f32
   * @returns [numRows, vocabSize] f32
   */
  forward(h: Float32Array, numRows: number): Float32Array {
    return this.ops.matmul(h, numRows, this.weight);
  }
}

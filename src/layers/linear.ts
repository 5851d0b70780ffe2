// Linear layers over a backend Weight (PyTorch [out, in] layout, no bias: neither supported model has one).
import { assert } from '../common/index.js';
import type { Ops, Weight } from '../kernels/index.js';

/**
 * Replicated linear y = x · Wᵀ (SGLang `layers/linear.py` ReplicatedLinear; tensor-parallel variants come with TP).
 * The weight stays in whatever form the backend holds it (f32, or FP8/BF16 for a fast backend).
 */
export class Linear {
  readonly inFeatures: number;
  readonly outFeatures: number;

  /**
   * @param weight [outFeatures, inFeatures]
   * @throws InternalError if the weight is not 2-D
   */
  constructor(readonly weight: Weight, private readonly ops: Ops) {
    assert(weight.shape.length === 2, 'Linear: weight must be 2-D');
    this.outFeatures = weight.shape[0];
    this.inFeatures = weight.shape[1];
  }

  /**
   * @param x [numRows, inFeatures] f32
   * @param out [numRows, outFeatures] f32 written in full (default: a new array); must not alias x
   * @returns [numRows, outFeatures] f32 (`out` when given)
   */
  forward(x: Float32Array, numRows: number, out?: Float32Array): Float32Array {
    return this.ops.matmul(x, numRows, this.weight, out);
  }
}

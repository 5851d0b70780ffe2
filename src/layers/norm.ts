// RMSNorm layer (model-spec §1.4). The residual add is a separate ops.add (same arithmetic as the fused form).
import type { Ops } from '../kernels/index.js';

/** RMSNorm over the last `width` values of each row (SGLang `layers/layernorm.py` RMSNorm). */
export class RMSNorm {
  readonly width: number;

  /** @param weight [width] f32 */
  constructor(readonly weight: Float32Array, readonly eps: number, private readonly ops: Ops) {
    this.width = weight.length;
  }

  /**
   * @param x [numRows, width] f32
   * @param out [numRows, width] f32 written in full (default: a new array); must not alias x
   * @returns [numRows, width] f32 (`out` when given)
   */
  forward(x: Float32Array, numRows: number, out?: Float32Array): Float32Array {
    return this.ops.rmsNorm(x, numRows, this.width, this.weight, this.eps, out);
  }
}

// Rotary embedding layer: default inverse frequencies (model-spec §1.5), NeoX or interleaved, partial rotary.
// YaRN frequency tables (DeepSeek) come from layers/rotary_yarn.ts and are passed in as `invFreq`.
import { InternalError } from '../common/index.js';
import { ropeInvFreq } from '../kernels/index.js';
import type { Ops, RopeParams, RopeStyle, RopeTarget } from '../kernels/index.js';

/**
 * Applies RoPE to the first `rotaryDim` dims (or those at `offset`) of every head of q/k, in place
 * (SGLang `layers/rotary_embedding.py` get_rope / RotaryEmbedding).
 */
export class RotaryEmbedding {
  readonly params: RopeParams;

  /**
   * @param invFreq [rotaryDim/2] f32 inverse frequencies
   * @param mscale multiplier on cos/sin (YaRN; 1 otherwise)
   * @throws InternalError if rotaryDim is odd or invFreq has the wrong length
   */
  constructor(readonly rotaryDim: number, style: RopeStyle, invFreq: Float32Array, private readonly ops: Ops, mscale = 1) {
    if (rotaryDim % 2 !== 0 || invFreq.length !== rotaryDim / 2) throw new InternalError(`RotaryEmbedding: rotaryDim ${rotaryDim} and invFreq length ${invFreq.length} disagree`);
    this.params = { invFreq, rotaryDim, style, mscale };
  }

  /**
   * Standard RoPE: invFreq[i] = base^(-2i/rotaryDim) in f32.
   * @param rotaryDim rotated dims per head (MiniMax-M2: rotary_dim of head_dim)
   */
  static standard(rotaryDim: number, base: number, style: RopeStyle, ops: Ops): RotaryEmbedding {
    return new RotaryEmbedding(rotaryDim, style, ropeInvFreq(base, rotaryDim), ops);
  }

  /**
   * Rotates x in place.
   * @param x [numTokens, rowStride] f32 (heads of `target.headDim` each)
   * @param positions [numTokens] i32
   */
  apply(x: Float32Array, numTokens: number, positions: Int32Array, target: RopeTarget): void {
    this.ops.rope(x, numTokens, positions, target, this.params);
  }
}

// Hidden states → logits for the rows the batch asks for (SGLang `layers/logits_processor.py`): gathers
// batch.logitRows of the residual stream, applies the final norm to those rows only, then the LM head.
import { assert } from '../common/index.js';
import type { ParallelLMHead } from './embedding.js';
import type { RMSNorm } from './norm.js';
import type { ForwardBatch, ForwardOutput } from './forward_batch.js';

/** Gathers the wanted rows and projects them to the vocabulary. */
export class LogitsProcessor {
  constructor(readonly hiddenSize: number) {}

  /**
   * @param hidden [numTokens, hiddenSize] f32 (before the final norm when `finalNorm` is given, else after it)
   * @param finalNorm the model's final norm (row-wise, so applying it to the gathered rows only is exact)
   * @returns logits [numLogitRows, vocabSize] f32, in batch.logitsOut when given (+ the gathered final-norm hidden states when
   *   batch.captureHiddenStates)
   * @throws InternalError for a logit row outside the batch
   */
  forward(hidden: Float32Array, batch: ForwardBatch, lmHead: ParallelLMHead, finalNorm?: RMSNorm): ForwardOutput {
    const d = this.hiddenSize;
    const rows = batch.logitRows;
    const picked = new Float32Array(rows.length * d);
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      assert(r >= 0 && r < batch.numTokens, () => `LogitsProcessor: logit row ${r} outside [0, ${batch.numTokens})`);
      picked.set(hidden.subarray(r * d, (r + 1) * d), i * d);
    }
    const normed = finalNorm ? finalNorm.forward(picked, rows.length) : picked;
    const out = batch.logitsOut?.subarray(0, rows.length * lmHead.vocabSize);
    const logits = lmHead.forward(normed, rows.length, out !== undefined && out.length === rows.length * lmHead.vocabSize ? out : undefined);
    return batch.captureHiddenStates ? { logits, hiddenStates: normed } : { logits };
  }
}

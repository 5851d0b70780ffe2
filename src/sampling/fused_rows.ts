// Batched sampling of one decode step's rows (issue 21): penalties and grammar masks here (sparse), then every row —
// greedy, temperature, top-k / top-p / min-p, logprobs — in one call of the fused native sampler over the addon's
// threads, with each request's seeded uniform draw taken here exactly as the reference takes it. Without the
// native sampler, each row is sampleRow.
import { applyPenalties, applyVocabMask, sampleRow, sampleRowPenalized, samplerKernels, type RowSample, type RowSamplingInfo } from './sampler.js';
import { drawFromScaledReference } from './sampler_reference.js';
import { topLogprobsOf } from './top_logprobs.js';

/** One row of a batch for sampleRows: its index in the [rows, V] logits and its request's sampling inputs. */
export interface BatchRowRequest {
  readonly logitIdx: number;
  readonly info: RowSamplingInfo;
}

/** Doubles per row in the fused sampler's parameter block (native/src/fused_sampling.h FusedRowParams). */
const PARAM_STRIDE = 8;

/** Per-step buffers reused across calls (grown to the largest batch). */
let cap = 0;
let rowsBuf = new Int32Array(0);
let paramsBuf = new Float64Array(0);
let tokBuf = new Int32Array(0);
let lpBuf = new Float64Array(0);
let statusBuf = new Int32Array(0);
function ensure(m: number): void {
  if (m <= cap) return;
  cap = Math.max(m, 2 * cap);
  rowsBuf = new Int32Array(cap);
  paramsBuf = new Float64Array(cap * PARAM_STRIDE);
  tokBuf = new Int32Array(cap);
  lpBuf = new Float64Array(cap);
  statusBuf = new Int32Array(cap);
}

/**
 * Samples the rows of a [numRows, V] logits matrix with SGLang's semantics (sampleRow's: penalties → grammar mask →
 * greedy argmax for top_k = 1, else softmax(logits / T) under top-k, top-p, min-p and a multinomial draw; logprobs
 * of the unfiltered distribution). With the fused native sampler installed, all rows run in one native call over
 * its threads: the same tokens and RNG use as sampleRowReference (the oracle; native/src/fused_sampling.h gives
 * the numerics: logprobs agree with it within an f32 ulp, or ~1e-14 absolute near 0); rows with
 * NaN / +Infinity / all −Infinity take the reference. Without it, each row is sampleRow.
 * @param logits [numRows, V] f32 (the sampled rows are overwritten with scratch values)
 * @returns one RowSample per request, in order
 */
export function sampleRows(logits: Float32Array, V: number, reqs: readonly BatchRowRequest[]): RowSample[] {
  const k = samplerKernels();
  const row = (i: number) => logits.subarray(i * V, (i + 1) * V);
  if (!k?.fusedRows || reqs.length === 0) return reqs.map((r) => sampleRow(row(r.logitIdx), r.info));
  const m = reqs.length;
  ensure(m);
  const us = new Float64Array(m);
  for (let j = 0; j < m; j++) {
    const { info } = reqs[j];
    const s = row(reqs[j].logitIdx);
    applyPenalties(s, info);
    if (info.vocabMask) applyVocabMask(s, info.vocabMask);
    const p = info.params;
    const greedy = p.topK === 1;
    // one uniform per non-greedy row, taken before the row is drawn (the reference's single rng.nextFloat())
    us[j] = greedy ? 0 : info.rng.nextFloat();
    rowsBuf[j] = reqs[j].logitIdx;
    const o = j * PARAM_STRIDE;
    paramsBuf[o] = greedy ? 0 : 1 / p.temperature;
    paramsBuf[o + 1] = Math.min(p.topK, V);
    paramsBuf[o + 2] = p.topP;
    paramsBuf[o + 3] = p.minP;
    paramsBuf[o + 4] = us[j];
    paramsBuf[o + 5] = greedy && info.needLogprob === false ? 0 : 1;
    paramsBuf[o + 6] = info.topLogprobsNum;
    paramsBuf[o + 7] = 0;
  }
  k.fusedRows(logits, V, rowsBuf.subarray(0, m), paramsBuf.subarray(0, m * PARAM_STRIDE), tokBuf, lpBuf, statusBuf);
  const out = new Array<RowSample>(m);
  for (let j = 0; j < m; j++) {
    const { info } = reqs[j];
    const s = row(reqs[j].logitIdx);
    if (statusBuf[j] !== 0) {
      // non-finite row: greedy rows are untouched, others were scaled in place, as sampleRow leaves them
      out[j] = info.params.topK === 1 ? sampleRowPenalized(s, info) : drawFromScaledReference(s, info, us[j]);
      continue;
    }
    const tokenId = tokBuf[j];
    out[j] = { tokenId, logprob: lpBuf[j], topLogprobs: info.topLogprobsNum > 0 ? topLogprobsOf(s, info.topLogprobsNum) : [] };
  }
  return out;
}

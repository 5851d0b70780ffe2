// Pipeline-parallel stages (SGLang --pp-size): which decoder layers a stage holds (SGLang
// python/sglang/srt/distributed/utils.py get_pp_indices, with the SGLANG_PP_LAYER_PARTITION override), and where a
// rank sits (SGLang's world layout: global rank = pp_rank · tp_size + tp_rank). The first stage embeds the tokens,
// the last applies the final norm and the LM head; in between a stage's input is the previous stage's residual stream.
import { InternalError, InvalidRequestError } from '../common/index.js';
import type { ForwardBatch } from './forward_batch.js';

/** One pipeline stage: its index and its decoder layers [startLayer, endLayer). */
export interface PipelineStage {
  readonly ppRank: number;
  readonly ppSize: number;
  readonly startLayer: number;
  readonly endLayer: number;
}

/** True for the stage that embeds the input ids (pp rank 0). */
export function isFirstStage(s: PipelineStage | undefined): boolean {
  return s === undefined || s.ppRank === 0;
}

/** True for the stage that computes the logits (pp rank pp_size − 1). */
export function isLastStage(s: PipelineStage | undefined): boolean {
  return s === undefined || s.ppRank === s.ppSize - 1;
}

/**
 * Layers [start, end) of pp rank `ppRank` (SGLang get_pp_indices): `numLayers // ppSize` each, the last
 * `numLayers % ppSize` stages one more; or the comma-separated per-stage counts of SGLANG_PP_LAYER_PARTITION.
 * @param partition the SGLANG_PP_LAYER_PARTITION value, or null
 * @throws InvalidRequestError with SGLang's messages for a partition that is not integers, has another length than
 *   ppSize, or does not sum to numLayers
 */
export function ppLayerRange(numLayers: number, ppRank: number, ppSize: number, partition: string | null): { start: number; end: number } {
  if (partition !== null) {
    const parts = partition.split(',').map((p) => p.trim());
    if (parts.some((p) => !/^[+-]?\d+$/.test(p))) throw new InvalidRequestError(`Invalid partition string: ${partition}`, 'SGLANG_PP_LAYER_PARTITION');
    const counts = parts.map(Number);
    if (counts.length !== ppSize) throw new InvalidRequestError(`len(partitions)=${counts.length} does not match pp_size=${ppSize}.`, 'SGLANG_PP_LAYER_PARTITION');
    const sum = counts.reduce((a, b) => a + b, 0);
    if (sum !== numLayers) throw new InvalidRequestError(`sum(partitions)=${sum} does not match num_hidden_layers=${numLayers}.`, 'SGLANG_PP_LAYER_PARTITION');
    if (counts.some((c) => c < 0)) throw new InvalidRequestError(`Invalid partition string: ${partition}`, 'SGLANG_PP_LAYER_PARTITION');
    const start = counts.slice(0, ppRank).reduce((a, b) => a + b, 0);
    return { start, end: start + counts[ppRank] };
  }
  const base = Math.floor(numLayers / ppSize);
  const rem = numLayers % ppSize;
  if (ppRank >= ppSize - rem) {
    const start = ppRank * (base + 1) - (ppSize - rem);
    return { start, end: start + base + 1 };
  }
  return { start: ppRank * base, end: (ppRank + 1) * base };
}

/** Stage `ppRank` of a `ppSize`-stage split of `numLayers` decoder layers. @throws InvalidRequestError as ppLayerRange */
export function pipelineStage(numLayers: number, ppRank: number, ppSize: number, partition: string | null): PipelineStage {
  const { start, end } = ppLayerRange(numLayers, ppRank, ppSize, partition);
  return { ppRank, ppSize, startLayer: start, endLayer: end };
}

/**
 * Whether a checkpoint tensor belongs to a stage: decoder layer l's tensors on the stage holding l (the MTP layers,
 * l ≥ numLayers, on none: speculative decoding is refused with PP), the embedding on the first stage (and on the last
 * when the LM head is tied to it), the final norm and the LM head on the last; any other tensor everywhere.
 */
export function stageHoldsTensor(name: string, stage: PipelineStage, numLayers: number, tiedEmbeddings: boolean): boolean {
  const m = /^model\.layers\.(\d+)\./.exec(name);
  if (m) {
    const l = Number(m[1]);
    return l < numLayers && l >= stage.startLayer && l < stage.endLayer;
  }
  if (name === 'model.embed_tokens.weight') return isFirstStage(stage) || (tiedEmbeddings && isLastStage(stage));
  if (name === 'model.norm.weight' || name === 'lm_head.weight') return isLastStage(stage);
  return true;
}

/**
 * The residual stream a stage after the first starts from: batch.ppHiddenIn, checked against the batch.
 * @returns [numTokens, hiddenSize] f32 (updated in place by the stage's layers)
 * @throws InternalError when it is missing or of another size (a pipeline bug)
 */
export function stageInput(batch: ForwardBatch, hiddenSize: number): Float32Array {
  const h = batch.ppHiddenIn;
  if (!h || h.length !== batch.numTokens * hiddenSize) {
    throw new InternalError(`pipeline stage input: expected ${batch.numTokens}×${hiddenSize} hidden states from the previous stage, got ${h ? h.length : 'none'}`);
  }
  return h;
}

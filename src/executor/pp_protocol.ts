// The bytes that travel between pipeline stages (SGLang PP: the scheduler's batch and the "proxy tensors" go stage to
// stage, the last stage's next_token_ids and logprobs come back to the first; scheduler_pp_mixin.py). Three messages:
// - stage message (stage s → s+1, same TP rank; stage 0's TP peers get it on the stage's step channel): the step
//   descriptor (step_codec.ts), the sample plan (TP rank 0's chain only) and the residual stream after stage s;
// - sample plan: what the last stage samples and scores, with each row's sampling inputs (its RNG's state included,
//   so the draw is the one the scheduler's thread would make);
// - stage result (last stage TP rank 0 → global rank 0): the samples, scores and the rows' RNG states after sampling
//   (plus the logits when a tool asked for them).
// Our layers keep one residual stream (x += attn(norm(x)); x += mlp(norm(x))), so the hidden states are one tensor where
// SGLang's fused add-norm passes hidden_states and residual.
import { InternalError, Rng } from '../common/index.js';
import type { RowSamplerParams } from '../sampling/index.js';
import type { RowScore, RunResult, SampleRowRequest, ScoreRowRequest } from './model_runner.js';

const MAGIC_STAGE = 0x50505354; // 'PPST'
const MAGIC_RESULT = 0x50505253; // 'PPRS'
const KIND_FORWARD = 1;
const KIND_SHUTDOWN = 2;
const HEADER_WORDS = 5;

/** A decoded stage message. */
export type StageMessage =
  | { readonly kind: 'forward'; readonly step: Uint8Array; readonly plan: Uint8Array; readonly hidden: Float32Array | null }
  | { readonly kind: 'shutdown' };

const pad4 = (n: number): number => (n + 3) & ~3;

/** JSON that keeps ±Infinity and NaN (logprobs of masked tokens), as strings. */
const toJson = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : x)));
const NON_FINITE: Readonly<Record<string, number>> = { Infinity: Infinity, '-Infinity': -Infinity, NaN: NaN };
const fromJson = <T>(b: Uint8Array): T => JSON.parse(new TextDecoder().decode(b), (_k, x: unknown) => (typeof x === 'string' && x in NON_FINITE ? NON_FINITE[x] : x)) as T;

/**
 * A stage message: header [magic, kind, step bytes, plan bytes, hidden floats], the step, the plan (each padded to 4
 * bytes), the hidden states.
 * @param hidden [numTokens, hiddenSize] f32 residual stream for the next stage (null for stage 0's step channel)
 */
export function encodeStageMessage(step: Uint8Array, plan: Uint8Array, hidden: Float32Array | null): Uint8Array {
  const nH = hidden?.length ?? 0;
  const out = new Uint8Array(HEADER_WORDS * 4 + pad4(step.length) + pad4(plan.length) + nH * 4);
  const w = new Int32Array(out.buffer, 0, HEADER_WORDS);
  w.set([MAGIC_STAGE, KIND_FORWARD, step.length, plan.length, nH]);
  let o = HEADER_WORDS * 4;
  out.set(step, o);
  o += pad4(step.length);
  out.set(plan, o);
  o += pad4(plan.length);
  if (hidden) new Float32Array(out.buffer, o, nH).set(hidden);
  return out;
}

/** The message that makes every stage leave its loop (passed on to the next stage). */
export function encodeStageShutdown(): Uint8Array {
  const out = new Uint8Array(HEADER_WORDS * 4);
  new Int32Array(out.buffer).set([MAGIC_STAGE, KIND_SHUTDOWN, 0, 0, 0]);
  return out;
}

/** @throws InternalError for bytes that are not a stage message */
export function decodeStageMessage(bytes: Uint8Array): StageMessage {
  const b = bytes.byteOffset % 4 === 0 ? bytes : bytes.slice();
  if (b.length < HEADER_WORDS * 4) throw new InternalError(`stage message: ${b.length} bytes`);
  const [magic, kind, nStep, nPlan, nH] = new Int32Array(b.buffer, b.byteOffset, HEADER_WORDS);
  if (magic !== MAGIC_STAGE) throw new InternalError('stage message: bad magic');
  if (kind === KIND_SHUTDOWN) return { kind: 'shutdown' };
  if (kind !== KIND_FORWARD) throw new InternalError(`stage message: unknown kind ${kind}`);
  let o = b.byteOffset + HEADER_WORDS * 4;
  const step = new Uint8Array(b.buffer, o, nStep);
  o += pad4(nStep);
  const plan = new Uint8Array(b.buffer, o, nPlan);
  o += pad4(nPlan);
  if (o - b.byteOffset + nH * 4 > b.length) throw new InternalError('stage message: truncated');
  return { kind: 'forward', step, plan, hidden: nH > 0 ? new Float32Array(b.buffer, o, nH) : null };
}

/** One sampled row on the wire: RowSamplingInfo with the RNG as its state and the mask as a plain array. */
interface WireSampleRow {
  readonly i: number;
  readonly p: RowSamplerParams;
  readonly rng: number[];
  /** Output-token counts, only when a penalty reads them. */
  readonly counts: [number, number][];
  readonly n: number;
  readonly stop: readonly number[];
  readonly top: number;
  readonly lp: boolean;
  readonly mask: number[] | null;
}

/** What the last stage does with a micro-batch's logits. */
export interface SamplePlan {
  readonly sample: SampleRowRequest[];
  readonly score: ScoreRowRequest[];
  /** Send the logits back too (a tool's forward, not the scheduler's). */
  readonly wantLogits: boolean;
}

const usesCounts = (p: RowSamplerParams): boolean => p.frequencyPenalty !== 0 || p.presencePenalty !== 0 || p.repetitionPenalty !== 1;

/** Serializes the rows to sample and score (JSON); the RNGs are read, not advanced. */
export function encodeSamplePlan(sample: readonly SampleRowRequest[], score: readonly ScoreRowRequest[], wantLogits: boolean): Uint8Array {
  const rows: WireSampleRow[] = sample.map(({ logitIdx, info }) => ({
    i: logitIdx,
    p: {
      temperature: info.params.temperature, topP: info.params.topP, topK: info.params.topK, minP: info.params.minP,
      frequencyPenalty: info.params.frequencyPenalty, presencePenalty: info.params.presencePenalty, repetitionPenalty: info.params.repetitionPenalty,
      minNewTokens: info.params.minNewTokens, logitBias: info.params.logitBias,
    },
    rng: info.rng.getState(),
    counts: usesCounts(info.params) ? [...info.outputCounts] : [],
    n: info.numOutputTokens,
    stop: info.stopTokenIds,
    top: info.topLogprobsNum,
    lp: info.needLogprob ?? true,
    mask: info.vocabMask ? Array.from(info.vocabMask) : null,
  }));
  return toJson({ rows, score, wantLogits });
}

/** The plan as the sampler takes it (each row with a fresh Rng at the sent state). */
export function decodeSamplePlan(bytes: Uint8Array): SamplePlan {
  const o = fromJson<{ rows: WireSampleRow[]; score: ScoreRowRequest[]; wantLogits: boolean }>(bytes);
  return {
    sample: o.rows.map((r) => ({
      logitIdx: r.i,
      info: {
        params: r.p, rng: Rng.fromState(r.rng), outputCounts: new Map(r.counts), numOutputTokens: r.n, stopTokenIds: r.stop,
        topLogprobsNum: r.top, needLogprob: r.lp, vocabMask: r.mask ? Int32Array.from(r.mask) : null,
      },
    })),
    score: o.score,
    wantLogits: o.wantLogits,
  };
}

/** The last stage's answer for one micro-batch. */
export interface StageResult extends RunResult {
  /** Per sample row: its RNG state after the draw (the scheduler's Req.rng continues from it). */
  readonly rngStates: number[][];
  /** [numLogitRows, vocabSize] f32 when the plan asked for them. */
  readonly logits?: Float32Array;
}

/** Serializes a stage result: header [magic, json bytes, logit floats], the JSON, the logits. */
export function encodeStageResult(samples: RunResult['samples'], scores: readonly RowScore[], rngStates: number[][], logits: Float32Array | null): Uint8Array {
  const json = toJson({ samples, scores, rngStates });
  const nL = logits?.length ?? 0;
  const out = new Uint8Array(12 + pad4(json.length) + nL * 4);
  new Int32Array(out.buffer, 0, 3).set([MAGIC_RESULT, json.length, nL]);
  out.set(json, 12);
  if (logits) new Float32Array(out.buffer, 12 + pad4(json.length), nL).set(logits);
  return out;
}

/** @throws InternalError for bytes that are not a stage result */
export function decodeStageResult(bytes: Uint8Array): StageResult {
  const b = bytes.byteOffset % 4 === 0 ? bytes : bytes.slice();
  const [magic, nJson, nL] = new Int32Array(b.buffer, b.byteOffset, 3);
  if (magic !== MAGIC_RESULT) throw new InternalError('stage result: bad magic');
  const o = fromJson<{ samples: RunResult['samples']; scores: RowScore[]; rngStates: number[][] }>(new Uint8Array(b.buffer, b.byteOffset + 12, nJson));
  const logits = nL > 0 ? new Float32Array(b.buffer, b.byteOffset + 12 + pad4(nJson), nL) : undefined;
  return { samples: o.samples, scores: o.scores, rngStates: o.rngStates, ...(logits ? { logits } : {}) };
}

// The step descriptor rank 0 sends every TP rank: a ForwardBatch's arrays serialized to bytes (SGLang broadcasts the
// scheduler's batch to every TP worker the same way, so every rank builds the same batch). The req→token table is
// sent compacted to the rows of this batch's requests (each cut at its sequence length), so a rank needs no copy of
// the scheduler's ReqToTokenPool; the KV locs are the same on every rank (one token index space).
import { InternalError } from '../common/index.js';
import type { ForwardBatch, ForwardMode } from '../layers/index.js';
import type { KVPool } from '../mem_cache/index.js';

const MAGIC = 0x54505354; // 'TPST'
const MODES: readonly ForwardMode[] = ['extend', 'decode', 'mixed', 'idle', 'target_verify', 'draft_extend'];
/** Step kinds. */
const KIND_FORWARD = 1;
const KIND_SHUTDOWN = 2;
/** PD: every rank copies the KV rows of some locs out of its pool (kv_steps.ts gathers them on rank 0). */
const KIND_KV_GATHER = 3;
/** PD: every rank writes its own part of some KV rows into its pool. */
const KIND_KV_SCATTER = 4;
/** Header words: magic, kind, mode, numReqs, numTokens, stride, flags, kvMaxLocs, kvPoolId. */
const HEADER = 9;

/** The ForwardBatch arrays sent per request / token, in wire order. */
const ARRAYS = ['inputIds', 'positions', 'outCacheLoc', 'extendPrefixLens', 'extendSeqLens', 'seqLens', 'extendStartLoc', 'logitRows'] as const;

/** A decoded step. */
export type DecodedStep =
  | { readonly kind: 'forward'; readonly kvMaxLocs: number; readonly kvPoolId: number; readonly build: (kvPool: KVPool) => ForwardBatch }
  | { readonly kind: 'shutdown' }
  | KvStep;

/**
 * A PD KV step (kv_steps.ts): `kv_gather` — every rank copies the rows of `locs` out of its pool for rank 0;
 * `kv_scatter` — rank r writes `rows[r]` (its own heads, layer-major as gatherKvRows packs them) at `locs`.
 */
export type KvStep =
  | { readonly kind: 'kv_gather'; readonly kvMaxLocs: number; readonly kvPoolId: number; readonly locs: Int32Array }
  | { readonly kind: 'kv_scatter'; readonly kvMaxLocs: number; readonly kvPoolId: number; readonly locs: Int32Array; readonly rows: readonly Uint8Array[] };

/**
 * Serializes a KV step: header (magic, kind, kvPoolId, kvMaxLocs, nLocs, nRows), locs, then per rank its byte length
 * and its bytes padded to whole words.
 */
export function encodeKvStep(step: KvStep): Uint8Array {
  const rows = step.kind === 'kv_scatter' ? step.rows : [];
  let words = 6 + step.locs.length + rows.length;
  for (const r of rows) words += Math.ceil(r.length / 4);
  const out = new Int32Array(words);
  out.set([MAGIC, step.kind === 'kv_gather' ? KIND_KV_GATHER : KIND_KV_SCATTER, step.kvPoolId, step.kvMaxLocs, step.locs.length, rows.length]);
  out.set(step.locs, 6);
  let o = 6 + step.locs.length;
  const bytes = new Uint8Array(out.buffer);
  for (const r of rows) {
    out[o++] = r.length;
    bytes.set(r, o * 4);
    o += Math.ceil(r.length / 4);
  }
  return bytes;
}

function decodeKvStep(w: Int32Array, bytes: Uint8Array): KvStep {
  const [, kind, kvPoolId, kvMaxLocs, nLocs, nRows] = w;
  const locs = w.slice(6, 6 + nLocs);
  if (kind === KIND_KV_GATHER) return { kind: 'kv_gather', kvPoolId, kvMaxLocs, locs };
  const rows: Uint8Array[] = [];
  let o = 6 + nLocs;
  for (let i = 0; i < nRows; i++) {
    const len = w[o++];
    rows.push(bytes.subarray(o * 4, o * 4 + len));
    o += Math.ceil(len / 4);
  }
  return { kind: 'kv_scatter', kvPoolId, kvMaxLocs, locs, rows };
}

/**
 * Serializes a forward step.
 * @param kvMaxLocs the KV pool's maxLocs (a rank sizes its own pool from it)
 * @param kvPoolId which of rank 0's KV pools the step uses (a rank keeps one pool of its own per id)
 * @returns i32 words as bytes: header, then each array as (length, values), then the compacted req→token rows
 */
export function encodeForwardStep(batch: ForwardBatch, kvMaxLocs: number, kvPoolId = 0): Uint8Array {
  const B = batch.numReqs;
  let stride = 1;
  for (let i = 0; i < B; i++) stride = Math.max(stride, batch.seqLens[i]);
  let words = HEADER + B * stride;
  for (const k of ARRAYS) words += 1 + batch[k].length;
  const out = new Int32Array(words);
  const mode = MODES.indexOf(batch.forwardMode);
  if (mode < 0) throw new InternalError(`encodeForwardStep: unknown forward mode ${batch.forwardMode}`);
  const flags = (batch.captureHiddenStates ? 1 : 0) | (batch.captureRoutedExperts ? 2 : 0);
  out.set([MAGIC, KIND_FORWARD, mode, B, batch.numTokens, stride, flags, kvMaxLocs, kvPoolId]);
  let o = HEADER;
  for (const k of ARRAYS) {
    const a = batch[k];
    out[o++] = a.length;
    out.set(a, o);
    o += a.length;
  }
  for (let i = 0; i < B; i++) {
    const row = batch.reqPoolIndices[i] * batch.reqToTokenStride;
    out.set(batch.reqToToken.subarray(row, row + batch.seqLens[i]), o + i * stride);
  }
  return new Uint8Array(out.buffer);
}

/** The shutdown step (every rank leaves its loop). */
export function encodeShutdownStep(): Uint8Array {
  const out = new Int32Array(HEADER);
  out[0] = MAGIC;
  out[1] = KIND_SHUTDOWN;
  return new Uint8Array(out.buffer);
}

/**
 * Decodes a step; `build` makes the ForwardBatch over the rank's own pool (req i at reqToToken row i).
 * @throws InternalError for bytes that are not a step descriptor
 */
export function decodeStep(bytes: Uint8Array): DecodedStep {
  if (bytes.byteLength % 4 !== 0 || bytes.byteLength < HEADER * 4) throw new InternalError(`decodeStep: ${bytes.byteLength} bytes is not a step`);
  const w = bytes.byteOffset % 4 === 0 ? new Int32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) : new Int32Array(bytes.slice().buffer);
  if (w[0] !== MAGIC) throw new InternalError('decodeStep: bad magic');
  if (w[1] === KIND_SHUTDOWN) return { kind: 'shutdown' };
  if (w[1] === KIND_KV_GATHER || w[1] === KIND_KV_SCATTER) return decodeKvStep(w, new Uint8Array(w.buffer, w.byteOffset, w.byteLength));
  if (w[1] !== KIND_FORWARD) throw new InternalError(`decodeStep: unknown kind ${w[1]}`);
  const [, , mode, numReqs, numTokens, stride, flags, kvMaxLocs, kvPoolId] = w;
  const arrays: Record<string, Int32Array> = {};
  let o = HEADER;
  for (const k of ARRAYS) {
    const n = w[o++];
    arrays[k] = w.slice(o, o + n);
    o += n;
  }
  const reqToToken = w.slice(o, o + numReqs * stride);
  if (reqToToken.length !== numReqs * stride) throw new InternalError('decodeStep: truncated req→token rows');
  const reqPoolIndices = Int32Array.from({ length: numReqs }, (_, i) => i);
  return {
    kind: 'forward',
    kvMaxLocs,
    kvPoolId,
    build: (kvPool) => ({
      forwardMode: MODES[mode],
      numReqs,
      numTokens,
      inputIds: arrays.inputIds,
      positions: arrays.positions,
      outCacheLoc: arrays.outCacheLoc,
      extendPrefixLens: arrays.extendPrefixLens,
      extendSeqLens: arrays.extendSeqLens,
      seqLens: arrays.seqLens,
      extendStartLoc: arrays.extendStartLoc,
      reqPoolIndices,
      reqToToken,
      reqToTokenStride: stride,
      logitRows: arrays.logitRows,
      captureHiddenStates: (flags & 1) !== 0,
      captureRoutedExperts: (flags & 2) !== 0,
      kvPool,
    }),
  };
}

// Draft-side forwards of speculative decoding (serving-spec §4.2 steps 1 and 4): the draft extend that brings the
// draft's KV up to the verified tokens (after a prefill chunk and after each verify for EAGLE, before drafting for
// STANDALONE), and the draft levels that record the candidates of each request's tree. Each draft forward is a batch
// over the draft model's own KV pool; rows attend through a req→token table built for that forward (the request's
// verified prefix shifted to draft-pool locs, then its draft ancestors' scratch slots), so a tree needs no mask.
import { assert } from '../common/index.js';
import type { ForwardBatch } from '../layers/index.js';
import { DraftCandidates, topKIndices, type DraftModel, type SpecConfig } from '../speculative/index.js';
import type { CacheManager } from './cache_manager.js';
import type { Req } from './req.js';

/** One request's draft extend: positions [from, to) with their tokens (and target hidden states for EAGLE). */
export interface DraftExtendItem {
  readonly req: Req;
  readonly from: number;
  readonly to: number;
  /** [to − from] token at each position (EAGLE: the next token S[i+1]; STANDALONE: S[i]). */
  readonly tokens: ArrayLike<number>;
  /** [to − from, hiddenSize] f32 target hidden states h_i (EAGLE), else null. */
  readonly hidden: Float32Array | null;
}

/** The k most likely tokens of a logits row and their softmax probabilities (ties → lower id). */
export function topKProbs(row: Float32Array, k: number): { ids: Int32Array; probs: Float32Array } {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > max) max = row[i];
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  const best = k === 1 ? [argmax(row)] : topKIndices(row, k);
  return { ids: Int32Array.from(best), probs: Float32Array.from(best, (i) => Math.exp(row[i] - max) / sum) };
}

function argmax(row: Float32Array): number {
  let b = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[b]) b = i;
  return b;
}

/** A decode-style batch of rows, each with its own table row (prefix + extra locs), over `pool`. */
interface RowSpec {
  readonly prefixRow: number;
  readonly prefixLen: number;
  /** Locs after the prefix (already in the pool's loc space); the last is the row's own token. */
  readonly extra: readonly number[];
  readonly token: number;
}

/**
 * Builds a ForwardBatch of one token per row, every row attending to its table row; prefix locs are read from the
 * request table and shifted by `locOffset`.
 */
export function buildRowBatch(rows: readonly RowSpec[], mem: CacheManager, locOffset: number, kvPool: ForwardBatch['kvPool']): ForwardBatch {
  const R = rows.length;
  let stride = 1;
  for (const r of rows) stride = Math.max(stride, r.prefixLen + r.extra.length);
  const table = new Int32Array(R * stride);
  const src = mem.reqToTokenPool.reqToToken;
  const srcStride = mem.reqToTokenPool.maxContextLen;
  const inputIds = new Int32Array(R);
  const positions = new Int32Array(R);
  const outCacheLoc = new Int32Array(R);
  const seqLens = new Int32Array(R);
  const prefixLens = new Int32Array(R);
  rows.forEach((r, i) => {
    const base = i * stride;
    const s = r.prefixRow * srcStride;
    for (let p = 0; p < r.prefixLen; p++) table[base + p] = src[s + p] + locOffset;
    r.extra.forEach((loc, j) => (table[base + r.prefixLen + j] = loc));
    const len = r.prefixLen + r.extra.length;
    inputIds[i] = r.token;
    positions[i] = len - 1;
    outCacheLoc[i] = r.extra[r.extra.length - 1];
    seqLens[i] = len;
    prefixLens[i] = len - 1;
  });
  const idx = Int32Array.from({ length: R }, (_, i) => i);
  return {
    forwardMode: 'decode', numReqs: R, numTokens: R, inputIds, positions, outCacheLoc, extendPrefixLens: prefixLens,
    extendSeqLens: new Int32Array(R).fill(1), seqLens, extendStartLoc: idx, reqPoolIndices: idx, reqToToken: table,
    reqToTokenStride: stride, logitRows: idx.slice(), kvPool,
  };
}

/**
 * Runs the draft extend of `items` in one forward (positions [from, to) of each request written to the draft pool at
 * its locs), then keeps each request's next draft input: the top-k of the last row (and EAGLE's output hidden state).
 * @returns nothing; sets req.specDraftLen = to, req.specTopIds / specTopP / specHidden
 */
export function runDraftExtend(draft: DraftModel, cfg: SpecConfig, items: readonly DraftExtendItem[], mem: CacheManager, valid: Uint8Array | null): void {
  const todo = items.filter((it) => it.to > it.from);
  if (todo.length === 0) return;
  const off = draft.locOffset;
  const B = todo.length;
  let T = 0;
  let stride = 1;
  for (const it of todo) {
    T += it.to - it.from;
    stride = Math.max(stride, it.to);
  }
  const src = mem.reqToTokenPool.reqToToken;
  const srcStride = mem.reqToTokenPool.maxContextLen;
  const table = new Int32Array(B * stride);
  const inputIds = new Int32Array(T);
  const positions = new Int32Array(T);
  const outCacheLoc = new Int32Array(T);
  const prefixLens = new Int32Array(B);
  const seqLensE = new Int32Array(B);
  const seqLens = new Int32Array(B);
  const startLoc = new Int32Array(B);
  const logitRows = new Int32Array(B);
  const D = draft.needsHidden ? (todo[0].hidden!.length / (todo[0].to - todo[0].from)) : 0;
  const hidden = draft.needsHidden ? new Float32Array(T * D) : null;
  let t = 0;
  todo.forEach((it, i) => {
    const s = it.req.reqPoolIdx * srcStride;
    for (let p = 0; p < it.to; p++) table[i * stride + p] = src[s + p] + off;
    const n = it.to - it.from;
    prefixLens[i] = it.from;
    seqLensE[i] = n;
    seqLens[i] = it.to;
    startLoc[i] = t;
    if (hidden) {
      assert(it.hidden !== null && it.hidden.length === n * D, () => `draft extend: ${it.req.rid} has no hidden rows for ${n} tokens`);
      hidden.set(it.hidden, t * D);
    }
    for (let j = 0; j < n; j++) {
      inputIds[t] = it.tokens[j];
      positions[t] = it.from + j;
      outCacheLoc[t] = src[s + it.from + j] + off;
      if (valid) valid[src[s + it.from + j]] = 1;
      t++;
    }
    logitRows[i] = t - 1;
  });
  const idx = Int32Array.from({ length: B }, (_, i) => i);
  const batch: ForwardBatch = {
    forwardMode: 'extend', numReqs: B, numTokens: T, inputIds, positions, outCacheLoc, extendPrefixLens: prefixLens,
    extendSeqLens: seqLensE, seqLens, extendStartLoc: startLoc, reqPoolIndices: idx, reqToToken: table,
    reqToTokenStride: stride, logitRows, kvPool: draft.kvPool,
  };
  const out = draft.forward(batch, hidden);
  const V = draft.vocabSize;
  todo.forEach((it, i) => {
    const { ids, probs } = topKProbs(out.logits.subarray(i * V, (i + 1) * V), cfg.topk);
    it.req.specTopIds = ids;
    it.req.specTopP = probs;
    it.req.specHidden = out.hidden ? out.hidden.slice(i * D, (i + 1) * D) : null;
    it.req.specDraftLen = it.to;
  });
}

/** A frontier node of one request's draft: its candidate, its forwarded ancestors' scratch locs, its hidden input. */
interface Frontier {
  readonly cand: number;
  readonly path: readonly number[];
  readonly hidden: Float32Array | null;
}

/**
 * Drafts `steps` levels for every request (serving-spec §4.2 step 1): level 0 from each request's kept top-k, then
 * steps − 1 draft forwards over the k frontier nodes of all requests at once (positions specDraftLen + level − 1),
 * each giving k children per node (k² candidates per level, cumulative scores), the best k becoming the frontier.
 * Draft-step KV goes to scratch slots of the draft pool (transient: reused next step).
 * @returns one candidate set per request
 */
export function runDraftLevels(draft: DraftModel, cfg: SpecConfig, reqs: readonly Req[], mem: CacheManager): DraftCandidates[] {
  const k = cfg.topk;
  const cands = reqs.map(() => new DraftCandidates());
  let frontiers: Frontier[][] = reqs.map((req, r) => {
    assert(req.specTopIds !== null && req.specTopP !== null, () => `speculative: ${req.rid} has no draft state`);
    const out: Frontier[] = [];
    for (let j = 0; j < req.specTopIds!.length; j++) out.push({ cand: cands[r].add(-1, req.specTopIds![j], req.specTopP![j]), path: [], hidden: req.specHidden });
    return out;
  });
  let nextScratch = 1;
  for (let level = 1; level < cfg.numSteps; level++) {
    const rows: RowSpec[] = [];
    const owners: { r: number; f: Frontier; loc: number }[] = [];
    frontiers.forEach((fs, r) => {
      for (const f of fs) {
        const loc = nextScratch++;
        assert(loc < draft.locOffset, 'speculative: draft scratch slots exhausted');
        rows.push({ prefixRow: reqs[r].reqPoolIdx, prefixLen: reqs[r].specDraftLen, extra: [...f.path, loc], token: cands[r].tokens[f.cand] });
        owners.push({ r, f, loc });
      }
    });
    if (rows.length === 0) break;
    const batch = buildRowBatch(rows, mem, draft.locOffset, draft.kvPool);
    let hidden: Float32Array | null = null;
    if (draft.needsHidden) {
      const H = owners[0].f.hidden!.length;
      hidden = new Float32Array(rows.length * H);
      owners.forEach((o, i) => hidden!.set(o.f.hidden!, i * H));
    }
    const out = draft.forward(batch, hidden);
    const V = draft.vocabSize;
    const H = out.hidden ? out.hidden.length / rows.length : 0;
    const children: { cand: number; parent: (typeof owners)[number]; hidden: Float32Array | null }[][] = reqs.map(() => []);
    owners.forEach((o, i) => {
      const { ids, probs } = topKProbs(out.logits.subarray(i * V, (i + 1) * V), k);
      const h = out.hidden ? out.hidden.slice(i * H, (i + 1) * H) : null;
      for (let j = 0; j < ids.length; j++) children[o.r].push({ cand: cands[o.r].add(o.f.cand, ids[j], probs[j]), parent: o, hidden: h });
    });
    frontiers = children.map((cs, r) => {
      const best = topKIndices(cs.map((c) => cands[r].scores[c.cand]), k);
      return best.map((b) => ({ cand: cs[b].cand, path: [...cs[b].parent.f.path, cs[b].parent.loc], hidden: cs[b].hidden }));
    });
  }
  return cands;
}

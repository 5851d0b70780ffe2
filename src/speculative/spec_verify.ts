// Verification of one request's draft tree against the target's logits (serving-spec §4.2 step 3; SGLang
// speculative/eagle_info.py verify, sgl_kernel tree_speculative_sampling_target_only / verify_tree_greedy).
// The walk runs token by token: at each node the target distribution is formed from the request's state *after* the
// tokens accepted so far (penalties, min_new_tokens, the grammar mask), so greedy output is exactly the output of
// plain decoding, and a stop (EOS, stop id, max_new_tokens, a terminated grammar) ends the walk at once (the later
// accepted tokens are dropped).
import { applyPenalties, applyVocabMask, logSoftmax, sampleRow, topLogprobsOf, type RowSamplingInfo } from '../sampling/index.js';
import type { DraftTree } from './spec_tree.js';

/** What the walk needs from the request it verifies (the scheduler's Req behind it). */
export interface VerifyHost {
  /** Sampling inputs for the next token, as of the tokens appended so far (grammar mask included). */
  info(): RowSamplingInfo;
  /**
   * Appends the token chosen at a node (with its logprob and top logprobs when the request returns them).
   * @returns true when the request finished with it
   */
  append(token: number, logprob: number, topLogprobs: [number, number][]): boolean;
}

/** Acceptance knobs (--speculative-accept-threshold-single / -acc; 1.0 each = exact target-only sampling). */
export interface AcceptThresholds {
  readonly single: number;
  readonly acc: number;
}

/** Outcome of one walk. */
export interface WalkResult {
  /** Nodes whose token position became part of the sequence, root first (their KV slots are kept). */
  readonly path: number[];
  /** Draft tokens accepted (appended tokens that matched a draft node). The walk appended path.length tokens. */
  readonly acceptedDrafts: number;
}

/**
 * Target probabilities of one row as the sampler draws them: penalties, grammar mask, softmax(logits / T), then the
 * top-k / top-p (`cumsum − p > topP` dropped) / min-p (`p < minP · pMax` dropped) filters, renormalized
 * (serving-spec §2.5, SGLang sampler.py). Also returns the unfiltered log-softmax of the scaled row (the logprobs the
 * sampler reports).
 * @param row [V] f32 logits (modified: scaled in place)
 * @returns probs [V] f64 summing to 1 (0 outside the kept set) and logprobs [V] f32
 */
export function targetDistribution(row: Float32Array, info: RowSamplingInfo): { probs: Float64Array; logprobs: Float32Array } {
  applyPenalties(row, info);
  if (info.vocabMask) applyVocabMask(row, info.vocabMask);
  const p = info.params;
  const V = row.length;
  const invT = 1 / p.temperature;
  for (let i = 0; i < V; i++) row[i] = Math.fround(row[i] * invT);
  const logprobs = new Float32Array(V);
  logSoftmax(row, logprobs);
  const probs = new Float64Array(V);
  let pMax = 0;
  for (let i = 0; i < V; i++) {
    probs[i] = Math.exp(logprobs[i]);
    if (probs[i] > pMax) pMax = probs[i];
  }
  if (p.topK < V || p.topP < 1 || p.minP > 0) {
    const order = Array.from({ length: V }, (_, i) => i).sort((a, b) => probs[b] - probs[a] || a - b);
    const keep = new Uint8Array(V);
    let cum = 0;
    for (let r = 0; r < V; r++) {
      const id = order[r];
      const q = probs[id];
      if (r >= p.topK) break;
      if (cum > p.topP && r > 0) break; // cumsum − p > topP
      if (p.minP > 0 && q < p.minP * pMax) break;
      keep[id] = 1;
      cum += q;
    }
    for (let i = 0; i < V; i++) if (!keep[i]) probs[i] = 0;
  }
  let sum = 0;
  for (let i = 0; i < V; i++) sum += probs[i];
  if (sum > 0) for (let i = 0; i < V; i++) probs[i] /= sum;
  return { probs, logprobs };
}

/** Multinomial draw from `weights` (need not sum to 1) with one uniform `u`; −1 when all weights are 0. */
function drawFrom(weights: Float64Array, u: number): number {
  let total = 0;
  for (let i = 0; i < weights.length; i++) total += weights[i];
  if (!(total > 0)) return -1;
  let acc = 0;
  const target = u * total;
  let last = -1;
  for (let i = 0; i < weights.length; i++) {
    if (weights[i] <= 0) continue;
    acc += weights[i];
    last = i;
    if (target < acc) return i;
  }
  return last;
}

/**
 * Walks the tree from the root (serving-spec §4.2 step 3). Greedy rows (top_k = 1): the token at node u is the
 * target's argmax there (sampleRow, as plain decoding); the child carrying it is accepted. Sampling rows: one uniform
 * coin per node; children are tried in sibling order with a running sum `acc` of their target probabilities, child c
 * accepted when `coin ≤ acc / thresholds.acc` or `p(c) ≥ thresholds.single`; otherwise the token is drawn from the
 * target distribution without the tried children, renormalized — with both thresholds 1 this emits exactly the target
 * distribution (SGLang tree_speculative_sampling_target_only; draft probabilities are not used).
 * @param rowOf logits row [V] of a node (a fresh copy or scratch: it is modified)
 * @returns the nodes kept (root first) and the number of accepted draft tokens
 */
export function walkDraftTree(tree: DraftTree, rowOf: (node: number) => Float32Array, host: VerifyHost, thresholds: AcceptThresholds): WalkResult {
  const path: number[] = [];
  let u = 0;
  for (;;) {
    path.push(u);
    const info = host.info();
    const row = rowOf(u);
    const kids = tree.children[u];
    let token: number;
    let logprob: number;
    let top: [number, number][];
    let next = -1;
    if (info.params.topK === 1) {
      const s = sampleRow(row, { ...info, needLogprob: true });
      token = s.tokenId;
      logprob = s.logprob;
      top = s.topLogprobs;
      next = kids.find((c) => tree.tokens[c] === token) ?? -1;
    } else {
      const { probs, logprobs } = targetDistribution(row, info);
      const coin = info.rng.nextFloat();
      let acc = 0;
      for (const c of kids) {
        const q = probs[tree.tokens[c]];
        acc += q;
        if (q > 0 && (coin <= acc / thresholds.acc || q >= thresholds.single)) {
          next = c;
          break;
        }
      }
      if (next >= 0) token = tree.tokens[next];
      else {
        const residual = probs.slice();
        for (const c of kids) residual[tree.tokens[c]] = 0;
        token = drawFrom(residual, info.rng.nextFloat());
        if (token < 0) token = drawFrom(probs, coin);
        if (token < 0) token = 0;
      }
      logprob = logprobs[token];
      top = info.topLogprobsNum > 0 ? topLogprobsOf(logprobs, info.topLogprobsNum) : [];
    }
    const finished = host.append(token, logprob, top);
    if (finished || next < 0) return { path, acceptedDrafts: path.length - 1 + (next >= 0 ? 1 : 0) };
    u = next;
  }
}

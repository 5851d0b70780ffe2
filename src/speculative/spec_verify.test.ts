// Unit tests of the draft tree and the verification walk on synthetic logits (no model): tree selection by cumulative
// score, greedy walk, and that target-only speculative sampling keeps the target distribution (chi-square over
// thousands of draws on an 8-token vocabulary), with the draft's token right, wrong, or one of several siblings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../common/index.js';
import { normalizeSamplingParams, type RowSamplingInfo, type SamplingParamsInput } from '../sampling/index.js';
import { buildDraftTree, DraftCandidates, pathTo, type DraftTree } from './spec_tree.js';
import { resolveSpecConfig } from './spec_config.js';
import { walkDraftTree, type VerifyHost } from './spec_verify.js';

const V = 8;
const P = [0.3, 0.05, 0.2, 0.1, 0.15, 0.05, 0.1, 0.05];
const LOGITS = Float32Array.from(P, (p) => Math.log(p));

function info(params: SamplingParamsInput, rng: Rng): RowSamplingInfo {
  return { params: normalizeSamplingParams(params, V), rng, outputCounts: new Map(), numOutputTokens: 0, stopTokenIds: [], topLogprobsNum: 0 };
}

/** Walks `tree` once with the same target row at every node; returns the emitted tokens. */
function walkOnce(tree: DraftTree, params: SamplingParamsInput, rng: Rng): number[] {
  const out: number[] = [];
  const host: VerifyHost = { info: () => info(params, rng), append: (t) => (out.push(t), false) };
  walkDraftTree(tree, () => LOGITS.slice(), host, { single: 1, acc: 1 });
  return out;
}

/** Pearson chi-square of counts against probabilities. */
function chiSquare(counts: number[], probs: readonly number[]): number {
  const n = counts.reduce((a, b) => a + b, 0);
  return counts.reduce((s, c, i) => s + (c - n * probs[i]) ** 2 / (n * probs[i]), 0);
}

// chi-square critical value, 7 degrees of freedom, p = 0.001
const CHI2_7_999 = 24.32;

test('tree: the num_draft_tokens − 1 best cumulative scores, parents before children, chain for topk 1', () => {
  const c = new DraftCandidates();
  const a = c.add(-1, 5, 0.6); // level 0
  const b = c.add(-1, 6, 0.3);
  c.add(a, 1, 0.9); // 0.54
  c.add(a, 2, 0.05); // 0.03
  c.add(b, 3, 0.5); // 0.15
  const t = buildDraftTree(9, c, 4);
  assert.deepEqual(Array.from(t.tokens), [9, 5, 6, 1]);
  assert.deepEqual(Array.from(t.parents), [-1, 0, 0, 1]);
  assert.deepEqual(Array.from(t.depths), [0, 1, 1, 2]);
  assert.deepEqual(t.children[0], [1, 2]);
  assert.deepEqual(pathTo(t, 3), [0, 1, 3]);
});

test('config: SGLang auto defaults (DeepSeek 3/1/4, others 5/4/8), topk 1 forces steps + 1, EAGLE3 refused, trees need page 1', () => {
  const f = { algorithm: 'NEXTN', numSteps: null, topk: null, numDraftTokens: null };
  assert.deepEqual(resolveSpecConfig(f, 'DeepseekV32ForCausalLM', 1), { algorithm: 'EAGLE', numSteps: 3, topk: 1, numDraftTokens: 4, acceptThresholdSingle: 1, acceptThresholdAcc: 1 });
  const o = resolveSpecConfig({ ...f, algorithm: 'STANDALONE' }, 'MiniMaxM2ForCausalLM', 1);
  assert.deepEqual([o.numSteps, o.topk, o.numDraftTokens], [5, 4, 8]);
  assert.equal(resolveSpecConfig({ algorithm: 'EAGLE', numSteps: 2, topk: 1, numDraftTokens: 9 }, 'DeepseekV32ForCausalLM', 1).numDraftTokens, 3);
  assert.throws(() => resolveSpecConfig({ ...f, algorithm: 'EAGLE3' }, 'DeepseekV32ForCausalLM', 1), /EAGLE3 is not built/);
  assert.throws(() => resolveSpecConfig({ algorithm: 'EAGLE', numSteps: 3, topk: 4, numDraftTokens: 8 }, 'DeepseekV32ForCausalLM', 16), /page_size 1/);
});

test('greedy walk: accepts the child carrying the target argmax, then the bonus token', () => {
  // root → [2, 0]; 0 → [0]; target argmax is 0 everywhere
  const t = buildDraftTree(7, (() => {
    const c = new DraftCandidates();
    const x = c.add(-1, 2, 0.5);
    const y = c.add(-1, 0, 0.4);
    c.add(y, 0, 0.9);
    void x;
    return c;
  })(), 4);
  const out = walkOnce(t, { temperature: 0 }, new Rng(1));
  assert.deepEqual(out, [0, 0, 0], 'two accepted drafts + the bonus');
});

test('speculative sampling keeps the target distribution: right, wrong and sibling drafts (chi-square, 20k draws each)', () => {
  const N = 20000;
  const chain = (tok: number): DraftTree => {
    const c = new DraftCandidates();
    c.add(-1, tok, 1);
    return buildDraftTree(3, c, 2);
  };
  const siblings = (() => {
    const c = new DraftCandidates();
    c.add(-1, 0, 0.5);
    c.add(-1, 4, 0.3);
    c.add(-1, 6, 0.2);
    return buildDraftTree(3, c, 4);
  })();
  for (const [name, tree] of [['likely draft', chain(0)], ['unlikely draft', chain(5)], ['three siblings', siblings]] as const) {
    const rng = new Rng(1234);
    const first = new Array<number>(V).fill(0);
    let accepted = 0;
    for (let i = 0; i < N; i++) {
      const out = walkOnce(tree, { temperature: 1 }, rng);
      first[out[0]]++;
      if (out.length > 1) accepted++;
    }
    const chi = chiSquare(first, P);
    assert.ok(chi < CHI2_7_999, `${name}: chi-square ${chi.toFixed(2)} ≥ ${CHI2_7_999} (counts ${first.join(',')})`);
    assert.ok(accepted > 0, `${name}: some drafts accepted`);
  }
  // A fixed seed reproduces the walk.
  assert.deepEqual(walkOnce(siblings, { temperature: 1 }, new Rng(7)), walkOnce(siblings, { temperature: 1 }, new Rng(7)));
});

test('speculative sampling with top-k: the emitted token follows the renormalized top-k distribution', () => {
  const N = 20000;
  const c = new DraftCandidates();
  c.add(-1, 5, 1); // outside the top 3: never accepted
  const tree = buildDraftTree(3, c, 2);
  const rng = new Rng(99);
  const counts = new Array<number>(V).fill(0);
  for (let i = 0; i < N; i++) counts[walkOnce(tree, { temperature: 1, topK: 3 }, rng)[0]]++;
  assert.equal(counts[5], 0);
  const top = [0, 2, 4];
  const z = top.reduce((s, i) => s + P[i], 0);
  const chi = chiSquare(top.map((i) => counts[i]), top.map((i) => P[i] / z));
  assert.ok(chi < 13.82, `chi-square ${chi.toFixed(2)} (2 dof, p = 0.001)`);
});

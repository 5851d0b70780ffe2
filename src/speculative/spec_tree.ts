// Draft tree of one request: the candidates recorded while drafting (level 0: the draft's top-k of the verified
// token; level i ≥ 1: the top-k children of each of the k frontier nodes, k² per level), the selection of the
// num_draft_tokens − 1 best cumulative scores and the tree handed to the verifier (serving-spec §4.2 steps 1–2;
// SGLang speculative/eagle_utils.py build_tree_kernel_efficient, eagle_worker.py draft_forward). Pure data: no model.

/** Candidates of one request's draft, in recording order (a parent is always recorded before its children). */
export class DraftCandidates {
  /** Token of each candidate. */
  readonly tokens: number[] = [];
  /** Cumulative score (product of draft probabilities along the path). */
  readonly scores: number[] = [];
  /** Parent candidate index, −1 for a level-0 candidate (child of the verified token). */
  readonly parents: number[] = [];

  /**
   * Records a candidate.
   * @param parent parent candidate index (−1: the root)
   * @param prob the draft probability of `token` given its parent
   * @returns its index
   */
  add(parent: number, token: number, prob: number): number {
    this.tokens.push(token);
    this.scores.push(parent < 0 ? prob : this.scores[parent] * prob);
    this.parents.push(parent);
    return this.tokens.length - 1;
  }

  /** Number of candidates. */
  get size(): number {
    return this.tokens.length;
  }
}

/**
 * The verified tree: node 0 is the root (the last verified token), nodes 1..n−1 the selected draft tokens in
 * recording order (parents before children). Children of a node are listed in node order (SGLang's
 * retrive_next_token / retrive_next_sibling walk order).
 */
export interface DraftTree {
  /** [n] token of each node. */
  readonly tokens: Int32Array;
  /** [n] parent node, −1 for the root. */
  readonly parents: Int32Array;
  /** [n] depth: 0 for the root. */
  readonly depths: Int32Array;
  /** children[u]: child nodes of u in sibling order. */
  readonly children: readonly (readonly number[])[];
}

/** The k best of `scores` (descending score, ties → lower index), as indices. */
export function topKIndices(scores: ArrayLike<number>, k: number): number[] {
  const idx = Array.from({ length: scores.length }, (_, i) => i);
  idx.sort((a, b) => scores[b] - scores[a] || a - b);
  return idx.slice(0, Math.min(k, idx.length));
}

/**
 * Builds the tree to verify: the `numDraftTokens − 1` candidates of highest cumulative score (ties → earlier
 * candidate), kept in recording order, under the root `rootToken`. A child's score never exceeds its parent's
 * (probabilities ≤ 1) and it is recorded later, so every selected node's parent is selected too.
 * @param numDraftTokens nodes of the tree including the root (≥ 1)
 * @throws Error if a selected node's parent was not selected (a caller bug)
 */
export function buildDraftTree(rootToken: number, cands: DraftCandidates, numDraftTokens: number): DraftTree {
  const chosen = topKIndices(cands.scores, numDraftTokens - 1).sort((a, b) => a - b);
  const n = chosen.length + 1;
  const tokens = new Int32Array(n);
  const parents = new Int32Array(n);
  const depths = new Int32Array(n);
  const children: number[][] = Array.from({ length: n }, () => []);
  const nodeOf = new Map<number, number>();
  tokens[0] = rootToken;
  parents[0] = -1;
  chosen.forEach((c, j) => {
    const node = j + 1;
    const pc = cands.parents[c];
    const parent = pc < 0 ? 0 : nodeOf.get(pc);
    if (parent === undefined) throw new Error(`buildDraftTree: candidate ${c} selected without its parent ${pc}`);
    nodeOf.set(c, node);
    tokens[node] = cands.tokens[c];
    parents[node] = parent;
    depths[node] = depths[parent] + 1;
    children[parent].push(node);
  });
  return { tokens, parents, depths, children };
}

/** Nodes from the root to `node` (inclusive), root first. */
export function pathTo(tree: DraftTree, node: number): number[] {
  const path: number[] = [];
  for (let u = node; u >= 0; u = tree.parents[u]) path.push(u);
  return path.reverse();
}

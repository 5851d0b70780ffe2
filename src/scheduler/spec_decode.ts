// Speculative decoding in the scheduler (serving-spec §4; SGLang speculative/eagle_worker.py forward_batch_generation):
// one decode step of the running requests becomes draft → tree → one target verify forward → walk → KV clean-up →
// draft extend. The verify is a decode with more rows (the scheduler header's seam): every tree node is one decode
// row whose req→token row is the request's prefix plus the KV slots of the node's ancestors, which is the tree
// attention mask (causal for a chain), and each row computes exactly what plain decoding computes at that position.
import { assert } from '../common/index.js';
import type { ModelRunner } from '../executor/index.js';
import { buildDraftTree, pathTo, walkDraftTree, type DraftModel, type DraftTree, type SpecConfig } from '../speculative/index.js';
import type { CacheManager } from './cache_manager.js';
import type { GrammarScheduling } from './grammar.js';
import type { ExtendItem } from './schedule_batch.js';
import type { Req } from './req.js';
import { buildRowBatch, runDraftExtend, runDraftLevels, type DraftExtendItem } from './spec_draft.js';

/** Counters of accept length (metrics; SGLang counts the bonus token: accepted drafts + 1 per verify). */
export interface SpecCounters {
  /** Request-verifies (one per request per verify step). */
  verifies: number;
  /** Tokens emitted by verifies (accepted drafts + the target's token). */
  emitted: number;
  /** Accepted draft tokens. */
  acceptedDrafts: number;
}

/** The speculative part of the scheduler: owns the draft model and the draft-side request state. */
export class SpecDecoder {
  /** Since start-up. */
  readonly total: SpecCounters = { verifies: 0, emitted: 0, acceptedDrafts: 0 };
  /** Since the last decode log line (reset by takeWindow). */
  private window: SpecCounters = { verifies: 0, emitted: 0, acceptedDrafts: 0 };
  /** STANDALONE: 1 where the draft pool holds the draft KV of the token the target loc holds (prefix hits reuse it). */
  private readonly valid: Uint8Array | null;

  /**
   * @param cfg resolved configuration
   * @param draft the draft model and its pool
   * @param targetMaxLocs the target pool's maxLocs
   */
  /**
   * PD prefill (disagg/draft_kv.ts): requests that get their draft extend although the step finished them (a PD
   * request's prefill ends with its first token; its draft KV and state go to the decode server). Null outside PD.
   */
  keepDraftOf: ((req: Req) => boolean) | null = null;

  constructor(readonly cfg: SpecConfig, readonly draft: DraftModel, targetMaxLocs: number) {
    this.valid = draft.algorithm === 'STANDALONE' ? new Uint8Array(targetMaxLocs) : null;
  }

  /** Tokens a running request may take in one step (the verify slots). */
  get tokensPerStep(): number {
    return this.cfg.numDraftTokens;
  }

  /** Average accept length since start-up (/get_server_info avg_spec_accept_length); 0 before any verify. */
  get avgAcceptLength(): number {
    return this.total.verifies > 0 ? this.total.emitted / this.total.verifies : 0;
  }

  /** Counters since the last call (the decode log line's accept len / accept rate), then resets them. */
  takeWindow(): SpecCounters {
    const w = this.window;
    this.window = { verifies: 0, emitted: 0, acceptedDrafts: 0 };
    return w;
  }

  /**
   * A request admitted on a prefix of `prefixLen` cached tokens: EAGLE trusts the draft KV the cache holds (it has
   * no target hidden states for them); STANDALONE reuses the longest run of it that is valid.
   */
  onAdmit(req: Req, mem: CacheManager, prefixLen: number): void {
    req.specTopIds = null;
    req.specTopP = null;
    req.specHidden = null;
    let n = prefixLen;
    if (this.valid) {
      const row = mem.reqToTokenPool.read(req.reqPoolIdx, 0, prefixLen);
      n = 0;
      while (n < prefixLen && this.valid[row[n]] === 1) n++;
    }
    req.specDraftLen = n;
  }

  /**
   * After a target extend (a prefill chunk): the draft extend over the chunk's positions (serving-spec §4.2 "prefill
   * seeds the draft"). EAGLE pairs position i with S[i+1] and the target hidden state h_i (the request's last
   * position pairs with the token just sampled); STANDALONE reads S[i].
   * @param hidden [numExtendTokens, hiddenSize] f32 target hidden states of the extend rows in item order (EAGLE)
   */
  afterExtend(items: readonly ExtendItem[], hidden: Float32Array | undefined, mem: CacheManager): void {
    const out: DraftExtendItem[] = [];
    let row = 0;
    const H = this.draft.needsHidden && hidden && items.length > 0 ? hidden.length / items.reduce((s, it) => s + it.n, 0) : 0;
    for (const it of items) {
      const req = it.req;
      const a = req.kvCommittedLen - it.n; // first position computed this step
      const b = req.kvCommittedLen;
      if (!req.isFinished || this.keepDraftOf?.(req)) {
        const fill = req.fillIds();
        if (this.draft.needsHidden) {
          assert(hidden !== undefined, 'speculative: the target returned no hidden states for the draft');
          const from = Math.max(a, req.specDraftLen);
          if (b < fill.length) out.push({ req, from, to: b, tokens: fill.slice(from + 1, b + 1), hidden: hidden.subarray((row + from - a) * H, (row + b - a) * H) });
        } else {
          out.push({ req, from: req.specDraftLen, to: b, tokens: fill.slice(req.specDraftLen, b), hidden: null });
        }
      }
      row += it.n;
    }
    runDraftExtend(this.draft, this.cfg, out, mem, this.valid);
  }

  /**
   * One speculative decode step of `reqs` (serving-spec §4.2): allocates each request's verify slots, drafts, verifies
   * in one target forward, walks each tree appending the emitted tokens (stop rules after each), keeps the KV of the
   * visited nodes and frees the rest, then runs the draft extend over the emitted tokens (EAGLE).
   * @throws InternalError when memory the scheduler checked is missing
   */
  decodeStep(reqs: readonly Req[], mem: CacheManager, runner: ModelRunner, grammar: GrammarScheduling | null, onToken: (req: Req, token: number) => void): void {
    const rowLen = mem.reqToTokenPool.maxContextLen;
    // 1. verify slots: node j of a request's tree writes its KV at slot j (positions N−1 … of its row)
    const sizes = reqs.map((r) => Math.max(1, Math.min(this.cfg.numDraftTokens, r.maxNewTokens - r.outputIds.length, rowLen - r.kvCommittedLen)));
    const slots = reqs.map((r, i) => {
      const locs = mem.allocTokens(r, sizes[i]);
      assert(locs, () => `speculative: verify allocation failed for ${r.rid}`);
      if (this.valid) for (const l of locs) this.valid[l] = 0;
      return locs;
    });
    // 2. STANDALONE: bring the draft up to the verified token (its KV slot now exists)
    if (!this.draft.needsHidden) {
      runDraftExtend(this.draft, this.cfg, reqs.map((r) => {
        const fill = r.fillIds();
        return { req: r, from: r.specDraftLen, to: r.seqLen, tokens: fill.slice(r.specDraftLen, r.seqLen), hidden: null };
      }), mem, this.valid);
    }
    // 3. draft levels and trees
    const cands = runDraftLevels(this.draft, this.cfg, reqs, mem);
    const trees: DraftTree[] = reqs.map((r, i) => buildDraftTree(r.outputIds[r.outputIds.length - 1], cands[i], sizes[i]));
    // 4. verify: one decode row per node
    const rows = reqs.flatMap((r, i) => {
      const t = trees[i];
      const base = r.kvCommittedLen;
      return Array.from(t.tokens, (token, j) => ({ prefixRow: r.reqPoolIdx, prefixLen: base, extra: pathTo(t, j).map((u) => slots[i][u]), token }));
    });
    const batch = buildRowBatch(rows, mem, 0, runner.kvPool);
    const out = runner.forwardRaw(this.draft.needsHidden ? { ...batch, captureAllHidden: true } : batch);
    const V = runner.vocabSize;
    const H = out.allHiddenStates ? out.allHiddenStates.length / rows.length : 0;
    // 5. walk, KV clean-up, draft extend inputs
    const extend: DraftExtendItem[] = [];
    let first = 0;
    reqs.forEach((req, i) => {
      const tree = trees[i];
      const base = req.kvCommittedLen; // = N − 1: the root's position
      const before = req.outputIds.length;
      const res = walkDraftTree(tree, (u) => out.logits.slice((first + u) * V, (first + u + 1) * V), {
        info: () => {
          if (req.grammar && grammar) req.vocabMask = grammar.mask(req.rid);
          return req.samplingInfo();
        },
        append: (token, logprob, top) => {
          onToken(req, token);
          if (req.returnLogprob) {
            req.outputTokenLogprobs.push([logprob, token]);
            req.outputTopLogprobs.push(top);
          }
          return req.isFinished;
        },
      }, { single: this.cfg.acceptThresholdSingle, acc: this.cfg.acceptThresholdAcc });
      req.vocabMask = null;
      this.keepPath(req, mem, slots[i], res.path, base);
      const m = res.path.length;
      req.specVerifyCt++;
      req.specAcceptedTokens += res.acceptedDrafts;
      for (const c of [this.total, this.window]) {
        c.verifies++;
        c.emitted += req.outputIds.length - before;
        c.acceptedDrafts += res.acceptedDrafts;
      }
      if (this.draft.needsHidden && !req.isFinished) {
        const hidden = new Float32Array(m * H);
        res.path.forEach((u, j) => hidden.set(out.allHiddenStates!.subarray((first + u) * H, (first + u + 1) * H), j * H));
        const from = Math.max(req.specDraftLen, base);
        extend.push({ req, from, to: base + m, tokens: req.outputIds.slice(before + from - base, before + m), hidden: hidden.subarray((from - base) * H) });
      }
      first += tree.tokens.length;
    });
    // 6. EAGLE: draft extend over the emitted tokens with the target hidden states (next step's level 0)
    if (this.draft.needsHidden) runDraftExtend(this.draft, this.cfg, extend, mem, null);
  }

  /**
   * Keeps the KV of the walked nodes at positions base … base + path.length − 1 of the request's row and frees the
   * other verify slots: page_size 1 rewrites the row with the kept slots; paged (chains only) keeps the prefix of
   * slots in place and frees only pages no kept token touches (serving-spec §4.2 KV clean-up).
   */
  private keepPath(req: Req, mem: CacheManager, slots: Int32Array, path: readonly number[], base: number): void {
    const P = mem.allocator.pageSize;
    const m = path.length;
    if (P === 1) {
      const kept = new Set(path);
      mem.reqToTokenPool.write(req.reqPoolIdx, base, path.map((u) => slots[u]));
      const free: number[] = [];
      for (let j = 0; j < slots.length; j++) if (!kept.has(j)) free.push(slots[j]);
      if (free.length > 0) mem.allocator.free(free);
    } else {
      path.forEach((u, j) => assert(u === j, 'speculative: a paged tree walk left the chain'));
      const free: number[] = [];
      for (let j = m; j < slots.length; j++) if ((base + j) % P === 0) free.push(slots[j]);
      if (free.length > 0) mem.allocator.free(free);
    }
    req.kvCommittedLen = base + m;
    req.kvAllocatedLen = base + m;
  }
}

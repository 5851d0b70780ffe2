// Scheduler: continuous batching over one model (SGLang managers/scheduler.py event_loop_normal,
// get_next_batch_to_run, update_running_batch, process_batch_result). step() is synchronous:
//   schedule (prefill first, else decode with retraction) → ForwardBatch → ModelRunner (forward + sample) → postprocess.
// Owns the queues and is the single owner of KV / radix state (through CacheManager); never sees text.
//
// Seams for what comes next (layout-and-style.md §2.4), none of which needs a rewrite:
// - speculative decoding (built: spec_decode.ts, spec_draft.ts): a verify step is a decode with a row per draft-tree node;
//   the walk appends the accepted tokens one by one through appendSampled (each applies the stop rules and the
//   grammar) and frees the rejected slots' locs; prefill steps seed the draft (SpecDecoder.afterExtend).
// - PD disaggregation: a prefill-only loop calls step() with decode disabled and hands finished prefills' KV pages to a
//   sender; a decode-only loop admits prebuilt requests through CacheManager.admit + allocTokens and never prefills.
// - TP/DP ranks: ModelRunner is the only thing that touches the model; a TP runner fans the same ForwardBatch out to
//   worker threads and reduces, the scheduler is unchanged; DP runs one Scheduler per rank.
import { assert, InvalidRequestError, pyListRepr, TsglangError } from '../common/index.js';
import type { ForwardMode } from '../layers/index.js';
import type { ModelRunner } from '../executor/index.js';
import type { MatchResult } from '../mem_cache/index.js';
import { CacheManager } from './cache_manager.js';
import { buildForwardBatch } from './forward_batch_builder.js';
import type { FinishReasonData, ReqTokenOutput, TokenizedReq } from './io.js';
import { Req } from './req.js';
import { GRAMMAR_BACKEND_NONE_MESSAGE, GRAMMAR_TIMEOUT_MS, type GrammarScheduling } from './grammar.js';
import { lowerScheduleBatch } from './schedule_batch.js';
import type { ExtendItem, ScheduleBatch } from './schedule_batch.js';
import { CLIP_MAX_NEW_TOKENS_ESTIMATION, PrefillAdder, sortWaitingQueue, type SchedulePolicy } from './schedule_policy.js';
import type { SpecDecoder } from './spec_decode.js';

/** The scheduler's configuration slice. */
export interface SchedulerConfig {
  readonly pageSize: number;
  readonly maxRunningRequests: number;
  readonly maxPrefillTokens: number;
  /** null = chunked prefill disabled. */
  readonly chunkedPrefillSize: number | null;
  readonly schedulePolicy: SchedulePolicy;
  readonly scheduleConservativeness: number;
  readonly enableMixedChunk: boolean;
  readonly contextLength: number;
  /** KV pool token capacity. */
  readonly maxTotalNumTokens: number;
  readonly eosTokenIds: readonly number[];
  /** Keep every StepStats in `statsHistory` (tests). */
  readonly recordStats?: boolean;
}

/** What one step did (asserted by tests; feeds metrics). */
export interface StepStats {
  readonly step: number;
  readonly forwardMode: ForwardMode;
  /** Requests in the forward. */
  readonly numReqs: number;
  readonly numExtendReqs: number;
  readonly numDecodeReqs: number;
  /** Token rows of extend entries. */
  readonly numExtendTokens: number;
  /** Prefix-cache hits (tokens) of requests admitted this step. */
  readonly numCachedTokens: number;
  /** True when a prefill chunk ran that is not its request's last. */
  readonly hasUnfinishedChunk: boolean;
  /** Requests retracted this step. */
  readonly numRetracted: number;
  readonly numFinished: number;
  /** Running (decode) requests before the step. */
  readonly numRunningBefore: number;
  /** Running (decode) requests after the step. */
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly availableTokens: number;
  readonly evictableTokens: number;
  readonly newTokenRatio: number;
}

/** A step that threw, and what the scheduler did about it (see Scheduler.step). */
export interface StepFailure {
  /** What the step threw. */
  readonly error: Error;
  /** Requests finished with an abort because of it (their outputs are in StepResult.outputs). */
  readonly failedRids: readonly string[];
  /** Requests of the failed batch put back in the waiting queue, to be run alone. */
  readonly retriedRids: readonly string[];
}

/** Result of one step. */
export interface StepResult {
  /** null when there was nothing to run (or the step failed). */
  readonly stats: StepStats | null;
  /** Token outputs (also those of aborts since the last step). */
  readonly outputs: ReqTokenOutput[];
  /** Set when the step threw; the scheduler has recovered (every request is running, queued or finished). */
  readonly failure?: StepFailure;
}

/**
 * SGLang's check that a prompt's ids lie inside the model's vocabulary (tokenizer_manager.py
 * `_validate_input_ids_in_vocab`, same message; the list is printed as Python prints it).
 * @throws InvalidRequestError when an id is ≥ vocabSize
 */
export function validateInputIdsInVocab(ids: readonly number[], vocabSize: number): void {
  for (const id of ids) {
    if (id >= vocabSize) {
      throw new InvalidRequestError(`The input_ids ${pyListRepr(ids)} contains values greater than the vocab size (${vocabSize}).`, null);
    }
  }
}

const RETRACT_DECODE_STEPS = 20;
const MAX_NEW_TOKENS_UNSET = 1 << 30;
/** A request that was part of this many failed steps is failed even when the failure could not be pinned on it. */
const MAX_FAILED_STEPS = 2;

/** Continuous-batching scheduler. Single owner of KV and radix state. */
export class Scheduler {
  readonly cfg: SchedulerConfig;
  readonly runner: ModelRunner;
  readonly mem: CacheManager;
  readonly waiting: Req[] = [];
  readonly running: Req[] = [];
  /** Requests whose grammar is compiling (SGLang grammar_queue; sglang:num_grammar_queue_reqs). */
  readonly grammarQueue: Req[] = [];
  /** The grammar backend; null = --grammar-backend none (constrained requests are refused). */
  readonly grammar: GrammarScheduling | null;
  /** Speculative decoding (null = off): decode steps verify draft trees (scheduler/spec_decode.ts). */
  readonly spec: SpecDecoder | null;
  /** Longest wait in the grammar queue before the request fails, ms. */
  grammarTimeoutMs = GRAMMAR_TIMEOUT_MS;
  chunkedReq: Req | null = null;
  readonly statsHistory: StepStats[] = [];
  newTokenRatio: number;
  readonly initNewTokenRatio: number;
  readonly minNewTokenRatio: number;
  readonly newTokenRatioDecay: number;
  private stepCount = 0;
  private pendingOutputs: ReqTokenOutput[] = [];
  /** Every request queued, running or being scheduled, by rid (until its finish). */
  private readonly live = new Map<string, Req>();
  /** The requests of the step in progress once its batch is chosen (null before). */
  private stepReqs: readonly Req[] | null = null;
  /** Cumulative counters (metrics). */
  totalRetracted = 0;
  totalPromptTokens = 0;
  totalCachedTokens = 0;
  totalGeneratedTokens = 0;
  /** Wall time, ms, from step start to the model call (scheduling, KV allocation, batch lowering and building); statistics only. */
  scheduleTimeMs = 0;
  /** Wall time, ms, after the model call (KV commit, token append, stop rules, outputs); statistics only. */
  postprocessTimeMs = 0;

  /**
   * @param cfg scheduling slice
   * @param runner model + KV pool
   * @param mem request table, allocator and prefix cache
   * @param grammar the grammar backend (null: constrained requests are refused)
   * @param spec speculative decoding (null = off)
   */
  constructor(cfg: SchedulerConfig, runner: ModelRunner, mem: CacheManager, grammar: GrammarScheduling | null = null, spec: SpecDecoder | null = null) {
    this.cfg = cfg;
    this.spec = spec;
    this.grammar = grammar;
    this.runner = runner;
    this.mem = mem;
    // SGLang envs: SGLANG_INIT_NEW_TOKEN_RATIO 0.7, min factor 0.14, decay steps 600.
    this.initNewTokenRatio = Math.min(0.7 * cfg.scheduleConservativeness, 1);
    this.minNewTokenRatio = this.initNewTokenRatio * 0.14;
    this.newTokenRatioDecay = (this.initNewTokenRatio - this.minNewTokenRatio) / 600;
    this.newTokenRatio = this.initNewTokenRatio;
  }

  /**
   * PD seams (disagg/): `prefillFinished` sees a finished request's KV before it is cached or freed (the prefill
   * loop copies it out for the transfer); `prebuilt` takes every new request off the waiting queue (the decode loop
   * fills its KV by transfer and hands it back through installPrebuilt / failPrebuilt). Both null outside PD.
   */
  prefillFinished: ((req: Req) => void) | null = null;
  prebuilt: { onAdmit(req: Req): void } | null = null;

  /**
   * PD decode: a request whose prompt KV arrived (rows committed, first token appended) joins the running batch —
   * SGLang's prebuilt extend, no forward — or finishes at once when the first token ended it. Emits its output.
   */
  installPrebuilt(req: Req): void {
    if (req.isFinished) {
      this.live.delete(req.rid);
      this.mem.releaseFinished(req);
    } else this.running.push(req);
    this.pendingOutputs.push(req.takeOutput());
  }

  /** PD decode: a request whose transfer failed or was aborted finishes with `reason`, its KV freed uncached. */
  failPrebuilt(req: Req, reason: FinishReasonData): void {
    this.live.delete(req.rid);
    this.mem.releaseRetracted(req);
    req.finishReason = reason;
    this.pendingOutputs.push(req.takeOutput());
  }

  /** Longest sequence (prompt + output) a request may reach: min(contextLength, capacity) − 1 (SGLang max_req_len). */
  get maxReqLen(): number {
    return Math.min(this.cfg.contextLength - 1, this.cfg.maxTotalNumTokens - 1);
  }

  /** Longest prompt accepted (SGLang max_req_input_len = max_req_len − 5). */
  get maxReqInputLen(): number {
    return this.maxReqLen - 5;
  }

  /**
   * Queues a tokenized request. max_new_tokens is clamped to max_req_len − input − 1 (SGLang).
   * @throws InvalidRequestError for an empty or over-long prompt, an id outside the vocabulary, or a duplicate rid
   */
  addRequest(t: TokenizedReq): void {
    const inLen = t.inputIds.length;
    if (inLen === 0) throw new InvalidRequestError('The input is empty.', 'input_ids');
    for (const id of t.inputIds) {
      if (!Number.isInteger(id) || id < 0) throw new InvalidRequestError(`input_ids must be integers in [0, ${this.runner.vocabSize - 1}], got ${String(id)}.`, 'input_ids');
    }
    validateInputIdsInVocab(t.inputIds, this.runner.vocabSize);
    if (inLen > this.maxReqInputLen) {
      throw new InvalidRequestError(
        `Input length (${inLen} tokens) exceeds the maximum allowed length (${this.maxReqInputLen} tokens). Use a shorter input or enable --allow-auto-truncate.`,
        'input_ids',
      );
    }
    if (this.findReq(t.rid)) throw new InvalidRequestError(`Duplicate request id ${t.rid}.`, 'rid');
    const maxNew = Math.max(0, Math.min(t.params.maxNewTokens ?? MAX_NEW_TOKENS_UNSET, this.maxReqLen - inLen - 1));
    if (t.params.grammar && !this.grammar) throw new InvalidRequestError(GRAMMAR_BACKEND_NONE_MESSAGE, null);
    const req = new Req(t, maxNew, this.cfg.eosTokenIds);
    if (this.spec) req.specNumDraftTokens = this.spec.cfg.numDraftTokens;
    if (this.prebuilt) {
      // PD decode (disagg/decode_loop.ts): the request waits for its transferred KV instead of the waiting queue
      this.live.set(req.rid, req);
      this.totalPromptTokens += inLen;
      this.prebuilt.onAdmit(req);
      return;
    }
    if (req.grammar && this.grammar) {
      this.grammar.open(req.rid, req.grammar, req.requireReasoning);
      req.grammarQueuedAtMs = performance.now();
      this.grammarQueue.push(req);
    } else this.waiting.push(req);
    this.live.set(req.rid, req);
    this.totalPromptTokens += inLen;
  }

  /** True while anything is queued or running. */
  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0 || this.chunkedReq !== null || this.pendingOutputs.length > 0 || this.grammarQueue.length > 0;
  }

  private findReq(rid: string): Req | undefined {
    return this.live.get(rid);
  }

  /**
   * Finishes a request now (abort, or a stop string matched by the detokenizer), releasing its KV. Call between steps.
   * @returns false for an unknown or already finished rid
   */
  finishReq(rid: string, reason: FinishReasonData): boolean {
    const req = this.findReq(rid);
    if (!req || req.isFinished) return false;
    req.finishReason = reason;
    const gi = this.grammarQueue.indexOf(req);
    if (gi >= 0) this.grammarQueue.splice(gi, 1);
    if (req.grammar) this.grammar?.close(rid);
    const wi = this.waiting.indexOf(req);
    if (wi >= 0) this.waiting.splice(wi, 1);
    const ri = this.running.indexOf(req);
    if (ri >= 0) this.running.splice(ri, 1);
    if (this.chunkedReq === req) this.chunkedReq = null;
    this.live.delete(rid);
    this.mem.releaseFinished(req);
    if (reason.type === 'abort') this.pendingOutputs.push(req.takeOutput());
    return true;
  }

  /** Aborts one request (SGLang AbortReq). */
  abort(rid: string, message = 'Abort in waiting queue'): boolean {
    const req = this.findReq(rid);
    const msg = req && (this.waiting.includes(req) || this.grammarQueue.includes(req)) ? message : 'Abort in running';
    return this.finishReq(rid, { type: 'abort', message: msg });
  }

  /**
   * Aborts every request (SGLang AbortReq abort_all), each with `reason` when given (e.g. the engine's fatal error,
   * status 500) or the queue's usual abort message.
   */
  abortAll(reason?: FinishReasonData): void {
    for (const r of [...this.grammarQueue, ...this.waiting, ...this.running, ...(this.chunkedReq ? [this.chunkedReq] : [])]) {
      if (reason) this.finishReq(r.rid, reason);
      else this.abort(r.rid);
    }
  }

  /**
   * Empties the prefix cache (SGLang flush_cache). Refused while requests are queued or running.
   * @returns true if flushed
   */
  flushCache(): boolean {
    if (this.waiting.length > 0 || this.running.length > 0 || this.chunkedReq) return false;
    this.mem.cache.reset();
    assert(this.mem.allocator.availableSize() === this.mem.allocator.size, () => `flushCache: ${this.mem.allocator.size - this.mem.allocator.availableSize()} KV tokens leaked`);
    this.newTokenRatio = this.initNewTokenRatio;
    return true;
  }

  /**
   * One scheduling step: runs at most one forward. Synchronous. A step that throws (a model or scheduler error) is
   * recovered here, never left half done: its requests are failed or put back (see recoverFromFailedStep), so none
   * is lost and the others carry on; the result's `failure` says what happened.
   */
  step(): StepResult {
    const outputs = this.pendingOutputs;
    this.pendingOutputs = [];
    this.stepReqs = null;
    try {
      return this.runStep(outputs);
    } catch (e) {
      return this.recoverFromFailedStep(e instanceof Error ? e : new Error(String(e)), outputs);
    } finally {
      this.stepReqs = null;
    }
  }

  private runStep(outputs: ReqTokenOutput[]): StepResult {
    const tStart = performance.now();
    const numRunningBefore = this.running.length;
    let cachedThisStep = 0;
    let numRetracted = 0;
    let extends_: readonly ExtendItem[] = [];
    let decodes: readonly Req[] = [];
    if (this.grammarQueue.length > 0) this.pollGrammarQueue(outputs);
    if (this.grammar) this.failBrokenGrammars(outputs);

    const prefill = this.schedulePrefill();
    if (prefill) {
      extends_ = prefill.extendItems;
      decodes = prefill.decodeReqs;
      cachedThisStep = prefill.numCachedTokens;
    } else if (this.running.length > 0) {
      numRetracted = this.prepareDecode();
      // A request under suspicion (Req.isolate) decodes alone.
      const suspect = this.running.find((r) => r.isolate);
      // A constrained row whose mask is not back while the grammar worker compiles sits this step out (never stalls the others).
      decodes = suspect ? [suspect] : this.grammar ? this.running.filter((r) => !r.grammar || this.grammar!.canSampleNow(r.rid)) : [...this.running];
      if (decodes.length === 0) return { stats: null, outputs };
    } else {
      return { stats: null, outputs };
    }
    this.stepReqs = [...extends_.map((it) => it.req), ...decodes];
    if (this.spec && extends_.length === 0) return this.runSpecDecode(decodes, outputs, tStart, numRunningBefore, numRetracted);

    // Allocate one KV slot for each decode (checked to fit).
    const decodeLocs = decodes.map((req) => {
      const locs = this.mem.allocTokens(req, 1);
      assert(locs, () => `decode allocation failed for ${req.rid}`);
      return locs;
    });

    // Grammar masks of the rows sampled this step (an extend is sampled when it completes its prompt).
    if (this.grammar) {
      for (const it of extends_) if (it.req.grammar) it.req.vocabMask = it.n === it.req.seqLen - it.req.kvCommittedLen ? this.grammar.mask(it.req.rid) : null;
      for (const req of decodes) if (req.grammar) req.vocabMask = this.grammar.mask(req.rid);
    }

    // Lower to a ForwardBatch (EAGLE: the target's hidden states seed the draft).
    const { entries, sample, score, sampled, scoreOwners, numExtendTokens } = lowerScheduleBatch(extends_, decodes, decodeLocs);
    const built = buildForwardBatch(entries, this.mem.reqToTokenPool.reqToToken, this.mem.reqToTokenPool.maxContextLen, this.runner.kvPool);
    const batch = this.spec?.draft.needsHidden ? { ...built, captureAllHidden: true } : built;
    const tRun = performance.now();
    this.scheduleTimeMs += tRun - tStart;
    const result = this.runner.run(batch, sample, score);
    const tPost = performance.now();

    // Postprocess: commit KV, record logprobs, append tokens, finish.
    result.scores.forEach((s, i) => {
      const { req, pos } = scoreOwners[i];
      req.inputTokenLogprobs!.push([s.logprob, req.originInputIds[pos + 1]]);
      req.inputTopLogprobs!.push(s.topLogprobs);
    });
    let hasUnfinishedChunk = false;
    const touched: Req[] = [];
    for (const it of extends_) {
      const req = it.req;
      req.kvCommittedLen += it.n;
      if (req.kvCommittedLen < req.seqLen) {
        req.isChunked = true;
        this.chunkedReq = req;
        hasUnfinishedChunk = true;
        this.mem.cacheUnfinished(req);
      } else {
        req.isChunked = false;
        if (this.chunkedReq === req) this.chunkedReq = null;
        if (req.maxNewTokens === 0) req.finishReason = { type: 'length', length: 0 };
        touched.push(req);
      }
    }
    for (const req of decodes) {
      req.kvCommittedLen += 1;
      touched.push(req);
    }
    result.samples.forEach((s, i) => {
      const req = sampled[i];
      this.appendSampled(req, s.tokenId);
      if (req.returnLogprob) {
        req.outputTokenLogprobs.push([s.logprob, s.tokenId]);
        req.outputTopLogprobs.push(s.topLogprobs);
      }
    });
    if (this.spec) this.spec.afterExtend(extends_, result.allHiddenStates, this.mem);
    // A suspect that ran a decode step alone has shown it runs: it is scheduled with the others again.
    if (decodes.length === 1 && extends_.length === 0) decodes[0].isolate = false;
    const numFinished = this.settle(touched, outputs);
    const stats = this.stepStats(batch.forwardMode, entries.length, extends_.length, decodes.length, numExtendTokens, cachedThisStep, hasUnfinishedChunk, numRetracted, numFinished, numRunningBefore);
    this.postprocessTimeMs += performance.now() - tPost;
    return { stats, outputs };
  }

  /** Appends a sampled token: stop rules, the grammar (SGLang check_finished: a terminated grammar finishes the request, also with ignore_eos). */
  private appendSampled(req: Req, tokenId: number): void {
    req.appendToken(tokenId);
    if (req.grammar && this.grammar) {
      req.vocabMask = null;
      if (this.grammar.accept(req.rid, tokenId) && !req.finishReason) req.finishReason = { type: 'stop', matched: tokenId };
    }
    this.totalGeneratedTokens++;
  }

  /** A speculative decode step of `decodes` (scheduler/spec_decode.ts); the same finish and output handling as a decode. */
  private runSpecDecode(decodes: readonly Req[], outputs: ReqTokenOutput[], tStart: number, numRunningBefore: number, numRetracted: number): StepResult {
    const tRun = performance.now();
    this.scheduleTimeMs += tRun - tStart;
    this.spec!.decodeStep(decodes, this.mem, this.runner, this.grammar, (req, token) => this.appendSampled(req, token));
    const tPost = performance.now();
    if (decodes.length === 1) decodes[0].isolate = false;
    const numFinished = this.settle(decodes, outputs);
    const stats = this.stepStats('decode', decodes.length, 0, decodes.length, 0, 0, false, numRetracted, numFinished, numRunningBefore);
    this.postprocessTimeMs += performance.now() - tPost;
    return { stats, outputs };
  }

  /** Finished requests release their KV (to the prefix cache); the others (re)join the running batch. @returns finished count */
  private settle(touched: readonly Req[], outputs: ReqTokenOutput[]): number {
    let numFinished = 0;
    for (const req of touched) {
      if (req.isFinished) {
        numFinished++;
        const ri = this.running.indexOf(req);
        if (ri >= 0) this.running.splice(ri, 1);
        this.live.delete(req.rid);
        if (req.grammar) this.grammar?.close(req.rid);
        this.prefillFinished?.(req);
        this.mem.releaseFinished(req);
      } else if (!this.running.includes(req)) {
        this.running.push(req);
      }
      outputs.push(req.takeOutput());
    }
    return numFinished;
  }

  private stepStats(
    forwardMode: ForwardMode, numReqs: number, numExtendReqs: number, numDecodeReqs: number, numExtendTokens: number, numCachedTokens: number,
    hasUnfinishedChunk: boolean, numRetracted: number, numFinished: number, numRunningBefore: number,
  ): StepStats {
    const stats: StepStats = {
      step: this.stepCount++, forwardMode, numReqs, numExtendReqs, numDecodeReqs, numExtendTokens, numCachedTokens, hasUnfinishedChunk,
      numRetracted, numFinished, numRunningBefore,
      numRunning: this.running.length,
      numWaiting: this.waiting.length,
      availableTokens: this.mem.allocator.availableSize(),
      evictableTokens: this.mem.cache.evictableSize(),
      newTokenRatio: this.newTokenRatio,
    };
    if (this.cfg.recordStats) this.statsHistory.push(stats);
    return stats;
  }

  /**
   * Moves requests whose grammar compiled from the grammar queue to the waiting queue (SGLang
   * GrammarManager.get_ready_grammar_requests); those whose grammar is invalid or timed out finish with an abort,
   * status 400, SGLang's messages ("Failed to compile {kind} grammar: {reason}", "Grammar preprocessing timed out").
   */
  private pollGrammarQueue(outputs: ReqTokenOutput[]): void {
    const g = this.grammar!;
    const now = performance.now();
    for (const req of [...this.grammarQueue]) {
      const phase = g.phase(req.rid);
      let fail: string | null = null;
      if (phase === 'ready') {
        this.grammarQueue.splice(this.grammarQueue.indexOf(req), 1);
        this.waiting.push(req);
        continue;
      }
      if (phase === 'failed' || phase === null) fail = `Failed to compile ${req.grammar!.kind} grammar: ${g.error(req.rid)?.message ?? 'unknown error'}`;
      else if (now - req.grammarQueuedAtMs > this.grammarTimeoutMs) fail = `Grammar preprocessing timed out: grammar_key=('${req.grammar!.kind}', ...)`;
      if (fail === null) continue;
      this.grammarQueue.splice(this.grammarQueue.indexOf(req), 1);
      this.live.delete(req.rid);
      g.close(req.rid);
      req.finishReason = { type: 'abort', message: fail, statusCode: 400, errType: 'BadRequestError' };
      outputs.push(req.takeOutput());
    }
  }

  /** Running or waiting constrained requests whose matcher failed (worker crash, rejected token) finish with an abort (500). */
  private failBrokenGrammars(outputs: ReqTokenOutput[]): void {
    for (const req of [...this.running, ...this.waiting]) {
      if (!req.grammar || req === this.chunkedReq) continue;
      const err = this.grammar!.error(req.rid);
      if (!err) continue;
      this.finishReq(req.rid, { type: 'abort', message: `The grammar backend failed for this request: ${err.message}`, statusCode: 500 });
      const out = this.pendingOutputs.pop();
      if (out) outputs.push(out);
    }
  }

  /** Builds this step's prefill (SGLang get_new_batch_prefill + PrefillAdder), allocating its KV. Null if none. */
  private schedulePrefill(): ScheduleBatch | null {
    if (this.waiting.length === 0 && !this.chunkedReq) return null;
    const P = this.cfg.pageSize;
    const chunked = this.chunkedReq;
    // Requests under suspicion (Req.isolate) run alone: a suspect's prefill takes the whole step, and nothing mixes
    // with a suspect's decode. The chunk in progress finishes first.
    const suspect = chunked ? null : this.waiting.find((r) => r.isolate) ?? null;
    const alone = suspect !== null || chunked?.isolate === true;
    let mixedDecodes: Req[] = this.cfg.enableMixedChunk && !alone && !this.running.some((r) => r.isolate) ? [...this.running] : [];
    const budget = new PrefillAdder(
      this.mem.availableWithEvictable(),
      this.running,
      this.newTokenRatio,
      this.cfg.maxPrefillTokens,
      this.cfg.chunkedPrefillSize,
      mixedDecodes.length,
      P,
    );
    const plan: { req: Req; n: number }[] = [];
    let cached = 0;
    if (chunked) {
      const remaining = chunked.seqLen - chunked.kvCommittedLen;
      const n = budget.chunkedReqTokens(remaining);
      if (n > 0) {
        plan.push({ req: chunked, n });
        budget.take(n, n === remaining ? Math.min(chunked.maxNewTokens - chunked.outputIds.length, CLIP_MAX_NEW_TOKENS_ESTIMATION) : 0);
      }
    }
    sortWaitingQueue(this.waiting, this.cfg.schedulePolicy, this.mem.cache);
    let numAdmitted = 0;
    const candidates = suspect ? [suspect] : chunked?.isolate ? [] : this.waiting.filter((r) => !r.isolate);
    for (const req of candidates) {
      if (chunked && plan.length === 1 && plan[0].n < chunked.seqLen - chunked.kvCommittedLen) break;
      if (this.running.length + numAdmitted + (chunked ? 1 : 0) >= this.cfg.maxRunningRequests) break;
      if (this.mem.reqToTokenPool.availableSize() === 0) break;
      if (budget.state() !== 'continue') break;
      const match: MatchResult = this.mem.matchForAdmission(req);
      const extendLen = req.seqLen - match.indices.length;
      const { tokens, result } = budget.newReqTokens(req, extendLen, plan.length > 0);
      if (result !== 'continue') break;
      this.mem.admit(req, match);
      this.spec?.onAdmit(req, this.mem, match.indices.length);
      req.cachedTokens += match.indices.length;
      cached += match.indices.length;
      this.totalCachedTokens += match.indices.length;
      req.inputTokenLogprobs ??= req.wantsInputLogprobs ? [] : null;
      req.inputTopLogprobs ??= req.wantsInputLogprobs ? [] : null;
      if (req.wantsInputLogprobs && req.logprobStartLen === 0 && req.inputTokenLogprobs!.length === 0) {
        req.inputTokenLogprobs!.push([null, req.originInputIds[0]]);
        req.inputTopLogprobs!.push(null);
      }
      const reserve = tokens === extendLen ? Math.min(req.maxNewTokens - req.outputIds.length, CLIP_MAX_NEW_TOKENS_ESTIMATION) : 0;
      budget.take(tokens, reserve);
      this.waiting.splice(this.waiting.indexOf(req), 1);
      plan.push({ req, n: tokens });
      numAdmitted++;
      if (tokens < extendLen) {
        req.isChunked = true;
        this.chunkedReq = req;
        break;
      }
    }
    if (plan.length === 0) return null;

    // Memory: extends first; mixed decodes only if their pages also fit.
    const extendPages = plan.reduce((s, p) => s + this.mem.allocator.pagesNeeded(p.req.kvCommittedLen, p.n), 0) * P;
    const decodePages = mixedDecodes.filter((r) => r.kvCommittedLen % P === 0).length * P;
    if (mixedDecodes.length > 0 && !this.mem.ensureFree(extendPages + decodePages)) mixedDecodes = [];
    const items: ExtendItem[] = [];
    for (const { req, n } of plan) {
      const locs = this.mem.allocTokens(req, n);
      if (!locs) {
        // Budget estimate was optimistic (page rounding): put the request back untouched.
        if (req === chunked) continue; // the in-progress chunk waits for the next step
        this.mem.releaseRetracted(req);
        if (this.chunkedReq === req) this.chunkedReq = null;
        this.waiting.unshift(req);
        continue;
      }
      items.push({ req, n, locs, scorePositions: req.scorePositions(n) });
    }
    if (items.length === 0) return null;
    return { extendItems: items, decodeReqs: mixedDecodes, numCachedTokens: cached };
  }

  /**
   * Makes room for one more token per running request (SGLang update_running_batch / check_decode_mem /
   * retract_decode): evict the prefix cache, then retract the requests with the fewest generated tokens (ties: the
   * longest prompt) back to the waiting queue, keeping at least one. Updates new_token_ratio.
   * @returns number of retracted requests
   */
  private prepareDecode(): number {
    const P = this.cfg.pageSize;
    // one token per request (a page when it crosses into one); speculative: its verify slots
    const D = this.spec?.tokensPerStep ?? 1;
    const pagesFor = (reqs: readonly Req[]): number => reqs.reduce((s, r) => s + this.mem.allocator.pagesNeeded(r.kvCommittedLen, D), 0) * P;
    let numRetracted = 0;
    if (!this.mem.ensureFree(pagesFor(this.running))) {
      const order = [...this.running].sort(
        (a, b) => b.outputIds.length - a.outputIds.length || a.originInputIds.length - b.originInputIds.length,
      );
      while (!this.mem.ensureFree(pagesFor(order))) {
        if (order.length > 1) {
          const victim = order.pop()!;
          this.retract(victim);
          numRetracted++;
        } else if (this.chunkedReq) {
          this.retract(this.chunkedReq);
          numRetracted++;
        } else {
          assert(false, 'decode: out of KV cache with one request left (pool smaller than one request)');
        }
      }
      // retract() removed the victims from this.running; survivors keep their order.
      let gen = 0;
      let maxNew = 0;
      for (const r of this.running) {
        gen += r.outputIds.length;
        maxNew += r.maxNewTokens;
      }
      this.newTokenRatio = Math.min(1, (gen + RETRACT_DECODE_STEPS * this.running.length) / (maxNew + 1));
    } else {
      this.newTokenRatio = Math.max(this.newTokenRatio - this.newTokenRatioDecay, this.minNewTokenRatio);
    }
    return numRetracted;
  }

  private retract(req: Req): void {
    this.mem.releaseRetracted(req);
    req.numRetractions++;
    this.totalRetracted++;
    if (this.chunkedReq === req) this.chunkedReq = null;
    const ri = this.running.indexOf(req);
    if (ri >= 0) this.running.splice(ri, 1);
    if (!req.inputLogprobsSent) {
      req.inputTokenLogprobs = null;
      req.inputTopLogprobs = null;
    }
    this.waiting.push(req);
  }

  /**
   * Recovery after a step threw (SGLang would crash the scheduler process; here one bad request must not take the
   * others down, nor hang). The KV allocated for the step is released with the requests it belongs to:
   * - the failure happened before a batch was chosen (scheduling itself failed): every request fails;
   * - the batch had one request, or a request already was in MAX_FAILED_STEPS failed batches: it fails;
   * - otherwise the failure cannot be pinned on one request: each is put back in the waiting queue (its generated
   *   tokens kept, as a retraction) and marked Req.isolate, so it is re-run alone and a failure that recurs is then
   *   its own. Requests outside the batch are untouched.
   * A failed request finishes with an abort: status 400 and the error's message when the error is an invalid
   * request (e.g. an id the model cannot embed), else 500.
   */
  private recoverFromFailedStep(error: Error, outputs: ReqTokenOutput[]): StepResult {
    const batch = this.stepReqs;
    const invalid = error instanceof TsglangError && error.kind === 'invalid_request';
    const reason: FinishReasonData = invalid
      ? { type: 'abort', message: error.message, statusCode: 400 }
      : { type: 'abort', message: `The engine failed to run this request: ${error.message}`, statusCode: 500 };
    const failedRids: string[] = [];
    const retriedRids: string[] = [];
    const involved = batch ? batch.filter((r) => this.live.get(r.rid) === r) : [...this.live.values()];
    for (const req of involved) {
      req.numFailedSteps++;
      if (req.isFinished || batch === null || involved.length === 1 || req.numFailedSteps >= MAX_FAILED_STEPS) {
        if (req.grammar) this.grammar?.close(req.rid);
      }
      if (req.isFinished) {
        // It reached its end (stop / length) before the failure: deliver that, without caching its KV.
        this.dropReq(req);
        outputs.push(req.takeOutput());
      } else if (batch === null || involved.length === 1 || req.numFailedSteps >= MAX_FAILED_STEPS) {
        this.dropReq(req);
        req.finishReason = reason;
        outputs.push(req.takeOutput());
        failedRids.push(req.rid);
      } else {
        this.dropReq(req);
        req.isolate = true;
        if (!req.inputLogprobsSent) {
          // recomputed on re-admission, as after a retraction
          req.inputTokenLogprobs = null;
          req.inputTopLogprobs = null;
        }
        this.waiting.push(req);
        this.live.set(req.rid, req);
        retriedRids.push(req.rid);
      }
    }
    return { stats: null, outputs, failure: { error, failedRids, retriedRids } };
  }

  /** Takes `req` out of every queue and frees its KV without caching it (also what a failed step allocated). */
  private dropReq(req: Req): void {
    const gi = this.grammarQueue.indexOf(req);
    if (gi >= 0) this.grammarQueue.splice(gi, 1);
    const wi = this.waiting.indexOf(req);
    if (wi >= 0) this.waiting.splice(wi, 1);
    const ri = this.running.indexOf(req);
    if (ri >= 0) this.running.splice(ri, 1);
    if (this.chunkedReq === req) this.chunkedReq = null;
    this.live.delete(req.rid);
    try {
      this.mem.releaseRetracted(req);
    } catch {
      // The failure left this request's KV bookkeeping inconsistent: its pages stay allocated (leaked) rather than
      // risk freeing pages another request uses; the request itself is still finished or retried.
      req.reqPoolIdx = -1;
      req.kvCommittedLen = 0;
      req.kvAllocatedLen = 0;
      req.cacheProtectedLen = 0;
      req.lastNode = null;
    }
    req.isChunked = false;
  }

  /** Live counters (for EngineLoad). */
  load(): { numRunning: number; numWaiting: number; usedTokens: number; evictable: number } {
    const a = this.mem.allocator;
    return {
      numRunning: this.running.length + (this.chunkedReq ? 1 : 0),
      numWaiting: this.waiting.length,
      usedTokens: a.size - a.availableSize() - this.mem.cache.evictableSize(),
      evictable: this.mem.cache.evictableSize(),
    };
  }
}

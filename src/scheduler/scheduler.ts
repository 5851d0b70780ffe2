// Scheduler: continuous batching over one model (SGLang managers/scheduler.py event_loop_normal,
// get_next_batch_to_run, update_running_batch, process_batch_result). step() is synchronous:
//   schedule (prefill first, else decode with retraction) → ForwardBatch → ModelRunner (forward + sample) → postprocess.
// Owns the queues and is the single owner of KV / radix state (through CacheManager); never sees text.
// Its parts, one file each: admission (prefill_planner.ts: PrefillAdder over the chunked request and the waiting
// queue), decode memory and retraction (retraction.ts), the grammar queue (grammar_queue.ts), recovery from a failed
// step (failure_recovery.ts), processing a step's result (batch_result.ts); the types it reports in scheduler_types.ts.
//
// Seams for what comes next (layout-and-style.md §2.4), none of which needs a rewrite:
// - speculative decoding (built: spec_decode.ts, spec_draft.ts): a verify step is a decode with a row per draft-tree node;
//   the walk appends the accepted tokens one by one through appendSampled (each applies the stop rules and the
//   grammar) and frees the rejected slots' locs; prefill steps seed the draft (SpecDecoder.afterExtend).
// - PD disaggregation (built: disagg/): a prefill-only loop calls step() with decode disabled and hands finished
//   prefills' KV pages to a sender; a decode-only loop admits prebuilt requests through CacheManager.admit + allocTokens
//   and never prefills.
// - TP/DP ranks (built: executor/): ModelRunner is the only thing that touches the model; a TP runner fans the same
//   ForwardBatch out to worker threads and reduces, the scheduler is unchanged; DP runs one Scheduler per rank.
// - PP stages (built: pp_loop.ts over executor/pp_runner.ts): with a pipelined runner a step launches a micro-batch
//   (planStep + lowerStep, KV committed at launch) and collects the oldest one's tokens when the ring is full; requests
//   in flight sit out planning, an abort of one waits for its micro-batch.
import { assert, InvalidRequestError } from '../common/index.js';
import type { ForwardMode } from '../layers/index.js';
import type { ModelRunner } from '../executor/index.js';
import { processBatchResult, settle, type LaunchedStep } from './batch_result.js';
import { CacheManager } from './cache_manager.js';
import { recoverFromFailedStep } from './failure_recovery.js';
import { buildForwardBatch } from './forward_batch_builder.js';
import { GRAMMAR_BACKEND_NONE_MESSAGE, GRAMMAR_TIMEOUT_MS, type GrammarScheduling } from './grammar.js';
import { failBrokenGrammars, pollGrammarQueue } from './grammar_queue.js';
import type { FinishReasonData, ReqTokenOutput, TokenizedReq } from './io.js';
import { schedulePrefill } from './prefill_planner.js';
import { Req } from './req.js';
import { MicroBatchLoop } from './pp_loop.js';
import { prepareDecode } from './retraction.js';
import { lowerScheduleBatch } from './schedule_batch.js';
import type { ExtendItem } from './schedule_batch.js';
import { validateInputIdsInVocab, type SchedulerConfig, type StepResult, type StepStats } from './scheduler_types.js';
import type { SpecDecoder } from './spec_decode.js';

export type { SchedulerConfig, StepFailure, StepResult, StepStats } from './scheduler_types.js';
export { validateInputIdsInVocab } from './scheduler_types.js';

const MAX_NEW_TOKENS_UNSET = 1 << 30;

/** The requests chosen for a step, before their KV is allocated and the step lowered (scheduler/ internal). */
export interface PlannedStep {
  readonly extends_: readonly ExtendItem[];
  readonly decodes: readonly Req[];
  readonly numCachedTokens: number;
  readonly numRetracted: number;
  readonly numRunningBefore: number;
  /** When scheduling began, ms (performance.now). */
  readonly tStart: number;
}

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
  /** Pipeline parallelism (a pipelined runner), else null: micro-batches in flight (scheduler/pp_loop.ts). */
  readonly pipeline: MicroBatchLoop | null;
  /** Longest wait in the grammar queue before the request fails, ms. */
  grammarTimeoutMs = GRAMMAR_TIMEOUT_MS;
  chunkedReq: Req | null = null;
  readonly statsHistory: StepStats[] = [];
  newTokenRatio: number;
  readonly initNewTokenRatio: number;
  readonly minNewTokenRatio: number;
  readonly newTokenRatioDecay: number;
  private stepCount = 0;
  /** Outputs of requests finished between steps (aborts), delivered with the next step's (scheduler/ internal). */
  pendingOutputs: ReqTokenOutput[] = [];
  /** Every request queued, running or being scheduled, by rid, until its finish (scheduler/ internal). */
  readonly live = new Map<string, Req>();
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
    const pp = runner.pipeline;
    this.pipeline = pp ? new MicroBatchLoop(this, pp.loopSize, cfg.ppMaxMicroBatchSize ?? cfg.maxRunningRequests) : null;
  }

  /**
   * PD seams (disagg/): `prefillFinished` sees a finished request's KV before it is cached or freed (the prefill
   * loop copies it out for the transfer); `prebuilt` takes every new request off the waiting queue (the decode loop
   * fills its KV by transfer and hands it back through installPrebuilt / failPrebuilt). Both null outside PD.
   */
  prefillFinished: ((req: Req) => void) | null = null;
  /** PD prefill: a request's prefill chunk finished (not its last); its KV up to kvCommittedLen is in the pool. */
  prefillChunkDone: ((req: Req) => void) | null = null;
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
   * The checks addRequest makes (PD prefill runs them when a request enters its bootstrap queue, before it is queued).
   * @throws InvalidRequestError for an empty or over-long prompt, an id outside the vocabulary, a duplicate rid, or a
   *   grammar without a grammar backend
   */
  validateRequest(t: TokenizedReq): void {
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
    if (this.live.has(t.rid)) throw new InvalidRequestError(`Duplicate request id ${t.rid}.`, 'rid');
    if (t.params.grammar && !this.grammar) throw new InvalidRequestError(GRAMMAR_BACKEND_NONE_MESSAGE, null);
  }

  /**
   * Queues a tokenized request. max_new_tokens is clamped to max_req_len − input − 1 (SGLang).
   * @throws InvalidRequestError as validateRequest
   */
  addRequest(t: TokenizedReq): void {
    this.validateRequest(t);
    const inLen = t.inputIds.length;
    const maxNew = Math.max(0, Math.min(t.params.maxNewTokens ?? MAX_NEW_TOKENS_UNSET, this.maxReqLen - inLen - 1));
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

  /** True while anything is queued, running or in the pipeline. */
  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0 || this.chunkedReq !== null || this.pendingOutputs.length > 0 || this.grammarQueue.length > 0 || this.inFlight > 0;
  }

  /** Pipeline parallelism: micro-batches launched and not yet collected (0 otherwise). */
  get inFlight(): number {
    return this.pipeline?.inFlight ?? 0;
  }

  /**
   * Finishes a request now (abort, or a stop string matched by the detokenizer), releasing its KV. Call between steps.
   * @returns false for an unknown or already finished rid
   */
  finishReq(rid: string, reason: FinishReasonData): boolean {
    const req = this.live.get(rid);
    if (!req || req.isFinished) return false;
    if (req.inFlight > 0) {
      // PP: its micro-batch is in the pipeline; the finish applies when the batch is back (pp_loop.ts)
      req.toFinish ??= reason;
      return true;
    }
    req.finishReason = reason;
    this.unqueue(req);
    if (req.grammar) this.grammar?.close(rid);
    this.live.delete(rid);
    this.mem.releaseFinished(req);
    if (reason.type === 'abort') this.pendingOutputs.push(req.takeOutput());
    return true;
  }

  /** Aborts one request (SGLang AbortReq). */
  abort(rid: string, message = 'Abort in waiting queue'): boolean {
    const req = this.live.get(rid);
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
    if (this.waiting.length > 0 || this.running.length > 0 || this.chunkedReq || this.inFlight > 0) return false;
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
    if (this.pipeline) return this.pipeline.step(outputs);
    try {
      return this.runStep(outputs);
    } catch (e) {
      return recoverFromFailedStep(this, this.stepReqs, e instanceof Error ? e : new Error(String(e)), outputs);
    } finally {
      this.stepReqs = null;
    }
  }

  private runStep(outputs: ReqTokenOutput[]): StepResult {
    const plan = this.planStep(outputs, null);
    if (!plan) return { stats: null, outputs };
    const { extends_, decodes } = plan;
    this.stepReqs = [...extends_.map((it) => it.req), ...decodes];
    if (this.spec && extends_.length === 0) return this.runSpecDecode(decodes, outputs, plan.tStart, plan.numRunningBefore, plan.numRetracted);
    const step = this.lowerStep(plan);
    const tRun = performance.now();
    this.scheduleTimeMs += tRun - plan.tStart;
    const result = this.runner.run(step.batch, step.lowered.sample, step.lowered.score);
    const tPost = performance.now();
    const out = processBatchResult(this, step, result, outputs);
    this.postprocessTimeMs += performance.now() - tPost;
    return out;
  }

  /**
   * Chooses a step's requests (SGLang get_next_batch_to_run): a prefill when one can be admitted (scheduler/
   * prefill_planner.ts), else a decode of the running requests after the memory check (retraction.ts). Under PP
   * (`microBatchCap` set) requests whose micro-batch is in flight are left out, a prefill admits at most the cap minus
   * the running requests it leaves waiting, and a decode takes at most the cap.
   * @returns null when nothing can run now
   */
  planStep(outputs: ReqTokenOutput[], microBatchCap: number | null): PlannedStep | null {
    const tStart = performance.now();
    const numRunningBefore = this.running.length;
    if (this.grammarQueue.length > 0) pollGrammarQueue(this, outputs);
    if (this.grammar) failBrokenGrammars(this, outputs);
    const idle = microBatchCap === null ? this.running : this.running.filter((r) => r.inFlight === 0);
    const prefill = schedulePrefill(this, microBatchCap === null ? Infinity : microBatchCap - idle.length);
    if (prefill) {
      return { extends_: prefill.extendItems, decodes: prefill.decodeReqs, numCachedTokens: prefill.numCachedTokens, numRetracted: 0, numRunningBefore, tStart };
    }
    if (idle.length === 0) return null;
    const numRetracted = prepareDecode(this, idle, microBatchCap !== null && idle.length < this.running.length);
    if (numRetracted < 0) return null; // PP: no memory until a micro-batch in flight comes back
    const ready = microBatchCap === null ? this.running : idle.filter((r) => this.running.includes(r)).slice(0, microBatchCap);
    // A request under suspicion (Req.isolate) decodes alone.
    const suspect = ready.find((r) => r.isolate);
    // A constrained row whose mask is not back while the grammar worker compiles sits this step out (never stalls the others).
    const decodes = suspect ? [suspect] : this.grammar ? ready.filter((r) => !r.grammar || this.grammar!.canSampleNow(r.rid)) : [...ready];
    if (decodes.length === 0) return null;
    return { extends_: [], decodes, numCachedTokens: 0, numRetracted, numRunningBefore, tStart };
  }

  /**
   * Allocates a KV slot for each decode (checked to fit), fetches the grammar masks of the rows sampled this step (an
   * extend is sampled when it completes its prompt) and lowers the step to a ForwardBatch (EAGLE: asking for the
   * target's hidden states, which seed the draft).
   */
  lowerStep(plan: PlannedStep): LaunchedStep {
    const { extends_, decodes } = plan;
    const decodeLocs = decodes.map((req) => {
      const locs = this.mem.allocTokens(req, 1);
      assert(locs, () => `decode allocation failed for ${req.rid}`);
      return locs;
    });
    if (this.grammar) {
      for (const it of extends_) if (it.req.grammar) it.req.vocabMask = it.n === it.req.seqLen - it.req.kvCommittedLen ? this.grammar.mask(it.req.rid) : null;
      for (const req of decodes) if (req.grammar) req.vocabMask = this.grammar.mask(req.rid);
    }
    const lowered = lowerScheduleBatch(extends_, decodes, decodeLocs);
    const built = buildForwardBatch(lowered.entries, this.mem.reqToTokenPool.reqToToken, this.mem.reqToTokenPool.maxContextLen, this.runner.kvPool);
    const batch = this.spec?.draft.needsHidden ? { ...built, captureAllHidden: true } : built;
    return { extends_, decodes, lowered, batch, numCachedTokens: plan.numCachedTokens, numRetracted: plan.numRetracted, numRunningBefore: plan.numRunningBefore };
  }

  /** Appends a sampled token: stop rules, the grammar (SGLang check_finished: a terminated grammar finishes the request, also with ignore_eos). */
  appendSampled(req: Req, tokenId: number): void {
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
    const numFinished = settle(this, decodes, outputs);
    const stats = this.recordStepStats('decode', decodes.length, 0, decodes.length, 0, 0, false, numRetracted, numFinished, numRunningBefore);
    this.postprocessTimeMs += performance.now() - tPost;
    return { stats, outputs };
  }

  /** A finished step's StepStats (kept in statsHistory with recordStats). */
  recordStepStats(
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

  /** Takes `req` out of the grammar queue, the waiting queue, the running batch and the chunk slot (scheduler/ internal). */
  unqueue(req: Req): void {
    for (const q of [this.grammarQueue, this.waiting, this.running]) {
      const i = q.indexOf(req);
      if (i >= 0) q.splice(i, 1);
    }
    if (this.chunkedReq === req) this.chunkedReq = null;
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

// ModelRunner: owns the model and its KV pool; runs one ForwardBatch and samples the rows that need a next token
// (SGLang model_executor/model_runner.py + layers/sampler.py). Knows nothing of requests or queues.
import { assert } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import type { ForwardBatch, ForwardOutput } from '../layers/index.js';
import type { KVPool, KVPoolLayout } from '../mem_cache/index.js';
import { sampleRows, scoreRow, type RowSample, type RowSamplingInfo } from '../sampling/index.js';

/** What the runner needs from a model (models/ CausalLM satisfies it; tests pass a fake). */
export interface ForwardModel {
  /** The KV pool this model writes, its buffers in the codec of `kvCacheDtype` (default 'auto': f32). */
  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout;
  /** @returns logits [numLogitRows, vocabSize] f32 of batch.logitRows */
  forward(batch: ForwardBatch): ForwardOutput;
  /** Releases what the model holds beyond memory (TP: stops the rank threads). Optional; idempotent. */
  close?(): void;
  /**
   * Why the model can never run again (TP: a failed step broke the rank groups), or null while it can. Optional:
   * absent means never broken. The engine shuts the server down when it is set (SGLang's scheduler exits then too).
   */
  brokenReason?(): string | null;
  /**
   * PD disaggregation (executor/kv_steps.ts): how many ranks hold this model's KV pool (its attn_tp ranks, each with
   * its own heads; MLA's latent is the same on all); absent means one (the pool given is everything).
   */
  readonly kvRanks?: number;
  /** PD: the KV rows of `locs` of every rank's pool, rank order, layer-major as gatherKvRows packs them. */
  gatherRankKv?(pool: KVPool, locs: Int32Array): Uint8Array[];
  /** PD: writes rows[r] (layer-major, rank r's heads) into rank r's pool at `locs`. */
  scatterRankKv?(pool: KVPool, locs: Int32Array, rows: readonly Uint8Array[]): void;
}

/** A logits row that must be sampled. */
export interface SampleRowRequest {
  /** Index into batch.logitRows. */
  readonly logitIdx: number;
  readonly info: RowSamplingInfo;
}

/** A logits row whose logprob of a known next token is wanted (prompt logprobs). */
export interface ScoreRowRequest {
  readonly logitIdx: number;
  /** The token whose logprob is returned. */
  readonly tokenId: number;
  readonly topLogprobsNum: number;
}

/** A scored row: [logprob of tokenId, tokenId] and top alternatives. */
export interface RowScore {
  readonly logprob: number;
  readonly topLogprobs: [number, number][];
}

/** Result of one step. */
export interface RunResult {
  /** One per SampleRowRequest, same order. */
  readonly samples: RowSample[];
  /** One per ScoreRowRequest, same order. */
  readonly scores: RowScore[];
  /** [numTokens, hiddenSize] f32 final-norm hidden states of every row, when batch.captureAllHidden (EAGLE). */
  readonly allHiddenStates?: Float32Array;
  /**
   * Pipeline parallelism (the last stage sampled on its own thread): per sample row, its RNG state after the draw, for
   * the request's Rng to continue from (Rng.setState).
   */
  readonly rngStates?: readonly (readonly number[])[];
}

/**
 * A model split into pipeline stages (executor/pp_runner.ts): a step is launched on the first stage, which returns
 * once its layers ran and the hidden states are on their way, and its samples are collected later from the last
 * stage; up to `loopSize` steps are in flight, collected in launch order (SGLang event_loop_pp's micro-batches).
 */
export interface PipelinedModel extends ForwardModel {
  /** Micro-batches that may be in flight at once: pp_size + pp_async_batch_depth. */
  readonly loopSize: number;
  /** Runs the first stage of a step and sends it on. @throws DistributedError naming the failed stage and rank */
  launch(batch: ForwardBatch, sample: readonly SampleRowRequest[], score: readonly ScoreRowRequest[]): void;
  /** Blocks until the oldest launched step's result arrives. @throws DistributedError naming the failed stage and rank */
  collect(): RunResult;
}

/** True for a pipeline-parallel model. */
export function isPipelinedModel(m: ForwardModel): m is PipelinedModel {
  return typeof (m as Partial<PipelinedModel>).launch === 'function' && typeof (m as Partial<PipelinedModel>).collect === 'function';
}

/**
 * Most floats of the logits buffer a ModelRunner keeps between steps (1 GiB: 2048 rows of a 129K vocabulary); a step
 * with more logit rows gets a fresh array.
 */
const MAX_REUSED_LOGITS = 1 << 28;

/** Runs forwards over one model and one KV pool. */
export class ModelRunner {
  readonly model: ForwardModel;
  readonly kvPool: KVPool;
  readonly vocabSize: number;
  /** Forwards run (statistics). */
  numForwards = 0;
  /** Wall time inside model.forward, ms (statistics; never used for decisions). */
  forwardTimeMs = 0;
  /** Wall time sampling/scoring rows, ms (statistics). */
  sampleTimeMs = 0;
  /** Logits buffer handed to every forward (grows to the largest step, up to MAX_REUSED_LOGITS floats). */
  private logitsBuf = new Float32Array(0);

  /**
   * @param model the model
   * @param kvPool KV storage laid out as model.kvPoolLayout()
   * @param vocabSize logits row width
   */
  constructor(model: ForwardModel, kvPool: KVPool, vocabSize: number) {
    this.model = model;
    this.kvPool = kvPool;
    this.vocabSize = vocabSize;
  }

  /**
   * Runs the model on `batch`, then samples and scores the requested logit rows. Rows are independent: sampling and
   * scoring are batch-invariant.
   * @param batch the step (batch.kvPool must be this runner's pool)
   * @throws InternalError when the model returns a logits array of the wrong size
   */
  run(batch: ForwardBatch, sample: readonly SampleRowRequest[], score: readonly ScoreRowRequest[]): RunResult {
    if (this.pipeline) {
      this.launch(batch, sample, score);
      return this.collect();
    }
    const t1 = performance.now();
    const out = this.forwardRaw(batch);
    const V = this.vocabSize;
    const scores: RowScore[] = score.map((s) => scoreRow(out.logits.subarray(s.logitIdx * V, (s.logitIdx + 1) * V), s.tokenId, s.topLogprobsNum));
    // Sampling rewrites its row in place: sample rows and score rows are distinct, and the logits are this step's scratch.
    // (sampleRows: every row of the step in one call of the fused native sampler when installed, else sampleRow each)
    const samples = sampleRows(out.logits, V, sample);
    this.sampleTimeMs += performance.now() - t1 - this.lastForwardMs;
    return out.allHiddenStates ? { samples, scores, allHiddenStates: out.allHiddenStates } : { samples, scores };
  }

  private lastForwardMs = 0;

  /** The model as a pipeline (null when it runs whole on this thread, or under TP only). */
  get pipeline(): PipelinedModel | null {
    return isPipelinedModel(this.model) ? this.model : null;
  }

  /**
   * Pipeline parallelism: runs the first stage of `batch` and sends it on; its samples come from collect(). The time
   * counts as forward time.
   * @throws InternalError when the model is not pipelined; DistributedError from the stages
   */
  launch(batch: ForwardBatch, sample: readonly SampleRowRequest[], score: readonly ScoreRowRequest[]): void {
    assert(batch.kvPool === this.kvPool, 'ModelRunner: batch uses another KV pool');
    const p = this.pipeline;
    assert(p !== null, 'ModelRunner.launch: the model is not pipelined');
    const t0 = performance.now();
    p.launch(batch, sample, score);
    this.forwardTimeMs += performance.now() - t0;
    this.numForwards++;
  }

  /** Pipeline parallelism: the oldest launched step's result (blocks until the last stage sends it). */
  collect(): RunResult {
    const p = this.pipeline;
    assert(p !== null, 'ModelRunner.collect: the model is not pipelined');
    const t0 = performance.now();
    const r = p.collect();
    this.forwardTimeMs += performance.now() - t0;
    return r;
  }

  /**
   * Runs the model on `batch` and returns its raw output (speculative verify samples the rows itself). The logits
   * live in this runner's reused buffer: consume them before the next forward.
   * @returns logits [batch.logitRows.length, vocabSize] f32 (+ hidden states as the batch asks)
   * @throws InternalError when the batch uses another KV pool or the model returns logits of the wrong size
   */
  forwardRaw(batch: ForwardBatch): ForwardOutput {
    assert(batch.kvPool === this.kvPool, 'ModelRunner: batch uses another KV pool');
    const t0 = performance.now();
    // the logits land in this runner's buffer, reused from step to step (they are consumed below)
    const need = batch.logitRows.length * this.vocabSize;
    if (need > this.logitsBuf.length && need <= MAX_REUSED_LOGITS) {
      this.logitsBuf = new Float32Array(Math.min(MAX_REUSED_LOGITS, Math.max(need, Math.ceil(1.25 * this.logitsBuf.length))));
    }
    const out = this.model.forward(need > 0 && need <= this.logitsBuf.length ? { ...batch, logitsOut: this.logitsBuf } : batch);
    this.lastForwardMs = performance.now() - t0;
    this.forwardTimeMs += this.lastForwardMs;
    this.numForwards++;
    const V = this.vocabSize;
    assert(out.logits.length === batch.logitRows.length * V, () => `ModelRunner: logits length ${out.logits.length} != ${batch.logitRows.length} × ${V}`);
    return out;
  }
}

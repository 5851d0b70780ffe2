// MiniMaxM2ForCausalLM (MiniMax-M2 / M2.1 / M2.5 / M2.7): GQA attention with q/k RMSNorm over all heads, partial
// NeoX RoPE, sigmoid-routed MoE with e_score_correction_bias (selection only), renormalized, no shared expert.
// Math: model-spec.md §2.4; SGLang python/sglang/srt/models/minimax_m2.py.
//
// config.json fields read: architectures, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, rotary_dim (or partial_rotary_factor), rope_theta, rms_norm_eps, vocab_size, intermediate_size,
// num_local_experts, num_experts_per_tok, scoring_func, use_routing_bias, use_qk_norm, qk_norm_type,
// shared_intermediate_size, attn_type_list, routed_scaling_factor, tie_word_embeddings, quantization_config.
import { InvalidRequestError, ModelLoadError, scalarKvCodec } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import { configBool, configInt, configNumber, configString } from '../config/index.js';
import type { ModelConfig } from '../config/index.js';
import type { ExpertWeights, Ops } from '../kernels/index.js';
import {
  CpuAttentionBackend, FusedMoE, Linear, LogitsProcessor, ParallelLMHead, RMSNorm, RadixAttention, RotaryEmbedding,
  SINGLE_RANK, ScratchBuffers, VocabEmbedding, attnGroupsOf, expertRange, isFirstStage, isLastStage, kvHeadRange, lmHeadGroupsOf, qHeadRange,
  selectExperts, stageInput, tpAllReduce, tpRmsNormInPlace,
} from '../layers/index.js';
import type { AttentionBackend, ForwardBatch, ForwardOutput, ParallelGroups, PipelineStage, ScoringFunc } from '../layers/index.js';
import type { KVPoolLayout } from '../mem_cache/index.js';
import type { CausalLM, CreateModelOptions, ModelDefinition } from './model_base.js';
import { miniMaxM2Shards } from './tp_shards.js';
import type { StoredAs, TensorSpec, WeightStore } from './weights.js';
import { kvScaleName } from './loader.js';

/** The sizes and switches of a MiniMax-M2 config, validated. */
export interface MiniMaxM2Dims {
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly rotaryDim: number;
  readonly ropeTheta: number;
  readonly rmsNormEps: number;
  readonly vocabSize: number;
  /** Per-expert FFN width (config intermediate_size). */
  readonly intermediateSize: number;
  readonly numExperts: number;
  readonly topK: number;
  readonly scoringFunc: ScoringFunc;
  readonly useRoutingBias: boolean;
  readonly useQkNorm: boolean;
  readonly routedScalingFactor: number;
  readonly tieWordEmbeddings: boolean;
}

/**
 * Reads and validates the MiniMax-M2 fields of a config.
 * @throws ModelLoadError naming config.json and the field for missing, inconsistent or unsupported values
 */
export function miniMaxM2Dims(cfg: ModelConfig): MiniMaxM2Dims {
  const bad = (field: string, what: string): never => {
    throw new ModelLoadError(`${cfg.source}: field '${field}' ${what}`, { file: cfg.source });
  };
  const headDim = cfg.headDim;
  const partial = cfg.raw.partial_rotary_factor;
  const rotaryDim = configInt(cfg, 'rotary_dim', typeof partial === 'number' ? Math.round(partial * headDim) : headDim);
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim || rotaryDim === 0) bad('rotary_dim', `must be even and in (0, head_dim=${headDim}], got ${rotaryDim}`);
  if (cfg.numKeyValueHeads === 0 || cfg.numAttentionHeads % cfg.numKeyValueHeads !== 0) {
    bad('num_key_value_heads', `(${cfg.numKeyValueHeads}) must divide num_attention_heads (${cfg.numAttentionHeads})`);
  }
  const numExperts = configInt(cfg, 'num_local_experts');
  const topK = configInt(cfg, 'num_experts_per_tok');
  if (topK < 1 || topK > numExperts) bad('num_experts_per_tok', `(${topK}) must be in [1, num_local_experts=${numExperts}]`);
  const scoring = configString(cfg, 'scoring_func', 'sigmoid');
  if (scoring !== 'sigmoid' && scoring !== 'softmax') bad('scoring_func', `'${scoring}' is not supported (sigmoid, softmax)`);
  const useQkNorm = configBool(cfg, 'use_qk_norm', true);
  const qkNormType = configString(cfg, 'qk_norm_type', 'per_layer');
  if (useQkNorm && qkNormType !== 'per_layer') bad('qk_norm_type', `'${qkNormType}' is not supported (per_layer)`);
  if (configInt(cfg, 'shared_intermediate_size', 0) !== 0) bad('shared_intermediate_size', 'must be 0: MiniMax-M2 has no shared expert');
  const attnTypes = cfg.raw.attn_type_list;
  if (Array.isArray(attnTypes) && attnTypes.some((t) => t !== 1)) bad('attn_type_list', 'must be all 1 (full attention); linear attention layers are not supported');
  for (const [f, v] of [['hidden_size', cfg.hiddenSize], ['num_hidden_layers', cfg.numHiddenLayers], ['vocab_size', cfg.vocabSize], ['head_dim', headDim]] as const) {
    if (v <= 0) bad(f, 'must be positive');
  }
  return {
    hiddenSize: cfg.hiddenSize,
    numLayers: cfg.numHiddenLayers,
    numHeads: cfg.numAttentionHeads,
    numKvHeads: cfg.numKeyValueHeads,
    headDim,
    rotaryDim,
    ropeTheta: cfg.ropeTheta,
    rmsNormEps: cfg.rmsNormEps,
    vocabSize: cfg.vocabSize,
    intermediateSize: configInt(cfg, 'intermediate_size'),
    numExperts,
    topK,
    scoringFunc: scoring as ScoringFunc,
    useRoutingBias: configBool(cfg, 'use_routing_bias', true),
    useQkNorm,
    routedScalingFactor: configNumber(cfg, 'routed_scaling_factor', 1),
    tieWordEmbeddings: cfg.tieWordEmbeddings,
  };
}

/**
 * Every tensor of a MiniMax-M2 checkpoint (model-spec §2.3) with shapes from the config. Linears are FP8 in the
 * released checkpoints (quantization_config fp8); gate and bias F32 here (any float dtype loads).
 * @throws ModelLoadError for an invalid config (see miniMaxM2Dims)
 */
export function miniMaxM2Tensors(cfg: ModelConfig): TensorSpec[] {
  const d = miniMaxM2Dims(cfg);
  const lin: StoredAs = cfg.quantization?.quantMethod === 'fp8' ? 'fp8' : 'bf16';
  const D = d.hiddenSize;
  const specs: TensorSpec[] = [{ name: 'model.embed_tokens.weight', shape: [d.vocabSize, D], storedAs: 'bf16', init: 'embedding' }];
  for (let i = 0; i < d.numLayers; i++) {
    const p = `model.layers.${i}`;
    specs.push(
      { name: `${p}.input_layernorm.weight`, shape: [D], storedAs: 'bf16', init: 'norm' },
      { name: `${p}.self_attn.q_proj.weight`, shape: [d.numHeads * d.headDim, D], storedAs: lin, init: 'linear' },
      { name: `${p}.self_attn.k_proj.weight`, shape: [d.numKvHeads * d.headDim, D], storedAs: lin, init: 'linear' },
      { name: `${p}.self_attn.v_proj.weight`, shape: [d.numKvHeads * d.headDim, D], storedAs: lin, init: 'linear' },
      { name: `${p}.self_attn.o_proj.weight`, shape: [D, d.numHeads * d.headDim], storedAs: lin, init: 'linear' },
    );
    if (d.useQkNorm) {
      specs.push(
        { name: `${p}.self_attn.q_norm.weight`, shape: [d.numHeads * d.headDim], storedAs: 'bf16', init: 'norm' },
        { name: `${p}.self_attn.k_norm.weight`, shape: [d.numKvHeads * d.headDim], storedAs: 'bf16', init: 'norm' },
      );
    }
    specs.push(
      { name: `${p}.post_attention_layernorm.weight`, shape: [D], storedAs: 'bf16', init: 'norm' },
      { name: `${p}.block_sparse_moe.gate.weight`, shape: [d.numExperts, D], storedAs: 'f32', init: 'linear' },
    );
    if (d.useRoutingBias) specs.push({ name: `${p}.block_sparse_moe.e_score_correction_bias`, shape: [d.numExperts], storedAs: 'f32', init: 'router_bias' });
    for (let e = 0; e < d.numExperts; e++) {
      const q = `${p}.block_sparse_moe.experts.${e}`;
      specs.push(
        { name: `${q}.w1.weight`, shape: [d.intermediateSize, D], storedAs: lin, init: 'linear' },
        { name: `${q}.w2.weight`, shape: [D, d.intermediateSize], storedAs: lin, init: 'linear' },
        { name: `${q}.w3.weight`, shape: [d.intermediateSize, D], storedAs: lin, init: 'linear' },
      );
    }
  }
  specs.push({ name: 'model.norm.weight', shape: [D], storedAs: 'bf16', init: 'norm' });
  if (!d.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [d.vocabSize, D], storedAs: 'bf16', init: 'linear' });
  return specs;
}

/**
 * GQA attention with per-layer q/k RMSNorm over all heads and partial NeoX RoPE (model-spec §2.4). Under TP the rank
 * holds its query heads and KV heads (parallel.ts), q/k/v column-parallel, o_proj row-parallel + all-reduce, and the
 * q/k norms all-reduce their sums of squares (SGLang MiniMaxM2RMSNormTP).
 */
class MiniMaxM2Attention {
  private readonly qProj: Linear;
  private readonly kProj: Linear;
  private readonly vProj: Linear;
  private readonly oProj: Linear;
  private readonly qNorm: RMSNorm | null;
  private readonly kNorm: RMSNorm | null;
  private readonly attn: RadixAttention;
  private readonly numHeads: number;
  private readonly numKvHeads: number;

  /** @param kvLayer this layer's index in the rank's KV pool (layerId minus the stage's first layer under PP) */
  constructor(layerId: number, private readonly d: MiniMaxM2Dims, w: WeightStore, private readonly rotary: RotaryEmbedding, ops: Ops, private readonly par: ParallelGroups, kvLayer = layerId) {
    const p = `model.layers.${layerId}.self_attn`;
    this.qProj = new Linear(w.get(`${p}.q_proj.weight`), ops);
    this.kProj = new Linear(w.get(`${p}.k_proj.weight`), ops);
    this.vProj = new Linear(w.get(`${p}.v_proj.weight`), ops);
    this.oProj = new Linear(w.get(`${p}.o_proj.weight`), ops);
    this.qNorm = d.useQkNorm ? new RMSNorm(w.f32(`${p}.q_norm.weight`), d.rmsNormEps, ops) : null;
    this.kNorm = d.useQkNorm ? new RMSNorm(w.f32(`${p}.k_norm.weight`), d.rmsNormEps, ops) : null;
    this.numHeads = qHeadRange(d.numHeads, par).count;
    this.numKvHeads = kvHeadRange(d.numKvHeads, par).count;
    this.attn = new RadixAttention(kvLayer, this.numHeads, this.numKvHeads, d.headDim, d.headDim, 1 / Math.sqrt(d.headDim));
  }

  /**
   * @param x [numTokens, hiddenSize] f32 (after input_layernorm)
   * @param s the model's scratch buffers (the projections and q/k norms go there)
   * @returns [numTokens, hiddenSize] f32 (scratch 'attn.o')
   */
  forward(x: Float32Array, batch: ForwardBatch, backend: AttentionBackend, s: ScratchBuffers): Float32Array {
    const T = batch.numTokens;
    const { numHeads, numKvHeads } = this;
    const headDim = this.d.headDim;
    let q = this.qProj.forward(x, T, s.get('attn.q', T * numHeads * headDim)); // [T, Hq·hd]
    let k = this.kProj.forward(x, T, s.get('attn.k', T * numKvHeads * headDim)); // [T, Hkv·hd]
    const v = this.vProj.forward(x, T, s.get('attn.v', T * numKvHeads * headDim)); // [T, Hkv·hd]
    if (this.qNorm && this.kNorm && this.par.tpSize > 1) {
      tpRmsNormInPlace(this.par, q, T, this.qNorm.weight, this.qNorm.eps); // the RMS of all heads: sums all-reduced
      tpRmsNormInPlace(this.par, k, T, this.kNorm.weight, this.kNorm.eps);
    } else if (this.qNorm && this.kNorm) {
      q = this.qNorm.forward(q, T, s.get('attn.qNorm', q.length)); // one RMS over all Hq·hd values of the token
      k = this.kNorm.forward(k, T, s.get('attn.kNorm', k.length));
    }
    this.rotary.apply(q, T, batch.positions, { numHeads, headDim });
    this.rotary.apply(k, T, batch.positions, { numHeads: numKvHeads, headDim });
    const o = this.attn.forward(q, k, v, batch, backend); // [T, Hq·hd]
    return tpAllReduce(this.par, this.oProj.forward(o, T, s.get('attn.o', T * this.d.hiddenSize)));
  }
}

/**
 * Sigmoid-routed MoE, bias for selection only, renormalized, no shared expert (model-spec §2.4 MoE). Under TP/EP the
 * router is replicated (every rank selects the same experts), the rank holds its EP block of experts with its moe_tp
 * share of their FFN width, and the partial outputs are all-reduced over the TP group (SGLang moe_a2a_backend none).
 */
class MiniMaxM2SparseMoe {
  private readonly gate: Linear;
  private readonly bias: Float32Array | null;
  private readonly experts: FusedMoE;

  constructor(layerId: number, private readonly d: MiniMaxM2Dims, w: WeightStore, private readonly ops: Ops, private readonly par: ParallelGroups) {
    const p = `model.layers.${layerId}.block_sparse_moe`;
    this.gate = new Linear(w.get(`${p}.gate.weight`), ops);
    this.bias = d.useRoutingBias ? w.f32(`${p}.e_score_correction_bias`) : null;
    const experts: (ExpertWeights | null)[] = [];
    const local = expertRange(d.numExperts, par);
    for (let e = 0; e < d.numExperts; e++) {
      const here = e >= local.start && e < local.start + local.count;
      experts.push(here ? { gate: w.get(`${p}.experts.${e}.w1.weight`), up: w.get(`${p}.experts.${e}.w3.weight`), down: w.get(`${p}.experts.${e}.w2.weight`) } : null);
    }
    this.experts = new FusedMoE(experts, d.hiddenSize, ops);
  }

  /**
   * @param x [numTokens, hiddenSize] f32 (after post_attention_layernorm)
   * @param s the model's scratch buffers (router logits and the output go there)
   * @returns out [numTokens, hiddenSize] f32 (scratch 'moe.out') and the routed expert ids [numTokens, topK] i32
   */
  forward(x: Float32Array, numTokens: number, s: ScratchBuffers): { out: Float32Array; topKIds: Int32Array } {
    const logits = this.gate.forward(x, numTokens, s.get('moe.routerLogits', numTokens * this.d.numExperts)); // [T, E] f32 router logits
    const { topKIds, topKWeights } = selectExperts(logits, numTokens, this.d.numExperts, {
      topK: this.d.topK,
      scoringFunc: this.d.scoringFunc,
      correctionBias: this.bias,
      renormalize: true,
      routedScalingFactor: this.d.routedScalingFactor,
    }, this.ops);
    const out = this.experts.forward(x, numTokens, topKIds, topKWeights, this.d.topK, s.get('moe.out', numTokens * this.d.hiddenSize));
    return { out: tpAllReduce(this.par, out), topKIds };
  }
}

/** One decoder layer: x += Attn(RMSNorm(x)); x += MoE(RMSNorm(x)). */
class MiniMaxM2DecoderLayer {
  readonly inputLayernorm: RMSNorm;
  readonly selfAttn: MiniMaxM2Attention;
  readonly postAttentionLayernorm: RMSNorm;
  readonly blockSparseMoe: MiniMaxM2SparseMoe;

  constructor(layerId: number, d: MiniMaxM2Dims, w: WeightStore, rotary: RotaryEmbedding, ops: Ops, par: ParallelGroups, kvLayer = layerId) {
    const p = `model.layers.${layerId}`;
    this.inputLayernorm = new RMSNorm(w.f32(`${p}.input_layernorm.weight`), d.rmsNormEps, ops);
    this.selfAttn = new MiniMaxM2Attention(layerId, d, w, rotary, ops, attnGroupsOf(par), kvLayer); // attn_tp under DP-attention
    this.postAttentionLayernorm = new RMSNorm(w.f32(`${p}.post_attention_layernorm.weight`), d.rmsNormEps, ops);
    this.blockSparseMoe = new MiniMaxM2SparseMoe(layerId, d, w, ops, par);
  }
}

/** The MiniMax-M2 causal LM over the paged KV cache (buffers 'k' and 'v', width numKvHeads·headDim, per layer). */
export class MiniMaxM2ForCausalLM implements CausalLM {
  readonly dims: MiniMaxM2Dims;
  private readonly ops: Ops;
  /** null on a pipeline stage that neither embeds nor ties the LM head to the embedding. */
  private readonly embedTokens: VocabEmbedding | null;
  /** This stage's decoder layers (every layer without PP); index = KV pool layer. */
  private readonly layers: MiniMaxM2DecoderLayer[] = [];
  /** Final norm and LM head: on the last stage only. */
  private readonly norm: RMSNorm | null;
  private readonly lmHead: ParallelLMHead | null;
  private readonly logitsProcessor: LogitsProcessor;
  private readonly backend: AttentionBackend;
  /** Intermediate activations of a forward (one forward at a time; never returned). */
  private readonly scratch = new ScratchBuffers();

  /** Per-layer FP8 KV-cache scales (checkpoint k_scale / v_scale, else 1). */
  private readonly kvScales: readonly { k: number; v: number }[];

  /**
   * @param weights every tensor of miniMaxM2Tensors(config), loaded
   * @param backend attention backend (default: CpuAttentionBackend over the same ops)
   * @param parallel this rank's TP/EP place (weights: this rank's shards, miniMaxM2Shards)
   * @param stage this rank's pipeline stage (undefined: the whole model)
   * @throws ModelLoadError for an invalid config or a missing weight; InvalidRequestError for a layout the config
   *   does not split into
   */
  constructor(readonly config: ModelConfig, weights: WeightStore, ops: Ops, backend?: AttentionBackend, readonly parallel: ParallelGroups = SINGLE_RANK, readonly stage?: PipelineStage) {
    this.dims = miniMaxM2Dims(config);
    this.ops = ops;
    const d = this.dims;
    const par = parallel;
    const pa = attnGroupsOf(par); // embedding, attention and lm_head: the attn_tp ranks under DP-attention
    const first = isFirstStage(stage);
    const last = isLastStage(stage);
    const [from, to] = stage ? [stage.startLayer, stage.endLayer] : [0, d.numLayers];
    this.embedTokens = first || (last && d.tieWordEmbeddings) ? new VocabEmbedding(weights.get('model.embed_tokens.weight'), ops, pa, d.vocabSize) : null;
    const rotary = RotaryEmbedding.standard(d.rotaryDim, d.ropeTheta, 'neox', ops);
    for (let i = from; i < to; i++) this.layers.push(new MiniMaxM2DecoderLayer(i, d, weights, rotary, ops, par, i - from));
    this.norm = last ? new RMSNorm(weights.f32('model.norm.weight'), d.rmsNormEps, ops) : null;
    // (under DP-attention the LM head's vocabulary is split over the whole TP group: lmHeadGroupsOf)
    this.lmHead = last ? new ParallelLMHead(weights.get(d.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'), ops, lmHeadGroupsOf(par, d.tieWordEmbeddings), d.vocabSize) : null;
    this.logitsProcessor = new LogitsProcessor(d.hiddenSize);
    this.backend = backend ?? new CpuAttentionBackend(ops);
    const scale = (l: number, which: 'k' | 'v'): number => (weights.has(kvScaleName(l, which)) ? weights.f32(kvScaleName(l, which))[0] : 1);
    this.kvScales = Array.from({ length: to - from }, (_, i) => ({ k: scale(from + i, 'k'), v: scale(from + i, 'v') }));
  }

  /**
   * The KV pool: per layer 'k' and 'v' rows of this rank's KV heads × headDim, in the KV dtype's codec — FP8 / BF16
   * with the layer's k_scale / v_scale from the checkpoint when present, else 1.0 (SGLang's RadixAttention k_scale / v_scale).
   */
  kvPoolLayout(kvCacheDtype: KvCacheDtype = 'auto'): KVPoolLayout {
    const width = kvHeadRange(this.dims.numKvHeads, attnGroupsOf(this.parallel)).count * this.dims.headDim; // this rank's KV heads
    const codecs = (which: 'k' | 'v') => this.kvScales.map((s) => scalarKvCodec(kvCacheDtype, s[which]));
    return { numLayers: this.layers.length, buffers: [{ name: 'k', width, codec: codecs('k') }, { name: 'v', width, codec: codecs('v') }] };
  }

  /**
   * One step over a flat batch (extend, decode or mixed: every row is handled by the same per-token rule).
   * @returns logits [numLogitRows, vocabSize] f32 (+ hidden states / routed experts when asked)
   * @throws InvalidRequestError for a token id outside the vocabulary
   */
  forward(batch: ForwardBatch): ForwardOutput {
    const T = batch.numTokens;
    const V = this.dims.vocabSize;
    for (let t = 0; t < T; t++) {
      const id = batch.inputIds[t];
      if (id < 0 || id >= V) throw new InvalidRequestError(`input id ${id} at row ${t} is outside the vocabulary [0, ${V})`, 'input_ids');
    }
    const dp = this.parallel.dp;
    if (T > 0) this.backend.initForwardMetadata(batch);
    const routed: Int32Array[] | undefined = batch.captureRoutedExperts ? [] : undefined;
    const s = this.scratch;
    const D = this.dims.hiddenSize;
    const h = !isFirstStage(this.stage) ? stageInput(batch, D) // [T, D] residual stream
      : T > 0 ? this.embedTokens!.forward(batch.inputIds, s.get('residual', T * D)) : new Float32Array(0);
    for (const layer of this.layers) {
      if (T > 0) {
        const a = layer.inputLayernorm.forward(h, T, s.get('attn.in', T * D));
        this.ops.add(h, layer.selfAttn.forward(a, batch, this.backend, s), h);
      }
      const m = T > 0 ? layer.postAttentionLayernorm.forward(h, T, s.get('moe.in', T * D)) : h;
      if (dp) {
        // DP-attention: the MoE runs over every group's tokens (an idle group, T = 0, still takes part)
        const all = dp.gather(m, D);
        const { out, topKIds } = layer.blockSparseMoe.forward(all, dp.totalTokens, s);
        if (T > 0) this.ops.add(h, dp.scatter(out, D), h);
        const k = topKIds.length / Math.max(1, dp.totalTokens);
        routed?.push(topKIds.slice(dp.offset * k, (dp.offset + T) * k));
        continue;
      }
      const { out, topKIds } = layer.blockSparseMoe.forward(m, T, s);
      this.ops.add(h, out, h);
      routed?.push(topKIds);
    }
    if (!isLastStage(this.stage)) return { logits: new Float32Array(0), ppHiddenOut: h };
    if (T === 0) {
      // an idle batch (DP-attention) has no rows; it still joins the LM head's gather of every group's rows
      if (this.lmHead!.joinsIdleSteps) this.logitsProcessor.forward(h, batch, this.lmHead!, this.norm!);
      return { logits: new Float32Array(0) };
    }
    const res = this.logitsProcessor.forward(h, batch, this.lmHead!, this.norm!);
    return routed ? { ...res, routedExperts: routed } : res;
  }
}

/**
 * Sizes of the `bench` preset of `make-tiny --arch minimax-m2` on top of 'tiny': a few hundred million parameters, FP8
 * block weights, the shape of the llama.cpp peer's bench model (shared/tools/llamacpp-peer/README.md).
 */
export const MINIMAX_M2_BENCH_SIZES: Readonly<Record<string, unknown>> = Object.freeze({
  hidden_size: 1024, num_hidden_layers: 8, num_attention_heads: 16, num_key_value_heads: 4, head_dim: 128, rotary_dim: 64,
  num_local_experts: 32, num_experts_per_tok: 4, intermediate_size: 512, vocab_size: 32000, attn_type_list: Array(8).fill(1),
});

/**
 * config.json for `make-tiny --arch minimax-m2` (every released field, sizes shrunk; model-spec §2.1).
 * @param preset 'tiny' (a few hundred thousand parameters, tests) or 'bench' (MINIMAX_M2_BENCH_SIZES, benchmarks)
 * @throws InvalidRequestError for an unknown preset
 */
function tinyConfig(preset: string): Record<string, unknown> {
  if (preset !== 'tiny' && preset !== 'bench') throw new InvalidRequestError(`unknown --preset '${preset}' for minimax-m2 (known: tiny, bench)`, 'preset');
  const tiny = miniMaxTinyPreset();
  return preset === 'bench' ? { ...tiny, ...structuredClone(MINIMAX_M2_BENCH_SIZES) } : tiny;
}

/** The 'tiny' preset's config.json. */
function miniMaxTinyPreset(): Record<string, unknown> {
  return {
    architectures: ['MiniMaxM2ForCausalLM'],
    attn_type_list: [1, 1],
    auto_map: { AutoConfig: 'configuration_minimax_m2.MiniMaxM2Config', AutoModelForCausalLM: 'modeling_minimax_m2.MiniMaxM2ForCausalLM' },
    bos_token_id: 1,
    eos_token_id: 2,
    head_dim: 40,
    hidden_act: 'silu',
    hidden_size: 160,
    intermediate_size: 80,
    max_position_embeddings: 196608,
    model_type: 'minimax_m2',
    mtp_transformer_layers: 1,
    num_attention_heads: 8,
    num_experts_per_tok: 3,
    num_hidden_layers: 2,
    num_key_value_heads: 2,
    num_local_experts: 16,
    num_mtp_modules: 3,
    output_router_logits: false,
    qk_norm_type: 'per_layer',
    quantization_config: {
      activation_scheme: 'dynamic', fmt: 'float8_e4m3fn', quant_method: 'fp8', weight_block_size: [128, 128],
      modules_to_not_convert: ['gate', 'e_score_correction_bias', 'lm_head'],
    },
    rms_norm_eps: 1e-6,
    rope_theta: 5000000,
    rotary_dim: 20,
    router_aux_loss_coef: 0.001,
    router_jitter_noise: 0.0,
    scoring_func: 'sigmoid',
    shared_intermediate_size: 0,
    tie_word_embeddings: false,
    torch_dtype: 'bfloat16',
    transformers_version: '4.46.1',
    use_cache: true,
    use_mtp: true,
    use_qk_norm: true,
    use_routing_bias: true,
    vocab_size: 512,
  };
}

/** Registry entry of MiniMaxM2ForCausalLM. */
export const MINIMAX_M2_DEFINITION: ModelDefinition = {
  architectures: ['MiniMaxM2ForCausalLM'],
  tinyArchNames: ['minimax-m2'],
  expectedTensors: miniMaxM2Tensors,
  pipelineStages: true,
  create: (config: ModelConfig, weights: WeightStore, options: CreateModelOptions) => new MiniMaxM2ForCausalLM(config, weights, options.ops, undefined, options.parallel, options.stage),
  shardTensors: miniMaxM2Shards,
  tinyConfig,
};

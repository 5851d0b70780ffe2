// DeepSeek-V3.2 (`DeepseekV32ForCausalLM`: MLA + DSA lightning indexer + grouped MoE + MTP layer) and DeepSeek-V3
// (`DeepseekV3ForCausalLM`: the same without the indexer, dense MLA). Builds the layers from loaded weights and runs
// the forward pass and the MTP (nextn) layer. Knows nothing of scheduling. The config.json fields read and the
// checkpoint tensor list are in deepseek_v32_config.ts.
// Sources: model-spec.md §3; upstream python/sglang/srt/models/deepseek_v2.py, deepseek_nextn.py.
import { InvalidRequestError, ModelLoadError } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import type { ModelConfig } from '../config/index.js';
import type { ExpertWeights, Ops, SparseKeys, Weight } from '../kernels/index.js';
import {
  DsaIndexer, FusedMoE, LogitsProcessor, MlaAttention, ParallelLMHead, SINGLE_RANK, VocabEmbedding,
  attnGroupsOf, biasedGroupedTopK, deepseekRopeParams, deepseekRotaryTable, deepseekSoftmaxScale, expertRange, isFirstStage, isLastStage,
  lmHeadGroupsOf, qHeadRange, stageInput, tpAllReduce,
} from '../layers/index.js';
import type { ForwardBatch, ForwardOutput, GroupedTopKConfig, MlaExtendForm, ParallelGroups, PipelineStage } from '../layers/index.js';
import type { KVPoolLayout } from '../mem_cache/index.js';
import type { CausalLM, CreateModelOptions, ModelDefinition } from './model_base.js';
import { deepseekExpectedTensors, deepseekKvPoolLayout, isMoeLayer, layerReusesTopK, parseDeepseekConfig } from './deepseek_v32_config.js';
import type { DeepseekConfig } from './deepseek_v32_config.js';
import { deepseekShards } from './tp_shards.js';
import type { WeightStore } from './weights.js';

// ---------------------------------------------------------------------------------------------------------------
// Layers

/**
 * SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)) (model-spec.md §1.6). Under TP a dense MLP is column-parallel gate/up and
 * row-parallel down + all-reduce (`p`); the shared experts are replicated (p = SINGLE_RANK, no reduction).
 */
class GatedMlp {
  constructor(private readonly ops: Ops, private readonly w: ExpertWeights, private readonly p: ParallelGroups = SINGLE_RANK) {}

  /** @param x [numTokens, D] f32 @returns [numTokens, D] f32 */
  forward(x: Float32Array, numTokens: number): Float32Array {
    const gate = this.ops.matmul(x, numTokens, this.w.gate);
    const up = this.ops.matmul(x, numTokens, this.w.up);
    return tpAllReduce(this.p, this.ops.matmul(this.ops.siluAndMul(gate, up, gate), numTokens, this.w.down));
  }
}

/**
 * Routed experts (grouped top-k router in f32) plus the shared experts (model-spec.md §3.9). Under TP/EP the router is
 * replicated, the rank runs its experts' shares and the routed sum is all-reduced before the (replicated) shared
 * experts are added, the order of the one-rank sum.
 */
class DeepseekMoE {
  constructor(
    private readonly ops: Ops,
    private readonly gate: Weight,
    private readonly bias: Float32Array | null,
    private readonly experts: FusedMoE,
    private readonly shared: GatedMlp | null,
    private readonly routing: GroupedTopKConfig,
    private readonly p: ParallelGroups,
  ) {}

  /** @param x [numTokens, D] f32 @returns y [numTokens, D] f32 and the routed ids [numTokens, topK] */
  forward(x: Float32Array, numTokens: number): { y: Float32Array; topKIds: Int32Array } {
    const routerLogits = this.ops.matmul(x, numTokens, this.gate); // [T, E] f32
    const { topKIds, topKWeights } = biasedGroupedTopK(routerLogits, numTokens, this.experts.numExperts, this.bias, this.routing);
    const y = tpAllReduce(this.p, this.experts.forward(x, numTokens, topKIds, topKWeights, this.routing.topK));
    if (this.shared) this.ops.add(y, this.shared.forward(x, numTokens), y);
    return { y, topKIds };
  }
}

/** Observer of per-row discrete decisions (golden tests, debugging). */
export interface DeepseekDecisionObserver {
  /** Selected key positions (ascending) of token row `row` in decoder layer `layer` (MTP layer: numLayers). */
  indexer?(layer: number, row: number, keys: Int32Array): void;
}

/** One decoder layer: RMSNorm → MLA(+DSA) → residual → RMSNorm → dense MLP or MoE → residual (model-spec.md §3.6). */
class DeepseekDecoderLayer {
  constructor(
    private readonly ops: Ops,
    readonly layerId: number,
    private readonly inputLayernorm: Float32Array,
    private readonly attn: MlaAttention,
    private readonly postAttentionLayernorm: Float32Array,
    private readonly mlp: GatedMlp | DeepseekMoE,
    private readonly eps: number,
    private readonly p: ParallelGroups,
  ) {}

  /**
   * @param x [numTokens, D] f32 residual stream, updated in place
   * @param sharedKeys the previous layer's DSA key selection, attended by a layer that reuses it (Index Cache)
   * @returns topKIds: the routed expert ids [numTokens, topK] (null for a dense layer); keys: the DSA key selection
   *   this layer attended (undefined without DSA)
   */
  forward(
    x: Float32Array, batch: ForwardBatch, kvLayer: number, observer: DeepseekDecisionObserver | null, sharedKeys?: SparseKeys,
  ): { topKIds: Int32Array | null; keys: SparseKeys | undefined } {
    const T = batch.numTokens;
    const D = this.inputLayernorm.length;
    const dp = this.p.dp;
    let keys: SparseKeys | undefined;
    if (T > 0) { // an idle batch (DP-attention, T = 0) has no attention rows; it still joins the MLP below
      const a = this.ops.rmsNorm(x, T, D, this.inputLayernorm, this.eps);
      const onSel = observer?.indexer ? (row: number, keys: Int32Array): void => observer.indexer!(this.layerId, row, keys) : undefined;
      const r = this.attn.forward(a, batch, kvLayer, onSel, sharedKeys);
      keys = r.keys;
      this.ops.add(x, tpAllReduce(attnGroupsOf(this.p), r.out), x); // o_proj is row-parallel (over attn_tp under DP-attention)
    }
    const m = T > 0 ? this.ops.rmsNorm(x, T, D, this.postAttentionLayernorm, this.eps) : x;
    if (dp) {
      // DP-attention: the MLP / MoE runs over every group's tokens, each group keeps its rows (dp_gather / dp_scatter)
      const all = dp.gather(m, D);
      if (this.mlp instanceof DeepseekMoE) {
        const { y, topKIds } = this.mlp.forward(all, dp.totalTokens);
        if (T > 0) this.ops.add(x, dp.scatter(y, D), x);
        const k = topKIds.length / Math.max(1, dp.totalTokens);
        return { topKIds: topKIds.slice(dp.offset * k, (dp.offset + T) * k), keys };
      }
      const y = this.mlp.forward(all, dp.totalTokens);
      if (T > 0) this.ops.add(x, dp.scatter(y, D), x);
      return { topKIds: null, keys };
    }
    if (this.mlp instanceof DeepseekMoE) {
      const { y, topKIds } = this.mlp.forward(m, T);
      this.ops.add(x, y, x);
      return { topKIds, keys };
    }
    this.ops.add(x, this.mlp.forward(m, T), x);
    return { topKIds: null, keys };
  }
}

/** Options of createDeepseekModel beyond the backend. */
export interface DeepseekModelOptions extends CreateModelOptions {
  /** MLA form for extend rows (decode rows always use the absorbed form). Default 'absorbed'. */
  readonly mlaExtendForm?: MlaExtendForm;
}

/**
 * The MTP (nextn) layer (model-spec.md §3.10.2): `x = eh_proj([enorm(embed(t)) | hnorm(h)])`, one MoE decoder layer
 * with its own KV cache (and DSA indexer), `shared_head.norm`, the target's lm_head.
 */
export class DeepseekMtpLayer {
  constructor(
    private readonly ops: Ops,
    private readonly cfg: DeepseekConfig,
    private readonly embed: VocabEmbedding,
    private readonly enorm: Float32Array,
    private readonly hnorm: Float32Array,
    private readonly ehProj: Weight,
    private readonly layer: DeepseekDecoderLayer,
    private readonly sharedHeadNorm: Float32Array,
    private readonly lmHead: ParallelLMHead,
    private readonly logits: LogitsProcessor,
  ) {}

  /** The MTP layer's own KV pool: one layer with the same buffers as the target's. */
  kvPoolLayout(kvCacheDtype: KvCacheDtype = 'auto'): KVPoolLayout {
    return deepseekKvPoolLayout(this.cfg, 1, kvCacheDtype);
  }

  /**
   * Runs the draft layer over a batch whose token i pairs `batch.inputIds[i]` (the next token) with `hiddenIn` row i
   * (the target's final-norm hidden state at the previous position). `batch.kvPool` must come from kvPoolLayout().
   * @param hiddenIn [numTokens, hiddenSize] f32
   * @returns logits of batch.logitRows (+ the shared_head.norm hidden states when captureHiddenStates)
   * @throws ModelLoadError never; InternalError on inconsistent sizes
   */
  forward(batch: ForwardBatch, hiddenIn: Float32Array, observer: DeepseekDecisionObserver | null = null): ForwardOutput {
    const ops = this.ops;
    const T = batch.numTokens;
    const D = this.cfg.hiddenSize;
    const eps = this.cfg.rmsNormEps;
    ensureLocs(batch);
    const e = ops.rmsNorm(this.embed.forward(batch.inputIds), T, D, this.enorm, eps);
    const h = ops.rmsNorm(hiddenIn, T, D, this.hnorm, eps);
    const u = new Float32Array(T * 2 * D); // [T, 2D] = [enorm(e) | hnorm(h)], embedding half first
    for (let t = 0; t < T; t++) {
      u.set(e.subarray(t * D, (t + 1) * D), t * 2 * D);
      u.set(h.subarray(t * D, (t + 1) * D), t * 2 * D + D);
    }
    const x = ops.matmul(u, T, this.ehProj);
    const experts = this.layer.forward(x, batch, 0, observer).topKIds;
    const out = this.logits.forward(ops.rmsNorm(x, T, D, this.sharedHeadNorm, eps), batch, this.lmHead);
    return batch.captureRoutedExperts ? { ...out, routedExperts: [experts] } : out;
  }
}

/** DeepSeek-V3 / V3.2 causal LM. */
export class DeepseekV32ForCausalLM implements CausalLM {
  /** Set to observe indexer selections (tests, debugging). */
  observer: DeepseekDecisionObserver | null = null;

  constructor(
    readonly config: ModelConfig,
    readonly deepseek: DeepseekConfig,
    private readonly ops: Ops,
    /** null on a pipeline stage that neither embeds nor ties the LM head to the embedding. */
    private readonly embed: VocabEmbedding | null,
    /** This stage's decoder layers (every layer without PP); index = KV pool layer. */
    private readonly layers: readonly DeepseekDecoderLayer[],
    /** Final norm, LM head: on the last stage only (null before it). */
    private readonly norm: Float32Array | null,
    private readonly lmHead: ParallelLMHead | null,
    private readonly logits: LogitsProcessor,
    /** The MTP layer, or null when the checkpoint has none (or under PP). */
    readonly mtp: DeepseekMtpLayer | null,
    /** The pipeline stage (undefined: the whole model). */
    readonly stage?: PipelineStage,
  ) {}

  kvPoolLayout(kvCacheDtype: KvCacheDtype = 'auto'): KVPoolLayout {
    return deepseekKvPoolLayout(this.deepseek, this.layers.length, kvCacheDtype);
  }

  /**
   * One forward step (model-spec.md §3.6): embedding, decoder layers, final RMSNorm, logits of batch.logitRows. Under PP
   * a stage runs its layers from the embedding (first stage) or batch.ppHiddenIn, and a stage before the last returns
   * the residual stream (ppHiddenOut) instead of logits.
   * @throws InternalError on inconsistent batch geometry (a ppHiddenIn of the wrong size included)
   */
  forward(batch: ForwardBatch): ForwardOutput {
    const T = batch.numTokens;
    if (T > 0) ensureLocs(batch);
    const x = isFirstStage(this.stage) ? (T > 0 ? this.embed!.forward(batch.inputIds) : new Float32Array(0)) : stageInput(batch, this.deepseek.hiddenSize); // [T, D]
    const routed: (Int32Array | null)[] = [];
    let keys: SparseKeys | undefined; // the last DSA selection, for layers that reuse it (Index Cache)
    for (let l = 0; l < this.layers.length; l++) {
      const r = this.layers[l].forward(x, batch, l, this.observer, keys);
      routed.push(r.topKIds);
      keys = r.keys;
    }
    if (!isLastStage(this.stage)) return { logits: new Float32Array(0), ppHiddenOut: x };
    if (T === 0) {
      // an idle batch (DP-attention) has no rows; it still joins the LM head's gather of every group's rows
      if (this.lmHead!.joinsIdleSteps) this.logits.forward(x, batch, this.lmHead!);
      return { logits: new Float32Array(0) };
    }
    const h = this.ops.rmsNorm(x, T, this.deepseek.hiddenSize, this.norm!, this.deepseek.rmsNormEps);
    const out = this.logits.forward(h, batch, this.lmHead!);
    const withHidden = batch.captureAllHidden ? { ...out, allHiddenStates: h } : out;
    return batch.captureRoutedExperts ? { ...withHidden, routedExperts: routed } : withHidden;
  }
}

/** Commits pool memory for every loc this step writes. */
function ensureLocs(batch: ForwardBatch): void {
  let maxLoc = 0;
  for (let t = 0; t < batch.numTokens; t++) maxLoc = Math.max(maxLoc, batch.outCacheLoc[t]);
  batch.kvPool.ensureLocs(maxLoc + 1);
}

function buildLayer(cfg: DeepseekConfig, layerId: number, w: WeightStore, opts: DeepseekModelOptions): DeepseekDecoderLayer {
  const ops = opts.ops;
  const p = `model.layers.${layerId}.`;
  const table = deepseekRotaryTable(cfg.mla.qkRopeHeadDim, cfg.ropeTheta, cfg.ropeScaling);
  let indexer: DsaIndexer | null = null;
  if (cfg.isDsa && cfg.qLoraRank !== null && !layerReusesTopK(cfg, layerId)) {
    indexer = new DsaIndexer(ops, {
      wqB: w.get(p + 'self_attn.indexer.wq_b.weight'),
      wk: w.get(p + 'self_attn.indexer.wk.weight'),
      kNormWeight: w.f32(p + 'self_attn.indexer.k_norm.weight'),
      kNormBias: w.f32(p + 'self_attn.indexer.k_norm.bias'),
      weightsProj: w.get(p + 'self_attn.indexer.weights_proj.weight'),
    }, {
      hiddenSize: cfg.hiddenSize, qLoraRank: cfg.qLoraRank, numHeads: cfg.indexNHeads, headDim: cfg.indexHeadDim,
      ropeDim: cfg.mla.qkRopeHeadDim, topK: cfg.indexTopK,
    }, deepseekRopeParams(table, 'neox'));
  }
  const hasQLora = cfg.qLoraRank !== null;
  const par = opts.parallel ?? SINGLE_RANK;
  const pa = attnGroupsOf(par); // heads over attn_tp under DP-attention
  const attn = new MlaAttention(ops, {
    qAProj: hasQLora ? w.get(p + 'self_attn.q_a_proj.weight') : null,
    qALayernorm: hasQLora ? w.f32(p + 'self_attn.q_a_layernorm.weight') : null,
    qBProj: w.get(p + (hasQLora ? 'self_attn.q_b_proj.weight' : 'self_attn.q_proj.weight')),
    kvAProjWithMqa: w.get(p + 'self_attn.kv_a_proj_with_mqa.weight'),
    kvALayernorm: w.f32(p + 'self_attn.kv_a_layernorm.weight'),
    kvBProj: w.get(p + 'self_attn.kv_b_proj.weight'),
    oProj: w.get(p + 'self_attn.o_proj.weight'),
  }, { ...cfg.mla, numHeads: qHeadRange(cfg.mla.numHeads, pa).count }, {
    hiddenSize: cfg.hiddenSize,
    rmsNormEps: cfg.rmsNormEps,
    scale: deepseekSoftmaxScale(cfg.mla.qkNopeHeadDim + cfg.mla.qkRopeHeadDim, cfg.ropeScaling),
    rope: deepseekRopeParams(table, 'interleaved'),
    extendForm: opts.mlaExtendForm ?? 'absorbed',
    ...(par.cp ? { cp: par.cp } : {}), // prefill CP (interleave): extend batches split token-wise
  }, indexer);
  const expert = (q: string): ExpertWeights => ({ gate: w.get(`${q}.gate_proj.weight`), up: w.get(`${q}.up_proj.weight`), down: w.get(`${q}.down_proj.weight`) });
  let mlp: GatedMlp | DeepseekMoE;
  if (isMoeLayer(cfg, layerId)) {
    const experts: (ExpertWeights | null)[] = [];
    const local = expertRange(cfg.numRoutedExperts, par);
    for (let e = 0; e < cfg.numRoutedExperts; e++) experts.push(e >= local.start && e < local.start + local.count ? expert(`${p}mlp.experts.${e}`) : null);
    mlp = new DeepseekMoE(
      ops,
      w.get(p + 'mlp.gate.weight'),
      cfg.hasCorrectionBias ? w.f32(p + 'mlp.gate.e_score_correction_bias') : null,
      new FusedMoE(experts, cfg.hiddenSize, ops),
      cfg.numSharedExperts > 0 ? new GatedMlp(ops, expert(`${p}mlp.shared_experts`)) : null,
      cfg.routing,
      par,
    );
  } else {
    mlp = new GatedMlp(ops, expert(`${p}mlp`), par);
  }
  return new DeepseekDecoderLayer(ops, layerId, w.f32(p + 'input_layernorm.weight'), attn, w.f32(p + 'post_attention_layernorm.weight'), mlp, cfg.rmsNormEps, par);
}

/**
 * Builds the model from loaded weights (every expected tensor present; the MTP layer when the store holds it).
 * @throws ModelLoadError for an unsupported config or a missing tensor
 */
export function createDeepseekModel(config: ModelConfig, weights: WeightStore, opts: DeepseekModelOptions): DeepseekV32ForCausalLM {
  const cfg = parseDeepseekConfig(config);
  const ops = opts.ops;
  const pa = attnGroupsOf(opts.parallel ?? SINGLE_RANK); // the attn_tp ranks under DP-attention
  const stage = opts.stage;
  const first = isFirstStage(stage);
  const last = isLastStage(stage);
  const [from, to] = stage ? [stage.startLayer, stage.endLayer] : [0, cfg.numLayers];
  if (stage && from > 0 && from < to && layerReusesTopK(cfg, from)) {
    throw new InvalidRequestError(`decoder layer ${from} reuses layer ${from - 1}'s DSA top-k (Index Cache), which is on the previous pipeline stage: set SGLANG_PP_LAYER_PARTITION so that stage ${stage.ppRank} starts on a layer with its own indexer`, 'pp_size');
  }
  const embed = first || (last && cfg.tieWordEmbeddings) ? new VocabEmbedding(weights.get('model.embed_tokens.weight'), ops, pa, cfg.vocabSize) : null;
  // (under DP-attention the LM head's vocabulary is split over the whole TP group: lmHeadGroupsOf)
  const lmHead = last ? new ParallelLMHead(weights.get(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'), ops, lmHeadGroupsOf(opts.parallel ?? SINGLE_RANK, cfg.tieWordEmbeddings), cfg.vocabSize) : null;
  const logits = new LogitsProcessor(cfg.hiddenSize);
  const layers: DeepseekDecoderLayer[] = [];
  for (let l = from; l < to; l++) layers.push(buildLayer(cfg, l, weights, opts));
  let mtp: DeepseekMtpLayer | null = null;
  const mp = `model.layers.${cfg.numLayers}.`;
  if (!stage && cfg.numNextnLayers > 0 && weights.has(mp + 'eh_proj.weight')) {
    mtp = new DeepseekMtpLayer(
      ops, cfg, embed!, weights.f32(mp + 'enorm.weight'), weights.f32(mp + 'hnorm.weight'), weights.get(mp + 'eh_proj.weight'),
      buildLayer(cfg, cfg.numLayers, weights, opts), weights.f32(mp + 'shared_head.norm.weight'), lmHead!, logits,
    );
  }
  return new DeepseekV32ForCausalLM(config, cfg, ops, embed, layers, last ? weights.f32('model.norm.weight') : null, lmHead, logits, mtp, stage);
}

/** The MTP layer of a loaded model, or null when the model has none (not DeepSeek, or no layer in the checkpoint). */
export function mtpLayerOf(model: CausalLM): DeepseekMtpLayer | null {
  return model instanceof DeepseekV32ForCausalLM ? model.mtp : null;
}

/**
 * Sizes of the `bench` preset of `make-tiny --arch deepseek-v32 | deepseek-v3` on top of 'tiny' (a few hundred million
 * parameters, FP8 block weights); the index_* fields apply to deepseek-v32 only.
 */
export const DEEPSEEK_BENCH_SIZES: Readonly<Record<string, unknown>> = Object.freeze({
  hidden_size: 1024, num_hidden_layers: 8, num_attention_heads: 16, q_lora_rank: 384, kv_lora_rank: 256, qk_nope_head_dim: 64,
  qk_rope_head_dim: 32, v_head_dim: 64, n_routed_experts: 32, num_experts_per_tok: 4, n_group: 4, topk_group: 2,
  moe_intermediate_size: 512, intermediate_size: 2048, vocab_size: 32000, index_head_dim: 64, index_n_heads: 16, index_topk: 256,
});

/**
 * Tiny config for `make-tiny --arch deepseek-v32 | deepseek-v3` (every released field, shrunk sizes).
 * @param preset 'tiny' (tests) or 'bench' (DEEPSEEK_BENCH_SIZES on top, benchmarks)
 * @throws InvalidRequestError for an unknown preset
 */
function deepseekTinyConfig(isV32: boolean, preset: string): Record<string, unknown> {
  if (preset !== 'tiny' && preset !== 'bench') throw new InvalidRequestError(`unknown --preset '${preset}' for ${isV32 ? 'deepseek-v32' : 'deepseek-v3'} (known: tiny, bench)`, 'preset');
  const cfg: Record<string, unknown> = {
    architectures: [isV32 ? 'DeepseekV32ForCausalLM' : 'DeepseekV3ForCausalLM'],
    model_type: isV32 ? 'deepseek_v32' : 'deepseek_v3',
    attention_bias: false, attention_dropout: 0.0, bos_token_id: 0, eos_token_id: 1, ep_size: 1,
    first_k_dense_replace: 1, hidden_act: 'silu', hidden_size: 192, initializer_range: 0.02, intermediate_size: 256,
    kv_lora_rank: 64, max_position_embeddings: 163840, moe_intermediate_size: 64, moe_layer_freq: 1, n_group: 4,
    n_routed_experts: 16, n_shared_experts: 1, norm_topk_prob: true, num_attention_heads: 8, num_experts_per_tok: 4,
    num_hidden_layers: 3, num_key_value_heads: 4, num_nextn_predict_layers: 1, q_lora_rank: 96, qk_nope_head_dim: 32,
    qk_rope_head_dim: 16,
    quantization_config: { activation_scheme: 'dynamic', fmt: 'e4m3', quant_method: 'fp8', scale_fmt: 'ue8m0', weight_block_size: [128, 128] },
    rms_norm_eps: 1e-6,
    rope_scaling: { beta_fast: 32, beta_slow: 1, factor: 40, mscale: 1.0, mscale_all_dim: 1.0, original_max_position_embeddings: 4096, type: 'yarn' },
    rope_theta: 10000, routed_scaling_factor: 2.5, scoring_func: 'sigmoid', tie_word_embeddings: false, topk_group: 2,
    topk_method: 'noaux_tc', torch_dtype: 'bfloat16', transformers_version: '4.44.2', use_cache: true, v_head_dim: 32,
    vocab_size: 512,
  };
  if (isV32) Object.assign(cfg, { index_head_dim: 64, index_n_heads: 8, index_topk: 16 });
  if (preset === 'bench') {
    for (const [k, v] of Object.entries(DEEPSEEK_BENCH_SIZES)) if (isV32 || !k.startsWith('index_')) cfg[k] = v;
  }
  return cfg;
}

/** Registry entry of DeepSeek-V3.2 checkpoints (`make-tiny --arch deepseek-v32`). */
export const DEEPSEEK_V32_DEFINITION: ModelDefinition = {
  architectures: ['DeepseekV32ForCausalLM'],
  tinyArchNames: ['deepseek-v32'],
  expectedTensors: deepseekExpectedTensors,
  shardTensors: deepseekShards,
  pipelineStages: true,
  create: (config, weights, options) => createDeepseekModel(config, weights, options),
  tinyConfig: (preset) => deepseekTinyConfig(true, preset),
};

/** Registry entry of DeepSeek-V3 checkpoints: the same model without the indexer (`make-tiny --arch deepseek-v3`). */
export const DEEPSEEK_V3_DEFINITION: ModelDefinition = {
  architectures: ['DeepseekV3ForCausalLM'],
  tinyArchNames: ['deepseek-v3'],
  expectedTensors: deepseekExpectedTensors,
  shardTensors: deepseekShards,
  pipelineStages: true,
  create: (config, weights, options) => createDeepseekModel(config, weights, options),
  tinyConfig: (preset) => deepseekTinyConfig(false, preset),
};

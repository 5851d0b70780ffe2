// DeepSeek-V3.2 (`DeepseekV32ForCausalLM`: MLA + DSA lightning indexer + grouped MoE + MTP layer) and DeepSeek-V3
// (`DeepseekV3ForCausalLM`: the same without the indexer, dense MLA). Reads config.json, declares every checkpoint
// tensor, builds the layers and runs the forward pass and the MTP (nextn) layer. Knows nothing of scheduling.
//
// config.json fields read: hidden_size, num_hidden_layers, num_attention_heads, vocab_size, rms_norm_eps, rope_theta,
// rope_scaling{type|rope_type, factor, original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim},
// q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, index_n_heads, index_head_dim,
// index_topk, intermediate_size, moe_intermediate_size, n_routed_experts, n_shared_experts, num_experts_per_tok,
// n_group, topk_group, topk_method, scoring_func, norm_topk_prob, routed_scaling_factor, first_k_dense_replace,
// moe_layer_freq, num_nextn_predict_layers, tie_word_embeddings.
// Sources: model-spec.md §3; upstream python/sglang/srt/models/deepseek_v2.py, deepseek_nextn.py.
import { InvalidRequestError, ModelLoadError } from '../common/index.js';
import { configBool, configInt, configNumber, configString } from '../config/index.js';
import type { ModelConfig } from '../config/index.js';
import type { ExpertWeights, Ops, Weight } from '../kernels/index.js';
import {
  DsaIndexer, FusedMoE, INDEX_K_BUFFER, LATENT_KV_BUFFER, LogitsProcessor, MlaAttention, ParallelLMHead, VocabEmbedding,
  biasedGroupedTopK, deepseekRopeParams, deepseekRotaryTable, deepseekSoftmaxScale,
} from '../layers/index.js';
import type { ForwardBatch, ForwardOutput, GroupedTopKConfig, MlaDims, MlaExtendForm, YarnScaling } from '../layers/index.js';
import type { KVPoolLayout } from '../mem_cache/index.js';
import type { CausalLM, CreateModelOptions, ModelDefinition } from './model_base.js';
import type { TensorSpec, WeightStore } from './weights.js';

/** The DeepSeek-V3/V3.2 hyper-parameters, validated. */
export interface DeepseekConfig {
  /** True for DeepSeek-V3.2 (DSA indexer in every layer): architecture DeepseekV32ForCausalLM or index_topk set. */
  readonly isDsa: boolean;
  readonly hiddenSize: number;
  readonly numLayers: number;
  readonly vocabSize: number;
  readonly rmsNormEps: number;
  readonly mla: MlaDims;
  /** q_lora_rank, or null (q_proj straight from the hidden state; DeepSeek-V2-Lite style, no DSA). */
  readonly qLoraRank: number | null;
  readonly indexNHeads: number;
  readonly indexHeadDim: number;
  readonly indexTopK: number;
  readonly ropeTheta: number;
  readonly ropeScaling: YarnScaling | null;
  readonly intermediateSize: number;
  readonly moeIntermediateSize: number;
  readonly numRoutedExperts: number;
  readonly numSharedExperts: number;
  readonly routing: GroupedTopKConfig;
  /** True when the router has e_score_correction_bias (topk_method noaux_tc, the only one supported). */
  readonly hasCorrectionBias: boolean;
  readonly firstKDenseReplace: number;
  readonly moeLayerFreq: number;
  /** num_nextn_predict_layers (the MTP layer sits at index numLayers; only the first is used). */
  readonly numNextnLayers: number;
  readonly tieWordEmbeddings: boolean;
}

/**
 * Reads and validates the DeepSeek fields of config.json.
 * @throws ModelLoadError naming config.json and the field for a missing, mistyped or unsupported value
 */
export function parseDeepseekConfig(config: ModelConfig): DeepseekConfig {
  const c = config;
  const bad = (field: string, what: string): never => {
    throw new ModelLoadError(`${c.source}: field '${field}' ${what}`, { file: c.source });
  };
  const isDsa = c.architectures.includes('DeepseekV32ForCausalLM') || (c.raw.index_topk !== undefined && c.raw.index_topk !== null);
  const qLoraRank = c.raw.q_lora_rank === null || c.raw.q_lora_rank === undefined ? null : configInt(c, 'q_lora_rank');
  if (isDsa && qLoraRank === null) bad('q_lora_rank', 'is required by the DSA indexer (DeepseekV32ForCausalLM)');
  const scoringFunc = configString(c, 'scoring_func', 'sigmoid');
  if (scoringFunc !== 'sigmoid') bad('scoring_func', `'${scoringFunc}' is not supported (DeepSeek-V3 uses 'sigmoid')`);
  const topkMethod = configString(c, 'topk_method', 'noaux_tc');
  if (topkMethod !== 'noaux_tc') bad('topk_method', `'${topkMethod}' is not supported (DeepSeek-V3/V3.2 use 'noaux_tc')`);
  const numRoutedExperts = configInt(c, 'n_routed_experts');
  const numExpertGroups = configInt(c, 'n_group', 1);
  const topKGroup = configInt(c, 'topk_group', 1);
  const topK = configInt(c, 'num_experts_per_tok');
  if (numExpertGroups < 1 || numRoutedExperts % numExpertGroups !== 0) bad('n_group', `(${numExpertGroups}) must divide n_routed_experts (${numRoutedExperts})`);
  if (topKGroup < 1 || topKGroup > numExpertGroups) bad('topk_group', `(${topKGroup}) must be in [1, n_group = ${numExpertGroups}]`);
  if (topK < 1 || topK > topKGroup * (numRoutedExperts / numExpertGroups)) bad('num_experts_per_tok', `(${topK}) exceeds the experts of topk_group groups`);
  const ropeDim = configInt(c, 'qk_rope_head_dim');
  if (ropeDim === 0 || ropeDim % 2 !== 0) bad('qk_rope_head_dim', 'must be a positive even number');
  const moeLayerFreq = configInt(c, 'moe_layer_freq', 1);
  if (moeLayerFreq < 1) bad('moe_layer_freq', 'must be ≥ 1');
  const indexHeadDim = isDsa ? configInt(c, 'index_head_dim') : 0;
  if (isDsa && indexHeadDim < ropeDim) bad('index_head_dim', `(${indexHeadDim}) must be ≥ qk_rope_head_dim (${ropeDim})`);
  return {
    isDsa,
    hiddenSize: c.hiddenSize,
    numLayers: c.numHiddenLayers,
    vocabSize: c.vocabSize,
    rmsNormEps: c.rmsNormEps,
    mla: {
      numHeads: c.numAttentionHeads,
      qkNopeHeadDim: configInt(c, 'qk_nope_head_dim'),
      qkRopeHeadDim: ropeDim,
      vHeadDim: configInt(c, 'v_head_dim'),
      kvLoraRank: configInt(c, 'kv_lora_rank'),
    },
    qLoraRank,
    indexNHeads: isDsa ? configInt(c, 'index_n_heads') : 0,
    indexHeadDim,
    indexTopK: isDsa ? Math.max(1, configInt(c, 'index_topk')) : 0,
    ropeTheta: c.ropeTheta,
    ropeScaling: parseRopeScaling(c),
    intermediateSize: configInt(c, 'intermediate_size'),
    moeIntermediateSize: configInt(c, 'moe_intermediate_size'),
    numRoutedExperts,
    numSharedExperts: configInt(c, 'n_shared_experts', 0),
    routing: {
      topK,
      numExpertGroups,
      topKGroup,
      normTopKProb: configBool(c, 'norm_topk_prob', true),
      routedScalingFactor: configNumber(c, 'routed_scaling_factor', 1),
    },
    hasCorrectionBias: topkMethod === 'noaux_tc',
    firstKDenseReplace: configInt(c, 'first_k_dense_replace', 0),
    moeLayerFreq,
    numNextnLayers: configInt(c, 'num_nextn_predict_layers', 0),
    tieWordEmbeddings: c.tieWordEmbeddings,
  };
}

function parseRopeScaling(c: ModelConfig): YarnScaling | null {
  const rs = c.raw.rope_scaling;
  if (rs === undefined || rs === null) return null;
  if (typeof rs !== 'object' || Array.isArray(rs)) throw new ModelLoadError(`${c.source}: field 'rope_scaling' must be an object`, { file: c.source });
  const r = { raw: rs as Record<string, unknown>, source: c.source };
  const type = configString(r, 'type', configString(r, 'rope_type', 'yarn'));
  if (type !== 'yarn' && type !== 'deepseek_yarn') {
    throw new ModelLoadError(`${c.source}: rope_scaling type '${type}' is not supported for DeepSeek (expected 'yarn')`, { file: c.source });
  }
  return {
    factor: configNumber(r, 'factor'),
    originalMaxPositionEmbeddings: configInt(r, 'original_max_position_embeddings', 4096),
    betaFast: configNumber(r, 'beta_fast', 32),
    betaSlow: configNumber(r, 'beta_slow', 1),
    mscale: configNumber(r, 'mscale', 1),
    mscaleAllDim: configNumber(r, 'mscale_all_dim', 0),
  };
}

/** True when decoder layer `layerId` uses the routed MoE (SGLang `_is_layer_sparse`; the MTP layer always does). */
export function isMoeLayer(cfg: DeepseekConfig, layerId: number): boolean {
  if (layerId >= cfg.numLayers) return true;
  return cfg.numRoutedExperts > 0 && layerId >= cfg.firstKDenseReplace && layerId % cfg.moeLayerFreq === 0;
}

/**
 * KV bytes per token per layer of this implementation's pool (f32 storage): `4·(kvLoraRank + qkRopeHeadDim)` for the
 * latent, plus `4·indexHeadDim` for the DSA index key. (SGLang on GPUs stores the latent in bf16 — 2 B per value — and
 * the index key as 128 FP8 bytes + one f32 scale; model-spec.md §3.11.)
 */
export function deepseekKvBytesPerTokenPerLayer(cfg: DeepseekConfig): number {
  return 4 * (cfg.mla.kvLoraRank + cfg.mla.qkRopeHeadDim + (cfg.isDsa ? cfg.indexHeadDim : 0));
}

/** KV pool buffers of `numLayers` DeepSeek layers: 'kv' (latent) and, for V3.2, 'index_k'. */
export function deepseekKvPoolLayout(cfg: DeepseekConfig, numLayers: number): KVPoolLayout {
  const buffers = [{ name: LATENT_KV_BUFFER, width: cfg.mla.kvLoraRank + cfg.mla.qkRopeHeadDim }];
  if (cfg.isDsa) buffers.push({ name: INDEX_K_BUFFER, width: cfg.indexHeadDim });
  return { numLayers, buffers };
}

// ---------------------------------------------------------------------------------------------------------------
// Tensor list

function decoderLayerSpecs(cfg: DeepseekConfig, layerId: number): TensorSpec[] {
  const p = `model.layers.${layerId}.`;
  const D = cfg.hiddenSize;
  const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: R } = cfg.mla;
  const specs: TensorSpec[] = [];
  const lin = (name: string, shape: number[], storedAs: TensorSpec['storedAs'] = 'fp8'): void => { specs.push({ name: p + name, shape, storedAs, init: 'linear' }); };
  const norm = (name: string, n: number, storedAs: TensorSpec['storedAs'] = 'bf16'): void => { specs.push({ name: p + name, shape: [n], storedAs, init: 'norm' }); };
  norm('input_layernorm.weight', D);
  if (cfg.qLoraRank !== null) {
    lin('self_attn.q_a_proj.weight', [cfg.qLoraRank, D]);
    norm('self_attn.q_a_layernorm.weight', cfg.qLoraRank);
    lin('self_attn.q_b_proj.weight', [H * (dn + dr), cfg.qLoraRank]);
  } else {
    lin('self_attn.q_proj.weight', [H * (dn + dr), D]);
  }
  lin('self_attn.kv_a_proj_with_mqa.weight', [R + dr, D]);
  norm('self_attn.kv_a_layernorm.weight', R);
  lin('self_attn.kv_b_proj.weight', [H * (dn + dv), R]);
  lin('self_attn.o_proj.weight', [D, H * dv]);
  if (cfg.isDsa && cfg.qLoraRank !== null) {
    lin('self_attn.indexer.wq_b.weight', [cfg.indexNHeads * cfg.indexHeadDim, cfg.qLoraRank]);
    lin('self_attn.indexer.wk.weight', [cfg.indexHeadDim, D]);
    norm('self_attn.indexer.k_norm.weight', cfg.indexHeadDim, 'f32');
    specs.push({ name: p + 'self_attn.indexer.k_norm.bias', shape: [cfg.indexHeadDim], storedAs: 'f32', init: 'norm_bias' });
    lin('self_attn.indexer.weights_proj.weight', [cfg.indexNHeads, D], 'bf16');
  }
  norm('post_attention_layernorm.weight', D);
  if (isMoeLayer(cfg, layerId)) {
    const E = cfg.numRoutedExperts;
    const Im = cfg.moeIntermediateSize;
    lin('mlp.gate.weight', [E, D], 'bf16');
    if (cfg.hasCorrectionBias) specs.push({ name: p + 'mlp.gate.e_score_correction_bias', shape: [E], storedAs: 'f32', init: 'router_bias' });
    for (let e = 0; e < E; e++) {
      lin(`mlp.experts.${e}.gate_proj.weight`, [Im, D]);
      lin(`mlp.experts.${e}.up_proj.weight`, [Im, D]);
      lin(`mlp.experts.${e}.down_proj.weight`, [D, Im]);
    }
    if (cfg.numSharedExperts > 0) {
      const Is = cfg.numSharedExperts * Im;
      lin('mlp.shared_experts.gate_proj.weight', [Is, D]);
      lin('mlp.shared_experts.up_proj.weight', [Is, D]);
      lin('mlp.shared_experts.down_proj.weight', [D, Is]);
    }
  } else {
    const I = cfg.intermediateSize;
    lin('mlp.gate_proj.weight', [I, D]);
    lin('mlp.up_proj.weight', [I, D]);
    lin('mlp.down_proj.weight', [D, I]);
  }
  return specs;
}

/** The MTP layer's own tensors (besides a full decoder layer): enorm, hnorm, eh_proj, shared_head.norm. */
function mtpExtraSpecs(cfg: DeepseekConfig): TensorSpec[] {
  const p = `model.layers.${cfg.numLayers}.`;
  const D = cfg.hiddenSize;
  return [
    { name: p + 'enorm.weight', shape: [D], storedAs: 'bf16', init: 'norm' },
    { name: p + 'hnorm.weight', shape: [D], storedAs: 'bf16', init: 'norm' },
    { name: p + 'eh_proj.weight', shape: [D, 2 * D], storedAs: 'bf16', init: 'linear' },
    { name: p + 'shared_head.norm.weight', shape: [D], storedAs: 'bf16', init: 'norm' },
  ];
}

/**
 * Every tensor of a DeepSeek-V3/V3.2 checkpoint (model-spec.md §3.3, §3.10.1); the MTP layer's are optional. Its copies of the
 * embedding and lm_head (`model.layers.{L}.embed_tokens`, `shared_head.head`) are not read: like SGLang, the MTP
 * layer uses the target's.
 * @throws ModelLoadError for an unsupported or inconsistent config
 */
export function deepseekExpectedTensors(config: ModelConfig): TensorSpec[] {
  const cfg = parseDeepseekConfig(config);
  const D = cfg.hiddenSize;
  const specs: TensorSpec[] = [{ name: 'model.embed_tokens.weight', shape: [cfg.vocabSize, D], storedAs: 'bf16', init: 'embedding' }];
  for (let l = 0; l < cfg.numLayers; l++) specs.push(...decoderLayerSpecs(cfg, l));
  specs.push({ name: 'model.norm.weight', shape: [D], storedAs: 'bf16', init: 'norm' });
  if (!cfg.tieWordEmbeddings) specs.push({ name: 'lm_head.weight', shape: [cfg.vocabSize, D], storedAs: 'bf16', init: 'linear' });
  // The MTP layer is optional: many checkpoints ship without it (then --mtp-next-tokens reports that).
  if (cfg.numNextnLayers > 0) specs.push(...[...mtpExtraSpecs(cfg), ...decoderLayerSpecs(cfg, cfg.numLayers)].map((t) => ({ ...t, optional: true })));
  return specs;
}

// ---------------------------------------------------------------------------------------------------------------
// Layers

/** SwiGLU MLP: down(silu(gate(x)) ⊙ up(x)) (model-spec.md §1.6). */
class GatedMlp {
  constructor(private readonly ops: Ops, private readonly w: ExpertWeights) {}

  /** @param x [numTokens, D] f32 @returns [numTokens, D] f32 */
  forward(x: Float32Array, numTokens: number): Float32Array {
    const gate = this.ops.matmul(x, numTokens, this.w.gate);
    const up = this.ops.matmul(x, numTokens, this.w.up);
    return this.ops.matmul(this.ops.siluAndMul(gate, up, gate), numTokens, this.w.down);
  }
}

/** Routed experts (grouped top-k router in f32) plus the shared experts (model-spec.md §3.9). */
class DeepseekMoE {
  constructor(
    private readonly ops: Ops,
    private readonly gate: Weight,
    private readonly bias: Float32Array | null,
    private readonly experts: FusedMoE,
    private readonly shared: GatedMlp | null,
    private readonly routing: GroupedTopKConfig,
  ) {}

  /** @param x [numTokens, D] f32 @returns y [numTokens, D] f32 and the routed ids [numTokens, topK] */
  forward(x: Float32Array, numTokens: number): { y: Float32Array; topKIds: Int32Array } {
    const routerLogits = this.ops.matmul(x, numTokens, this.gate); // [T, E] f32
    const { topKIds, topKWeights } = biasedGroupedTopK(routerLogits, numTokens, this.experts.numExperts, this.bias, this.routing);
    const y = this.experts.forward(x, numTokens, topKIds, topKWeights, this.routing.topK);
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
  ) {}

  /**
   * @param x [numTokens, D] f32 residual stream, updated in place
   * @returns the routed expert ids [numTokens, topK] (null for a dense layer)
   */
  forward(x: Float32Array, batch: ForwardBatch, kvLayer: number, observer: DeepseekDecisionObserver | null): Int32Array | null {
    const T = batch.numTokens;
    const D = this.inputLayernorm.length;
    const a = this.ops.rmsNorm(x, T, D, this.inputLayernorm, this.eps);
    const onSel = observer?.indexer ? (row: number, keys: Int32Array): void => observer.indexer!(this.layerId, row, keys) : undefined;
    this.ops.add(x, this.attn.forward(a, batch, kvLayer, onSel), x);
    const m = this.ops.rmsNorm(x, T, D, this.postAttentionLayernorm, this.eps);
    if (this.mlp instanceof DeepseekMoE) {
      const { y, topKIds } = this.mlp.forward(m, T);
      this.ops.add(x, y, x);
      return topKIds;
    }
    this.ops.add(x, this.mlp.forward(m, T), x);
    return null;
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
  kvPoolLayout(): KVPoolLayout {
    return deepseekKvPoolLayout(this.cfg, 1);
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
    const experts = this.layer.forward(x, batch, 0, observer);
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
    private readonly embed: VocabEmbedding,
    private readonly layers: readonly DeepseekDecoderLayer[],
    private readonly norm: Float32Array,
    private readonly lmHead: ParallelLMHead,
    private readonly logits: LogitsProcessor,
    /** The MTP layer, or null when the checkpoint has none. */
    readonly mtp: DeepseekMtpLayer | null,
  ) {}

  kvPoolLayout(): KVPoolLayout {
    return deepseekKvPoolLayout(this.deepseek, this.deepseek.numLayers);
  }

  /**
   * One forward step (model-spec.md §3.6): embedding, decoder layers, final RMSNorm, logits of batch.logitRows.
   * @throws InternalError on inconsistent batch geometry
   */
  forward(batch: ForwardBatch): ForwardOutput {
    const T = batch.numTokens;
    ensureLocs(batch);
    const x = this.embed.forward(batch.inputIds); // [T, D]
    const routed: (Int32Array | null)[] = [];
    for (let l = 0; l < this.layers.length; l++) routed.push(this.layers[l].forward(x, batch, l, this.observer));
    const h = this.ops.rmsNorm(x, T, this.deepseek.hiddenSize, this.norm, this.deepseek.rmsNormEps);
    const out = this.logits.forward(h, batch, this.lmHead);
    return batch.captureRoutedExperts ? { ...out, routedExperts: routed } : out;
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
  if (cfg.isDsa && cfg.qLoraRank !== null) {
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
  const attn = new MlaAttention(ops, {
    qAProj: hasQLora ? w.get(p + 'self_attn.q_a_proj.weight') : null,
    qALayernorm: hasQLora ? w.f32(p + 'self_attn.q_a_layernorm.weight') : null,
    qBProj: w.get(p + (hasQLora ? 'self_attn.q_b_proj.weight' : 'self_attn.q_proj.weight')),
    kvAProjWithMqa: w.get(p + 'self_attn.kv_a_proj_with_mqa.weight'),
    kvALayernorm: w.f32(p + 'self_attn.kv_a_layernorm.weight'),
    kvBProj: w.f32(p + 'self_attn.kv_b_proj.weight'),
    oProj: w.get(p + 'self_attn.o_proj.weight'),
  }, cfg.mla, {
    hiddenSize: cfg.hiddenSize,
    rmsNormEps: cfg.rmsNormEps,
    scale: deepseekSoftmaxScale(cfg.mla.qkNopeHeadDim + cfg.mla.qkRopeHeadDim, cfg.ropeScaling),
    rope: deepseekRopeParams(table, 'interleaved'),
    extendForm: opts.mlaExtendForm ?? 'absorbed',
  }, indexer);
  const expert = (q: string): ExpertWeights => ({ gate: w.get(`${q}.gate_proj.weight`), up: w.get(`${q}.up_proj.weight`), down: w.get(`${q}.down_proj.weight`) });
  let mlp: GatedMlp | DeepseekMoE;
  if (isMoeLayer(cfg, layerId)) {
    const experts: ExpertWeights[] = [];
    for (let e = 0; e < cfg.numRoutedExperts; e++) experts.push(expert(`${p}mlp.experts.${e}`));
    mlp = new DeepseekMoE(
      ops,
      w.get(p + 'mlp.gate.weight'),
      cfg.hasCorrectionBias ? w.f32(p + 'mlp.gate.e_score_correction_bias') : null,
      new FusedMoE(experts, cfg.hiddenSize, ops),
      cfg.numSharedExperts > 0 ? new GatedMlp(ops, expert(`${p}mlp.shared_experts`)) : null,
      cfg.routing,
    );
  } else {
    mlp = new GatedMlp(ops, expert(`${p}mlp`));
  }
  return new DeepseekDecoderLayer(ops, layerId, w.f32(p + 'input_layernorm.weight'), attn, w.f32(p + 'post_attention_layernorm.weight'), mlp, cfg.rmsNormEps);
}

/**
 * Builds the model from loaded weights (every expected tensor present; the MTP layer when the store holds it).
 * @throws ModelLoadError for an unsupported config or a missing tensor
 */
export function createDeepseekModel(config: ModelConfig, weights: WeightStore, opts: DeepseekModelOptions): DeepseekV32ForCausalLM {
  const cfg = parseDeepseekConfig(config);
  const ops = opts.ops;
  const embed = new VocabEmbedding(weights.get('model.embed_tokens.weight'), ops);
  const lmHead = new ParallelLMHead(weights.get(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'), ops);
  const logits = new LogitsProcessor(cfg.hiddenSize);
  const layers: DeepseekDecoderLayer[] = [];
  for (let l = 0; l < cfg.numLayers; l++) layers.push(buildLayer(cfg, l, weights, opts));
  let mtp: DeepseekMtpLayer | null = null;
  const mp = `model.layers.${cfg.numLayers}.`;
  if (cfg.numNextnLayers > 0 && weights.has(mp + 'eh_proj.weight')) {
    mtp = new DeepseekMtpLayer(
      ops, cfg, embed, weights.f32(mp + 'enorm.weight'), weights.f32(mp + 'hnorm.weight'), weights.get(mp + 'eh_proj.weight'),
      buildLayer(cfg, cfg.numLayers, weights, opts), weights.f32(mp + 'shared_head.norm.weight'), lmHead, logits,
    );
  }
  return new DeepseekV32ForCausalLM(config, cfg, ops, embed, layers, weights.f32('model.norm.weight'), lmHead, logits, mtp);
}

/** The MTP layer of a loaded model, or null when the model has none (not DeepSeek, or no layer in the checkpoint). */
export function mtpLayerOf(model: CausalLM): DeepseekMtpLayer | null {
  return model instanceof DeepseekV32ForCausalLM ? model.mtp : null;
}

/**
 * Tiny config for `make-tiny --arch deepseek-v32 | deepseek-v3` (every released field, shrunk sizes; preset 'tiny').
 * @throws InvalidRequestError for an unknown preset
 */
function deepseekTinyConfig(isV32: boolean, preset: string): Record<string, unknown> {
  if (preset !== 'tiny') throw new InvalidRequestError(`unknown --preset '${preset}' for ${isV32 ? 'deepseek-v32' : 'deepseek-v3'} (known: tiny)`, 'preset');
  const cfg: Record<string, unknown> = {
    architectures: [isV32 ? 'DeepseekV32ForCausalLM' : 'DeepseekV3ForCausalLM'],
    model_type: isV32 ? 'deepseek_v32' : 'deepseek_v3',
    attention_bias: false, attention_dropout: 0.0, bos_token_id: 0, eos_token_id: 1, ep_size: 1,
    first_k_dense_replace: 1, hidden_act: 'silu', hidden_size: 192, initializer_range: 0.02, intermediate_size: 256,
    kv_lora_rank: 64, max_position_embeddings: 163840, moe_intermediate_size: 64, moe_layer_freq: 1, n_group: 4,
    n_routed_experts: 16, n_shared_experts: 1, norm_topk_prob: true, num_attention_heads: 4, num_experts_per_tok: 4,
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
  return cfg;
}

/** Registry entry of DeepSeek-V3.2 checkpoints (`make-tiny --arch deepseek-v32`). */
export const DEEPSEEK_V32_DEFINITION: ModelDefinition = {
  architectures: ['DeepseekV32ForCausalLM'],
  tinyArchNames: ['deepseek-v32'],
  expectedTensors: deepseekExpectedTensors,
  create: (config, weights, options) => createDeepseekModel(config, weights, options),
  tinyConfig: (preset) => deepseekTinyConfig(true, preset),
};

/** Registry entry of DeepSeek-V3 checkpoints: the same model without the indexer (`make-tiny --arch deepseek-v3`). */
export const DEEPSEEK_V3_DEFINITION: ModelDefinition = {
  architectures: ['DeepseekV3ForCausalLM'],
  tinyArchNames: ['deepseek-v3'],
  expectedTensors: deepseekExpectedTensors,
  create: (config, weights, options) => createDeepseekModel(config, weights, options),
  tinyConfig: (preset) => deepseekTinyConfig(false, preset),
};

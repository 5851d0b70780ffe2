// DeepSeek-V3 / V3.2 checkpoint description: config.json → DeepseekConfig (validated hyper-parameters), the KV
// pool layout a model needs, and the full list of checkpoint tensors with their shapes. No math: the layers and
// the forward pass are in deepseek_v32.ts.
//
// config.json fields read: hidden_size, num_hidden_layers, num_attention_heads, vocab_size, rms_norm_eps, rope_theta,
// rope_scaling{type|rope_type, factor, original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim},
// q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, index_n_heads, index_head_dim,
// index_topk, intermediate_size, moe_intermediate_size, n_routed_experts, n_shared_experts, num_experts_per_tok,
// n_group, topk_group, topk_method, scoring_func, norm_topk_prob, routed_scaling_factor, first_k_dense_replace,
// moe_layer_freq, num_nextn_predict_layers, tie_word_embeddings, and the Index Cache fields index_topk_pattern,
// index_topk_freq, index_skip_topk_offset (usually set through --json-model-override-args).
// Sources: model-spec.md §3; upstream python/sglang/srt/models/deepseek_v2.py, deepseek_nextn.py.
import { F32_CODEC, ModelLoadError, scalarKvCodec } from '../common/index.js';
import type { KvCacheDtype, KvCodec } from '../common/index.js';
import { configBool, configInt, configNumber, configString } from '../config/index.js';
import type { ModelConfig } from '../config/index.js';
import { INDEX_K_BUFFER, LATENT_KV_BUFFER } from '../layers/index.js';
import type { GroupedTopKConfig, MlaDims, YarnScaling } from '../layers/index.js';
import type { KVBufferSpec, KVPoolLayout } from '../mem_cache/index.js';
import type { TensorSpec } from './weights.js';

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
  /**
   * Index Cache, per decoder layer (length numLayers): true when the layer runs no indexer of its own and attends
   * the top-k keys the previous layer selected for the same rows. All false unless config.json (or
   * --json-model-override-args) sets index_topk_pattern or index_topk_freq (dsaLayerReusesTopK).
   */
  readonly indexerReusesTopK: readonly boolean[];
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
  const indexerReusesTopK = isDsa ? parseIndexCache(c) : new Array<boolean>(c.numHiddenLayers).fill(false);
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
    indexerReusesTopK,
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

/**
 * Whether DSA layer `layerId` reuses the previous layer's top-k (SGLang's `skip_topk`, models/deepseek_v2.py; the
 * seed's "Index Cache"): with `pattern` (one 'F' full / 'S' shared character per layer) the layer's character is 'S'
 * (layers past the pattern's end are full); otherwise `max(layerId − offset + 1, 0) mod freq ≠ 0`.
 * @param pattern index_topk_pattern or null; freq index_topk_freq (≥ 1); offset index_skip_topk_offset
 */
export function dsaLayerReusesTopK(layerId: number, pattern: string | null, freq: number, offset: number): boolean {
  if (pattern !== null) return layerId < pattern.length && pattern[layerId] === 'S';
  return Math.max(layerId - offset + 1, 0) % freq !== 0;
}

/**
 * The Index Cache fields of config.json: index_topk_pattern (a string of 'F' / 'S', or null), index_topk_freq
 * (default 1: every layer full), index_skip_topk_offset (default 2), as SGLang reads them.
 * @returns per decoder layer, true when it reuses the previous layer's top-k
 * @throws ModelLoadError for a pattern that is not a string of 'F' and 'S', a freq < 1, or a first layer that would
 *   reuse (it has no earlier layer to take keys from)
 */
function parseIndexCache(c: ModelConfig): boolean[] {
  const bad = (field: string, what: string): never => {
    throw new ModelLoadError(`${c.source}: field '${field}' ${what}`, { file: c.source });
  };
  const rawPattern = c.raw.index_topk_pattern;
  let pattern: string | null = null;
  if (rawPattern !== undefined && rawPattern !== null) {
    if (typeof rawPattern !== 'string' || !/^[FS]*$/.test(rawPattern)) bad('index_topk_pattern', "must be a string of 'F' (full) and 'S' (shared) characters, one per layer");
    pattern = rawPattern as string;
  }
  const freq = configInt(c, 'index_topk_freq', 1);
  if (freq < 1) bad('index_topk_freq', `(${freq}) must be ≥ 1`);
  const offset = configInt(c, 'index_skip_topk_offset', 2);
  const reuses = Array.from({ length: c.numHiddenLayers }, (_, l) => dsaLayerReusesTopK(l, pattern, freq, offset));
  if (reuses[0]) bad(pattern !== null ? 'index_topk_pattern' : 'index_skip_topk_offset', 'makes layer 0 reuse the top-k of an earlier layer, but there is none');
  return reuses;
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

/** True when decoder layer `layerId` reuses the previous layer's DSA top-k (Index Cache; the MTP layer never does). */
export function layerReusesTopK(cfg: DeepseekConfig, layerId: number): boolean {
  return layerId < cfg.numLayers && cfg.indexerReusesTopK[layerId];
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
export function deepseekKvPoolLayout(cfg: DeepseekConfig, numLayers: number, kvCacheDtype: KvCacheDtype = 'auto'): KVPoolLayout {
  const r = cfg.mla.kvLoraRank;
  // MLA latent [c_kv | k_rope]: SGLang's MLATokenToKVPool casts it to the KV dtype (no scale); a DSA model under
  // fp8_e4m3 stores SGLang's fp8_ds_mla row instead (c_kv in e4m3 with a scale per 128, k_rope in bf16)
  const latent: KvCodec = cfg.isDsa && kvCacheDtype === 'fp8_e4m3' && r % 8 === 0 ? { kind: 'fp8_block', fp8Dims: r } : scalarKvCodec(kvCacheDtype);
  const buffers: KVBufferSpec[] = [{ name: LATENT_KV_BUFFER, width: r + cfg.mla.qkRopeHeadDim, codec: latent }];
  // DSA indexer keys: SGLang keeps them in e4m3 with one scale per 128 (act_quant) whatever the KV dtype; with
  // 'auto' (f32 on CPU) tsglang keeps them f32, as the golden oracle computes them
  if (cfg.isDsa) {
    const indexCodec: KvCodec = kvCacheDtype === 'auto' || cfg.indexHeadDim % 8 !== 0 ? F32_CODEC : { kind: 'fp8_block', fp8Dims: cfg.indexHeadDim };
    buffers.push({ name: INDEX_K_BUFFER, width: cfg.indexHeadDim, codec: indexCodec });
  }
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
    // a layer that reuses the previous layer's top-k (Index Cache) never runs its indexer: its weights may be absent
    const first = specs.length;
    lin('self_attn.indexer.wq_b.weight', [cfg.indexNHeads * cfg.indexHeadDim, cfg.qLoraRank]);
    lin('self_attn.indexer.wk.weight', [cfg.indexHeadDim, D]);
    norm('self_attn.indexer.k_norm.weight', cfg.indexHeadDim, 'f32');
    specs.push({ name: p + 'self_attn.indexer.k_norm.bias', shape: [cfg.indexHeadDim], storedAs: 'f32', init: 'norm_bias' });
    lin('self_attn.indexer.weights_proj.weight', [cfg.indexNHeads, D], 'bf16');
    if (layerReusesTopK(cfg, layerId)) for (let i = first; i < specs.length; i++) specs[i] = { ...specs[i], optional: true };
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

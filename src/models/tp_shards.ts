// Which slice of each checkpoint tensor a TP/EP rank loads, as SGLang shards them (model-spec.md §2.4 and §3):
// column-parallel (rows of the stored [out, in] weight) q/k/v, q_b, kv_b, gate/up; row-parallel (columns) o_proj and
// down; vocab-parallel embedding and lm_head; routed experts by EP block (others not loaded), their FFN width by
// moe_tp; replicated: norms, routers, MLA's q_a/kv_a (the latent KV is replicated per rank), the DSA indexer (SGLang
// builds it from ReplicatedLinear), DeepSeek's shared experts and the MTP layer's eh_proj. Under DP-attention the
// attention-side tensors split over the attn_tp ranks of the rank's group (ParallelGroups.attn), the MLPs over all.
import type { ModelConfig } from '../config/index.js';
import { configInt } from '../config/index.js';
import { attnGroupsOf, lmHeadGroupsOf, denseFfnRange, expertFfnRange, expertRange, kvHeadRange, qHeadRange, vocabRange } from '../layers/index.js';
import type { ParallelGroups, Range } from '../layers/index.js';
import { isMoeLayer, parseDeepseekConfig } from './deepseek_v32_config.js';
import type { TensorShard, TensorSpec } from './weights.js';

const rows = (r: Range, per = 1): TensorShard => ({ dim: 0, start: r.start * per, count: r.count * per });
const cols = (r: Range, per = 1): TensorShard => ({ dim: 1, start: r.start * per, count: r.count * per });

/**
 * Applies `shardOf` to every spec: a shard sets `shard`, null keeps the whole tensor, 'absent' drops it.
 */
function applyShards(specs: readonly TensorSpec[], shardOf: (name: string) => TensorShard | null | 'absent'): TensorSpec[] {
  const out: TensorSpec[] = [];
  for (const s of specs) {
    const sh = shardOf(s.name);
    if (sh === 'absent') continue;
    out.push(sh === null ? s : { ...s, shard: sh });
  }
  return out;
}

/** The expert id of a routed-expert tensor name (`…experts.<e>.…`), or null. */
function expertId(name: string): number | null {
  const m = /\.experts\.(\d+)\./.exec(name);
  return m ? Number(m[1]) : null;
}

/**
 * The tensors one MiniMax-M2 rank loads.
 * @throws InvalidRequestError when heads, KV heads, experts or the expert width do not split over the layout
 */
export function miniMaxM2Shards(cfg: ModelConfig, specs: readonly TensorSpec[], p: ParallelGroups): TensorSpec[] {
  const hd = cfg.headDim;
  const pa = attnGroupsOf(p); // attention and embedding: the attn_tp ranks under DP-attention (lm_head: lmHeadGroupsOf)
  const q = qHeadRange(cfg.numAttentionHeads, pa);
  const kv = kvHeadRange(cfg.numKeyValueHeads, pa);
  const experts = expertRange(configInt(cfg, 'num_local_experts'), p);
  const ffn = expertFfnRange(configInt(cfg, 'intermediate_size'), p);
  const vocab = vocabRange(cfg.vocabSize, pa);
  const headVocab = vocabRange(cfg.vocabSize, lmHeadGroupsOf(p, false)); // lm_head.weight exists only when untied
  return applyShards(specs, (name) => {
    if (name === 'model.embed_tokens.weight') return rows(vocab);
    if (name === 'lm_head.weight') return rows(headVocab);
    if (/self_attn\.(q_proj|q_norm)\.weight$/.test(name)) return rows(q, hd);
    if (/self_attn\.(k_proj|v_proj|k_norm)\.weight$/.test(name)) return rows(kv, hd);
    if (name.endsWith('self_attn.o_proj.weight')) return cols(q, hd);
    const e = expertId(name);
    if (e !== null) {
      if (e < experts.start || e >= experts.start + experts.count) return 'absent';
      return name.endsWith('.w2.weight') ? cols(ffn) : rows(ffn);
    }
    return null;
  });
}

/**
 * The tensors one DeepSeek-V3 / V3.2 rank loads (the MTP layer shards like a decoder layer).
 * @throws InvalidRequestError when heads, experts or FFN widths do not split over the layout
 */
export function deepseekShards(config: ModelConfig, specs: readonly TensorSpec[], p: ParallelGroups): TensorSpec[] {
  const cfg = parseDeepseekConfig(config);
  const { qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv } = cfg.mla;
  const pa = attnGroupsOf(p); // attention and embedding: the attn_tp ranks under DP-attention (lm_head: lmHeadGroupsOf)
  const heads = qHeadRange(cfg.mla.numHeads, pa);
  const vocab = vocabRange(cfg.vocabSize, pa);
  const headVocab = vocabRange(cfg.vocabSize, lmHeadGroupsOf(p, false)); // lm_head.weight exists only when untied
  const moe = Array.from({ length: cfg.numLayers + cfg.numNextnLayers }, (_, l) => isMoeLayer(cfg, l));
  const experts = moe.some((m) => m) ? expertRange(cfg.numRoutedExperts, p) : null;
  const ffn = moe.some((m) => m) ? expertFfnRange(cfg.moeIntermediateSize, p) : null;
  const dense = moe.some((m) => !m) ? denseFfnRange(cfg.intermediateSize, p) : null;
  return applyShards(specs, (name) => {
    if (name === 'model.embed_tokens.weight') return rows(vocab);
    if (name === 'lm_head.weight') return rows(headVocab);
    if (/self_attn\.(q_b_proj|q_proj)\.weight$/.test(name)) return rows(heads, dn + dr);
    if (name.endsWith('self_attn.kv_b_proj.weight')) return rows(heads, dn + dv);
    if (name.endsWith('self_attn.o_proj.weight')) return cols(heads, dv);
    const e = expertId(name);
    if (e !== null && experts && ffn) {
      if (e < experts.start || e >= experts.start + experts.count) return 'absent';
      return name.endsWith('.down_proj.weight') ? cols(ffn) : rows(ffn);
    }
    if (/\.mlp\.(gate_proj|up_proj)\.weight$/.test(name) && dense) return rows(dense);
    if (/\.mlp\.down_proj\.weight$/.test(name) && dense) return cols(dense);
    return null; // norms, router, q_a / kv_a, indexer, shared experts, eh_proj: replicated
  });
}

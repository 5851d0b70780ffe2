// MLA (multi-head latent attention) cores for one query token over a chosen set of cached latent rows:
// the weight-absorbed (MQA) form used for decode and the expanded (MHA) form extend may use. Both read the same
// latent KV (`c_kv | k_rope` per loc) and agree up to f32 rounding. Pure maths; the projections live in the model.
//
// Formulas: model-spec.md §3.7 (naive), §3.7.1 (absorbed), §3.8.4 (sparse key set); upstream
// python/sglang/srt/models/deepseek_v2.py (forward_absorb_prepare/core, forward_normal), DeepSeek-V2 paper
// (arXiv:2405.04434) §2.1.

/** MLA sizes (HF config names in brackets). */
export interface MlaDims {
  /** [num_attention_heads] */
  readonly numHeads: number;
  /** [qk_nope_head_dim] */
  readonly qkNopeHeadDim: number;
  /** [qk_rope_head_dim] */
  readonly qkRopeHeadDim: number;
  /** [v_head_dim] */
  readonly vHeadDim: number;
  /** [kv_lora_rank] */
  readonly kvLoraRank: number;
}

/** Width of one latent KV row: kvLoraRank + qkRopeHeadDim (the KVPool 'kv' buffer). */
export function mlaLatentWidth(d: MlaDims): number {
  return d.kvLoraRank + d.qkRopeHeadDim;
}

/**
 * Absorbs `W_UK` into the query: `q̂[h] = q_nope[h] · W_UK[h]` with `W_UK[h]` = rows h·(dn+dv) .. h·(dn+dv)+dn−1 of
 * kv_b_proj (model-spec.md §3.7.1).
 * @param q [numHeads, dn+dr] f32 at qOffset (nope first, then rope)
 * @param wKvB [numHeads·(dn+dv), kvLoraRank] f32 dequantised kv_b_proj weight
 * @param out [numHeads, kvLoraRank] f32
 */
export function mlaAbsorbQuery(q: Float32Array, qOffset: number, wKvB: Float32Array, d: MlaDims, out: Float32Array): void {
  const { numHeads, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = d;
  out.fill(0, 0, numHeads * r);
  for (let h = 0; h < numHeads; h++) {
    const o = h * r;
    for (let i = 0; i < dn; i++) {
      const qi = q[qOffset + h * (dn + dr) + i];
      const wRow = (h * (dn + dv) + i) * r;
      for (let c = 0; c < r; c++) out[o + c] += qi * wKvB[wRow + c];
    }
  }
}

/**
 * Absorbed sparse MLA for one query token: per head
 * `score[t] = scale·(q̂[h]·c_kv[t] + q_rope[h]·k_rope[t])` over the selected keys, softmax (f32),
 * `ô[h] = Σ p·c_kv[t]`, `o[h] = ô[h] · W_UV[h]ᵀ`.
 * @param qAbsorbed [numHeads, kvLoraRank] f32 from mlaAbsorbQuery
 * @param q [numHeads, dn+dr] f32 at qOffset (its rope part already rotated)
 * @param wKvB [numHeads·(dn+dv), kvLoraRank] f32
 * @param latent [numLocs, kvLoraRank+dr] f32 (KVPool buffer 'kv')
 * @param keyLocs [≥ seqLen] i32 loc of key position t
 * @param selected [numSelected] i32 key positions to attend to (ascending)
 * @param out [numHeads, dv] f32 at outOffset
 * @param scratch f32 of at least numSelected + kvLoraRank
 */
export function mlaAbsorbedAttention(
  qAbsorbed: Float32Array, q: Float32Array, qOffset: number, wKvB: Float32Array, latent: Float32Array,
  keyLocs: Int32Array, selected: Int32Array, numSelected: number, scale: number, d: MlaDims,
  out: Float32Array, outOffset: number, scratch: Float32Array,
): void {
  const { numHeads, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = d;
  const width = r + dr;
  const probs = scratch.subarray(0, numSelected);
  const latentOut = scratch.subarray(numSelected, numSelected + r);
  for (let h = 0; h < numHeads; h++) {
    const qa = h * r;
    const qr = qOffset + h * (dn + dr) + dn;
    let maxScore = -Infinity;
    for (let j = 0; j < numSelected; j++) {
      const row = keyLocs[selected[j]] * width;
      let dot = 0;
      for (let c = 0; c < r; c++) dot += qAbsorbed[qa + c] * latent[row + c];
      for (let c = 0; c < dr; c++) dot += q[qr + c] * latent[row + r + c];
      probs[j] = dot * scale;
      if (probs[j] > maxScore) maxScore = probs[j];
    }
    softmaxInPlace(probs, numSelected, maxScore);
    latentOut.fill(0);
    for (let j = 0; j < numSelected; j++) {
      const row = keyLocs[selected[j]] * width;
      const p = probs[j];
      for (let c = 0; c < r; c++) latentOut[c] += p * latent[row + c];
    }
    for (let v = 0; v < dv; v++) {
      const wRow = (h * (dn + dv) + dn + v) * r;
      let acc = 0;
      for (let c = 0; c < r; c++) acc += latentOut[c] * wKvB[wRow + c];
      out[outOffset + h * dv + v] = acc;
    }
  }
}

/**
 * Expands latent rows into per-head keys and values: `kvb[t] = c_kv[t] · W_kvbᵀ` → [numHeads, dn+dv]
 * (`k_nope | v` per head, model-spec.md §3.7 step 6).
 * @param latent [numLocs, kvLoraRank+dr] f32
 * @param keyLocs [numKeys] i32 locs to expand, in key-position order
 * @param wKvB [numHeads·(dn+dv), kvLoraRank] f32
 * @param out [numKeys, numHeads·(dn+dv)] f32
 */
export function mlaExpandKv(latent: Float32Array, keyLocs: Int32Array, numKeys: number, wKvB: Float32Array, d: MlaDims, out: Float32Array): void {
  const { numHeads, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = d;
  const rows = numHeads * (dn + dv);
  for (let t = 0; t < numKeys; t++) {
    const lat = keyLocs[t] * (r + dr);
    for (let n = 0; n < rows; n++) {
      const w = n * r;
      let acc = 0;
      for (let c = 0; c < r; c++) acc += latent[lat + c] * wKvB[w + c];
      out[t * rows + n] = acc;
    }
  }
}

/**
 * Expanded (MHA) sparse MLA for one query token: per head `score[t] = scale·(q_nope[h]·k_nope[h,t] +
 * q_rope[h]·k_rope[t])`, softmax (f32), `o[h] = Σ p·v[h,t]` (model-spec.md §3.7 steps 6–7).
 * @param q [numHeads, dn+dr] f32 at qOffset (rope part rotated)
 * @param kvExpanded [numKeys, numHeads·(dn+dv)] f32 from mlaExpandKv (row t = key position t)
 * @param latent [numLocs, kvLoraRank+dr] f32 (k_rope is read from it)
 * @param keyLocs [≥ numKeys] i32 loc of key position t
 * @param selected [numSelected] i32 key positions (ascending)
 * @param out [numHeads, dv] f32 at outOffset
 * @param scratch f32 of at least numSelected
 */
export function mlaExpandedAttention(
  q: Float32Array, qOffset: number, kvExpanded: Float32Array, latent: Float32Array, keyLocs: Int32Array,
  selected: Int32Array, numSelected: number, scale: number, d: MlaDims, out: Float32Array, outOffset: number,
  scratch: Float32Array,
): void {
  const { numHeads, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = d;
  const rows = numHeads * (dn + dv);
  const probs = scratch.subarray(0, numSelected);
  for (let h = 0; h < numHeads; h++) {
    const qn = qOffset + h * (dn + dr);
    let maxScore = -Infinity;
    for (let j = 0; j < numSelected; j++) {
      const t = selected[j];
      const k = t * rows + h * (dn + dv);
      const rope = keyLocs[t] * (r + dr) + r;
      let dot = 0;
      for (let c = 0; c < dn; c++) dot += q[qn + c] * kvExpanded[k + c];
      for (let c = 0; c < dr; c++) dot += q[qn + dn + c] * latent[rope + c];
      probs[j] = dot * scale;
      if (probs[j] > maxScore) maxScore = probs[j];
    }
    softmaxInPlace(probs, numSelected, maxScore);
    for (let v = 0; v < dv; v++) {
      let acc = 0;
      for (let j = 0; j < numSelected; j++) acc += probs[j] * kvExpanded[selected[j] * rows + h * (dn + dv) + dn + v];
      out[outOffset + h * dv + v] = acc;
    }
  }
}

/** Softmax of the first n entries (f32 storage, f64 sum) given their maximum. */
function softmaxInPlace(x: Float32Array, n: number, max: number): void {
  let sum = 0;
  for (let j = 0; j < n; j++) {
    x[j] = Math.exp(x[j] - max);
    sum += x[j];
  }
  const inv = 1 / sum;
  for (let j = 0; j < n; j++) x[j] *= inv;
}

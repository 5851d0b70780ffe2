// MLA (multi-head latent attention) maths around the latent KV cache (`c_kv | k_rope` per loc): the weight-absorbed
// (MQA) form — query absorption and output un-absorption around `Ops.attention` with one KV head — and the expanded
// (MHA) form for one query token over chosen keys. Both agree up to f32 rounding. Pure functions; the layer that
// uses them is `MlaAttention` (mla.ts), the projections live in the model.
import { InternalError } from '../../common/index.js';
import { weightToF32 } from '../../kernels/index.js';
import type { BlockScale, Ops, StoredTensor, Weight } from '../../kernels/index.js';
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
 * Absorbs `W_UK` into the query (model-spec.md §3.7.1): per token and head `q̂[h] = q_nope[h] · W_UK[h]` with
 * `W_UK[h]` = rows h·(dn+dv) .. h·(dn+dv)+dn−1 of kv_b_proj, followed by the (rotated) `q_rope[h]`, giving an MQA
 * query against the latent rows `[c_kv | k_rope]` of the KV cache (one KV head, head dim kvLoraRank+dr).
 * @param q [numTokens, numHeads, dn+dr] f32 (nope first, rope part already rotated)
 * @param wKvB [numHeads·(dn+dv), kvLoraRank] f32 dequantised kv_b_proj weight
 * @returns [numTokens, numHeads, kvLoraRank+dr] f32
 */
export function mlaAbsorbQuery(q: Float32Array, numTokens: number, wKvB: Float32Array, d: MlaDims): Float32Array {
  const { numHeads, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = d;
  const out = new Float32Array(numTokens * numHeads * (r + dr));
  const acc = new Float64Array(r);
  for (let t = 0; t < numTokens; t++) {
    for (let h = 0; h < numHeads; h++) {
      const qOff = (t * numHeads + h) * (dn + dr);
      const o = (t * numHeads + h) * (r + dr);
      acc.fill(0);
      for (let i = 0; i < dn; i++) {
        const qi = q[qOff + i];
        const wRow = (h * (dn + dv) + i) * r;
        for (let c = 0; c < r; c++) acc[c] += qi * wKvB[wRow + c];
      }
      for (let c = 0; c < r; c++) out[o + c] = acc[c];
      for (let c = 0; c < dr; c++) out[o + r + c] = q[qOff + dn + c];
    }
  }
  return out;
}

/**
 * Maps the latent-space attention output back to value space (model-spec.md §3.7.1): `o[h] = ô[h] · W_UV[h]ᵀ`,
 * `W_UV[h]` = rows h·(dn+dv)+dn .. h·(dn+dv)+dn+dv−1 of kv_b_proj.
 * @param latentOut [numTokens, numHeads, kvLoraRank] f32 (softmax-weighted sum of c_kv rows)
 * @param wKvB [numHeads·(dn+dv), kvLoraRank] f32
 * @returns [numTokens, numHeads, dv] f32
 */
export function mlaAbsorbOutput(latentOut: Float32Array, numTokens: number, wKvB: Float32Array, d: MlaDims): Float32Array {
  const { numHeads, qkNopeHeadDim: dn, vHeadDim: dv, kvLoraRank: r } = d;
  const out = new Float32Array(numTokens * numHeads * dv);
  for (let t = 0; t < numTokens; t++) {
    for (let h = 0; h < numHeads; h++) {
      const l = (t * numHeads + h) * r;
      for (let v = 0; v < dv; v++) {
        const wRow = (h * (dn + dv) + dn + v) * r;
        let acc = 0;
        for (let c = 0; c < r; c++) acc += latentOut[l + c] * wKvB[wRow + c];
        out[(t * numHeads + h) * dv + v] = acc;
      }
    }
  }
  return out;
}

/**
 * kv_b_proj rearranged for the absorbed form, held by the backend so one {@link Ops.groupedMatmul} call does all heads:
 * `wUkT` [numHeads·kvLoraRank, dn] stacks `W_UK[h]ᵀ` (so `q_nope[h] · W_UK[h]` = group h of the product) and `wUv`
 * [numHeads·dv, kvLoraRank] stacks `W_UV[h]` (so `ô[h] · W_UV[h]ᵀ` = group h). Both keep kv_b_proj's stored encoding
 * (FP8 codes are only permuted, each weight row gets its block scales), so they dequantize to exactly the values of
 * the f32 kv_b_proj.
 */
export interface MlaAbsorbWeights {
  readonly wUkT: Weight;
  readonly wUv: Weight;
}

/** Largest power-of-two column block (8..128) of the transposed W_UK whose chunks of i each lie in one kv_b_proj block row. */
function transposedBlockCols(d: MlaDims, bn: number): number | null {
  const { numHeads, qkNopeHeadDim: dn, vHeadDim: dv } = d;
  for (let bk = 128; bk >= 8; bk /= 2) {
    let ok = true;
    for (let h = 0; h < numHeads && ok; h++) {
      for (let i0 = 0; i0 < dn && ok; i0 += bk) {
        const first = h * (dn + dv) + i0;
        const last = h * (dn + dv) + Math.min(dn, i0 + bk) - 1;
        ok = Math.floor(first / bn) === Math.floor(last / bn);
      }
    }
    if (ok) return bk;
  }
  return null;
}

/**
 * Per-row block scales [rows, cols] (block size [1, bk]) regrouped into row blocks: the largest power of two b ≤ 128
 * such that every b-aligned run of rows has the same scale row, giving [ceil(rows/b), cols] with block size [b, bk]
 * — the same scale for every element. Row blocks let the native FP8 kernels scale the activation once per block
 * (native/src/common.h) instead of once per row.
 * @param scale [rows, cols] f32, one scale row per weight row
 */
function rowBlockedScale(scale: Float32Array, rows: number, cols: number, bk: number): BlockScale {
  const uniform = (b: number): boolean => {
    for (let n = 0; n < rows; n++) {
      const head = n - (n % b);
      for (let j = 0; j < cols; j++) if (scale[n * cols + j] !== scale[head * cols + j]) return false;
    }
    return true;
  };
  let b = 128;
  while (b > 1 && !uniform(b)) b /= 2;
  const blocks = Math.ceil(rows / b);
  const data = new Float32Array(blocks * cols);
  for (let i = 0; i < blocks; i++) data.set(scale.subarray(i * b * cols, (i * b + 1) * cols), i * cols);
  return { data, shape: [blocks, cols], blockSize: [b, bk] };
}

/**
 * Rearranges kv_b_proj into {@link MlaAbsorbWeights} (once, at load): element (h·r + c, i) of wUkT = kvB[h·(dn+dv) + i, c],
 * element (h·dv + v, c) of wUv = kvB[h·(dn+dv) + dn + v, c]. FP8 block weights stay FP8 with the scales their rows
 * inherit, grouped into the largest uniform row blocks (rowBlockedScale); other encodings are permuted as they are; an
 * FP8 layout whose blocks cannot follow the transpose falls back to f32.
 * @param kvB [numHeads·(dn+dv), kvLoraRank] kv_b_proj (a backend Weight, or its dequantized f32 values)
 * @throws InternalError when kvB's shape does not match the dims
 */
export function prepareMlaAbsorbWeights(ops: Ops, kvB: Weight | Float32Array, d: MlaDims): MlaAbsorbWeights {
  const { numHeads: H, qkNopeHeadDim: dn, vHeadDim: dv, kvLoraRank: r } = d;
  const rows = H * (dn + dv);
  const w: Weight = kvB instanceof Float32Array ? { format: 'f32', shape: [rows, r], data: kvB } : kvB;
  if (w.shape.length !== 2 || w.shape[0] !== rows || w.shape[1] !== r || w.data.length < rows * r) {
    throw new InternalError(`kv_b_proj has shape [${w.shape.join(', ')}] (${w.data.length} values), expected ${H}×(${dn}+${dv})×${r}`);
  }
  const ukSrc = (n: number, i: number): number => ((n / r | 0) * (dn + dv) + i) * r + (n % r); // wUkT (n, i) → kvB flat index
  const uvSrc = (n: number, c: number): number => ((n / dv | 0) * (dn + dv) + dn + (n % dv)) * r + c; // wUv (n, c) → kvB flat index
  const permute = <T extends Float32Array | Uint16Array | Uint8Array>(src: T, make: (len: number) => T, nRows: number, nCols: number, at: (n: number, k: number) => number): T => {
    const out = make(nRows * nCols);
    for (let n = 0; n < nRows; n++) for (let k = 0; k < nCols; k++) out[n * nCols + k] = src[at(n, k)];
    return out;
  };
  const bytes = (a: Float32Array | Uint16Array | Uint8Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  /** The two backend weights from their permuted element arrays (and, for FP8, their per-row block scales). */
  const pair = (dtype: StoredTensor['dtype'], uk: Float32Array | Uint16Array | Uint8Array, uv: Float32Array | Uint16Array | Uint8Array, ukScale?: BlockScale, uvScale?: BlockScale): MlaAbsorbWeights => ({
    wUkT: ops.prepareWeight({ name: 'kv_b_proj.w_uk_t', dtype, shape: [H * r, dn], bytes: bytes(uk), ...(ukScale ? { scale: ukScale } : {}) }),
    wUv: ops.prepareWeight({ name: 'kv_b_proj.w_uv', dtype, shape: [H * dv, r], bytes: bytes(uv), ...(uvScale ? { scale: uvScale } : {}) }),
  });
  const bkT = w.format === 'fp8_block' ? transposedBlockCols(d, w.scale.blockSize[0]) : null;
  if (w.format === 'fp8_block' && bkT !== null) {
    const [bn, bk] = w.scale.blockSize;
    const sCols = w.scale.shape[1];
    const scaleAt = (row: number, col: number): number => w.scale.data[Math.floor(row / bn) * sCols + Math.floor(col / bk)];
    const ukCols = Math.ceil(dn / bkT);
    const ukScale = new Float32Array(H * r * ukCols);
    for (let n = 0; n < H * r; n++) for (let j = 0; j < ukCols; j++) ukScale[n * ukCols + j] = scaleAt((n / r | 0) * (dn + dv) + j * bkT, n % r);
    const uvCols = Math.ceil(r / bk);
    const uvScale = new Float32Array(H * dv * uvCols);
    for (let n = 0; n < H * dv; n++) for (let j = 0; j < uvCols; j++) uvScale[n * uvCols + j] = scaleAt((n / dv | 0) * (dn + dv) + dn + (n % dv), j * bk);
    const u8 = (len: number): Uint8Array => new Uint8Array(len);
    return pair('f8_e4m3', permute(w.data, u8, H * r, dn, ukSrc), permute(w.data, u8, H * dv, r, uvSrc),
      rowBlockedScale(ukScale, H * r, ukCols, bkT), rowBlockedScale(uvScale, H * dv, uvCols, bk));
  }
  if (w.format === 'bf16' || w.format === 'f16') {
    const u16 = (len: number): Uint16Array => new Uint16Array(len);
    return pair(w.format, permute(w.data, u16, H * r, dn, ukSrc), permute(w.data, u16, H * dv, r, uvSrc));
  }
  const f = w.format === 'f32' ? w.data : weightToF32(w);
  const f32 = (len: number): Float32Array => new Float32Array(len);
  return pair('f32', permute(f, f32, H * r, dn, ukSrc), permute(f, f32, H * dv, r, uvSrc));
}

/**
 * {@link mlaAbsorbQuery} in one backend call: group h of `q_nope` times `W_UK[h]ᵀ`, then the rope part copied after
 * it. Rows stay independent (batch invariant).
 * @param q [numTokens, numHeads, dn+dr] f32 (rope part already rotated)
 * @returns [numTokens, numHeads, kvLoraRank+dr] f32
 */
export function mlaAbsorbQueryOps(ops: Ops, q: Float32Array, numTokens: number, w: MlaAbsorbWeights, d: MlaDims): Float32Array {
  const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, kvLoraRank: r } = d;
  const out = new Float32Array(numTokens * H * (r + dr));
  if (numTokens === 0) return out;
  ops.groupedMatmul(q, numTokens, H, w.wUkT, { xRowStride: H * (dn + dr), xGroupStride: dn + dr, outRowStride: H * (r + dr), outGroupStride: r + dr }, out);
  for (let t = 0; t < numTokens * H; t++) {
    const qOff = t * (dn + dr) + dn;
    const o = t * (r + dr) + r;
    for (let c = 0; c < dr; c++) out[o + c] = q[qOff + c];
  }
  return out;
}

/**
 * {@link mlaAbsorbOutput} in one backend call: group h of `ô` times `W_UV[h]ᵀ`. Rows stay independent (batch invariant).
 * @param latentOut [numTokens, numHeads, kvLoraRank] f32
 * @returns [numTokens, numHeads, dv] f32
 */
export function mlaAbsorbOutputOps(ops: Ops, latentOut: Float32Array, numTokens: number, w: MlaAbsorbWeights, d: MlaDims): Float32Array {
  const { numHeads: H, vHeadDim: dv } = d;
  if (numTokens === 0) return new Float32Array(0);
  return ops.groupedMatmul(latentOut, numTokens, H, w.wUv, undefined, new Float32Array(numTokens * H * dv));
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


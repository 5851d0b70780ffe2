// Conformance suite for Ops backends: hand-checkable vectors for every op, stored-format weights equal to their
// dequantized f32 form, and batch invariance (a row alone == the same row in a batch). Every backend runs it:
//   runOpsConformance('cpu-ref', () => new CpuOps(), { tol: 0 /* extra slack beyond the vectors' own */ });
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng, f32ToBf16, f32ToFp8E4m3, FP8_E4M3_TO_F32 } from '../common/index.js';
import type { AttentionBatch, AttentionParams, Ops, Weight } from './ops.js';

/** Options of the suite. */
export interface OpsConformanceOptions {
  /** Absolute tolerance for comparisons against exact expectations (reference: 1e-6). */
  readonly tol?: number;
  /** Case names to skip, each with a reason (printed). */
  readonly skip?: Readonly<Record<string, string>>;
}

function close(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i] - expected[i]) <= tol * Math.max(1, Math.abs(expected[i])), `${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

function f32w(rows: number, cols: number, values: number[]): Weight {
  return { format: 'f32', shape: [rows, cols], data: Float32Array.from(values) };
}

function randn(rng: Rng, n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = rng.nextGaussian() * scale;
  return a;
}

/** A one-request AttentionBatch over seq positions 0..n-1 with the given locs, extending `numNew` tokens. */
function oneReqBatch(locs: number[], numNew: number): AttentionBatch {
  return {
    numReqs: 1,
    extendStartLoc: Int32Array.of(0),
    extendSeqLens: Int32Array.of(numNew),
    extendPrefixLens: Int32Array.of(locs.length - numNew),
    reqPoolIndices: Int32Array.of(0),
    reqToToken: Int32Array.from(locs),
    reqToTokenStride: locs.length,
  };
}

/**
 * Registers the conformance tests for one backend with node:test.
 * @param makeOps creates the backend under test
 */
export function runOpsConformance(name: string, makeOps: () => Ops, options: OpsConformanceOptions = {}): void {
  const tol = options.tol ?? 1e-6;
  const ops = makeOps();
  const cases: Record<string, () => void> = {
    'matmul: hand vector, y = x·Wᵀ with W [N,K]': () => {
      const y = ops.matmul(Float32Array.of(1, 2, 3, 4), 2, f32w(3, 2, [1, 0, 0, 1, 1, 1]));
      close(y, [1, 2, 3, 3, 4, 7], tol, 'matmul');
    },
    'matmul: bf16, f16 and block-fp8 weights equal their dequantized f32 values': () => {
      const rng = new Rng(1);
      const rows = 130; // partial second block row
      const cols = 5;
      const codes = new Uint8Array(rows * cols);
      for (let i = 0; i < codes.length; i++) codes[i] = f32ToFp8E4m3(rng.nextGaussian() * 8);
      const scale = { data: Float32Array.of(0.5, 0.25), shape: [2, 1] as [number, number], blockSize: [128, 128] as [number, number] };
      const deq = new Float32Array(rows * cols);
      for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) deq[r * cols + c] = FP8_E4M3_TO_F32[codes[r * cols + c]] * (r < 128 ? 0.5 : 0.25);
      const x = randn(rng, 3 * cols);
      const ref = ops.matmul(x, 3, { format: 'f32', shape: [rows, cols], data: deq });
      close(ops.matmul(x, 3, ops.prepareWeight({ name: 'w', dtype: 'f8_e4m3', shape: [rows, cols], bytes: codes, scale })), ref, tol, 'fp8 prepared');
      close(ops.matmul(x, 3, { format: 'fp8_block', shape: [rows, cols], data: codes, scale }), ref, tol, 'fp8 held');
      const bits = new Uint16Array(deq.length);
      for (let i = 0; i < deq.length; i++) bits[i] = f32ToBf16(deq[i]);
      const bfVals = Float32Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]);
      const refBf = ops.matmul(x, 3, { format: 'f32', shape: [rows, cols], data: bfVals });
      close(ops.matmul(x, 3, { format: 'bf16', shape: [rows, cols], data: bits }), refBf, tol, 'bf16 held');
      close(ops.matmul(x, 3, ops.prepareWeight({ name: 'w', dtype: 'bf16', shape: [rows, cols], bytes: new Uint8Array(bits.buffer) })), refBf, tol, 'bf16 prepared');
      const f16 = Uint16Array.of(0x3c00, 0xc000, 0x3800, 0x0000); // 1, -2, 0.5, 0
      close(ops.matmul(Float32Array.of(1, 1), 1, { format: 'f16', shape: [2, 2], data: f16 }), [-1, 0.5], tol, 'f16');
    },
    'matmul: a row alone equals the same row inside a larger batch (batch invariance)': () => {
      const rng = new Rng(2);
      const w = f32w(37, 29, Array.from(randn(rng, 37 * 29)));
      const x = randn(rng, 9 * 29);
      const all = ops.matmul(x, 9, w);
      for (const r of [0, 4, 8]) assert.deepEqual(ops.matmul(x.slice(r * 29, (r + 1) * 29), 1, w), all.slice(r * 37, (r + 1) * 37));
    },
    'embedding: rows of the table': () => {
      close(ops.embedding(Int32Array.of(2, 0), f32w(3, 2, [1, 2, 3, 4, 5, 6])), [5, 6, 1, 2], 0, 'embedding');
    },
    'rmsNorm: [3,4] → [3,4]/sqrt(12.5) · w; xRowStride reads a prefix of wider rows': () => {
      const r = 1 / Math.sqrt(12.5 + 1e-6);
      close(ops.rmsNorm(Float32Array.of(3, 4), 1, 2, Float32Array.of(1, 2), 1e-6), [3 * r, 8 * r], tol, 'rmsNorm');
      close(ops.rmsNorm(Float32Array.of(3, 4, 100, 0, 1, 99), 2, 2, Float32Array.of(1, 1), 0, undefined, 3), [3 / Math.sqrt(12.5), 4 / Math.sqrt(12.5), 0, Math.SQRT2], tol, 'rmsNorm stride');
    },
    'layerNorm: [1,2,3] → (x−2)/sqrt(2/3) · w + b': () => {
      const s = 1 / Math.sqrt(2 / 3);
      close(ops.layerNorm(Float32Array.of(1, 2, 3), 1, 3, Float32Array.of(1, 1, 2), Float32Array.of(0, 0.5, 0), 0), [-s, 0.5, 2 * s], tol, 'layerNorm');
    },
    'rope: neox pairs (i, i+d/2), interleaved pairs (2i, 2i+1), partial and offset dims untouched': () => {
      const invFreq = Float32Array.of(1, 0.5);
      const c1 = Math.cos(1), s1 = Math.sin(1), c2 = Math.cos(0.5), s2 = Math.sin(0.5);
      const neox = Float32Array.of(1, 2, 3, 4);
      ops.rope(neox, 1, Int32Array.of(1), { numHeads: 1, headDim: 4 }, { invFreq, rotaryDim: 4, style: 'neox' });
      close(neox, [1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2], 1e-6, 'neox');
      const inter = Float32Array.of(1, 2, 3, 4);
      ops.rope(inter, 1, Int32Array.of(1), { numHeads: 1, headDim: 4 }, { invFreq, rotaryDim: 4, style: 'interleaved' });
      close(inter, [1 * c1 - 2 * s1, 2 * c1 + 1 * s1, 3 * c2 - 4 * s2, 4 * c2 + 3 * s2], 1e-6, 'interleaved');
      // partial rotary: 2 of 4 dims per head, two heads, position 0 is the identity
      const part = Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 9, 9, 0, 1, 9, 9);
      ops.rope(part, 2, Int32Array.of(0, 1), { numHeads: 2, headDim: 4 }, { invFreq: Float32Array.of(1), rotaryDim: 2, style: 'neox' });
      close(part, [1, 2, 3, 4, 5, 6, 7, 8, c1, s1, 9, 9, -s1, c1, 9, 9], 1e-6, 'partial');
      // offset 2 inside a 4-dim head, rowStride 5 (one extra value per row), mscale 2
      const off = Float32Array.of(7, 7, 1, 0, 7);
      ops.rope(off, 1, Int32Array.of(1), { numHeads: 1, headDim: 4, rowStride: 5, offset: 2 }, { invFreq: Float32Array.of(1), rotaryDim: 2, style: 'interleaved', mscale: 2 });
      close(off, [7, 7, 2 * c1, 2 * s1, 7], 1e-6, 'offset');
    },
    'softmax, sigmoid, siluAndMul, add: hand values': () => {
      close(ops.softmax(Float32Array.of(0, Math.log(2), 5, 5), 2, 2), [1 / 3, 2 / 3, 0.5, 0.5], tol, 'softmax');
      close(ops.sigmoid(Float32Array.of(0, Math.log(3))), [0.5, 0.75], tol, 'sigmoid');
      close(ops.siluAndMul(Float32Array.of(1, -2), Float32Array.of(2, 3)), [2 / (1 + Math.exp(-1)), (3 * -2) / (1 + Math.exp(2))], tol, 'silu');
      close(ops.add(Float32Array.of(1, 2), Float32Array.of(3, -5)), [4, -3], 0, 'add');
    },
    'topk: descending, ties keep the lower index, NaN ranks last': () => {
      const r = ops.topk(Float32Array.of(1, 3, 3, 2, NaN, 0, -1, 0), 2, 4, 2);
      assert.deepEqual(Array.from(r.indices), [1, 2, 1, 3]);
      close(r.values, [3, 3, 0, 0], 0, 'topk values');
    },
    'attention: causal softmax over paged locs, GQA head mapping, sparse keys': () => {
      // seq idx 0 → loc 5: k=[1,0] v=[10]; idx 1 → loc 2: k=[0,1] v=[20]. Two q heads share the one kv head.
      const kBuf = new Float32Array(12);
      const vBuf = new Float32Array(6);
      kBuf.set([1, 0], 10); vBuf[5] = 10;
      kBuf.set([0, 1], 4); vBuf[2] = 20;
      const p: AttentionParams = { numHeads: 2, numKvHeads: 1, headDim: 2, vHeadDim: 1, scale: 1, kBuf, kRowWidth: 2, kOffset: 0, vBuf, vRowWidth: 1, vOffset: 0 };
      const q = Float32Array.of(0, 0, 5, 5, Math.log(3), 0, 0, Math.log(3)); // [token][head][dim]
      const out = ops.attention(q, 2, p, oneReqBatch([5, 2], 2));
      // token 0 sees only key 0 → 10; token 1 head 0 weights [3/4, 1/4] → 12.5, head 1 weights [1/4, 3/4] → 17.5
      close(out, [10, 10, 12.5, 17.5], 1e-6, 'attention');
      const sparse = ops.attention(q.slice(4), 1, p, oneReqBatch([5, 2], 1), { indices: Int32Array.of(1, -1), width: 2 });
      close(sparse, [20, 20], 1e-6, 'sparse');
      // decode row over a cached prefix; K/V read at offsets inside wider rows (MLA-style shared buffer)
      const kv = new Float32Array(4 * 3);
      kv.set([1, 0, 10], 3); kv.set([0, 1, 20], 6);
      const mqa: AttentionParams = { numHeads: 1, numKvHeads: 1, headDim: 2, vHeadDim: 1, scale: 1, kBuf: kv, kRowWidth: 3, kOffset: 0, vBuf: kv, vRowWidth: 3, vOffset: 2 };
      close(ops.attention(Float32Array.of(Math.log(3), 0), 1, mqa, oneReqBatch([1, 2], 1)), [12.5], 1e-6, 'mla-style');
    },
    'attention: a request alone equals the same request batched with others (batch invariance)': () => {
      const rng = new Rng(3);
      const H = 4, Hkv = 2, hd = 8, locs = 64;
      const kBuf = randn(rng, locs * Hkv * hd);
      const vBuf = randn(rng, locs * Hkv * hd);
      const p: AttentionParams = { numHeads: H, numKvHeads: Hkv, headDim: hd, vHeadDim: hd, scale: 1 / Math.sqrt(hd), kBuf, kRowWidth: Hkv * hd, kOffset: 0, vBuf, vRowWidth: Hkv * hd, vOffset: 0 };
      // req A: 3 cached + 4 new, locs 10..16; req B: decode at seq idx 5, locs 30..35
      const table = new Int32Array(2 * 8);
      for (let i = 0; i < 7; i++) table[i] = 10 + i;
      for (let i = 0; i < 6; i++) table[8 + i] = 30 + i;
      const qA = randn(rng, 4 * H * hd);
      const qB = randn(rng, 1 * H * hd);
      const both = ops.attention(Float32Array.from([...qA, ...qB]), 5, p, {
        numReqs: 2, extendStartLoc: Int32Array.of(0, 4), extendSeqLens: Int32Array.of(4, 1), extendPrefixLens: Int32Array.of(3, 5),
        reqPoolIndices: Int32Array.of(0, 1), reqToToken: table, reqToTokenStride: 8,
      });
      const aloneB = ops.attention(qB, 1, p, {
        numReqs: 1, extendStartLoc: Int32Array.of(0), extendSeqLens: Int32Array.of(1), extendPrefixLens: Int32Array.of(5),
        reqPoolIndices: Int32Array.of(1), reqToToken: table, reqToTokenStride: 8,
      });
      assert.deepEqual(both.slice(4 * H * hd), aloneB);
      const aloneA = ops.attention(qA, 4, p, {
        numReqs: 1, extendStartLoc: Int32Array.of(0), extendSeqLens: Int32Array.of(4), extendPrefixLens: Int32Array.of(3),
        reqPoolIndices: Int32Array.of(0), reqToToken: table, reqToTokenStride: 8,
      });
      assert.deepEqual(both.slice(0, 4 * H * hd), aloneA);
    },
    'groupedMatmul: per-group products at strided layouts equal matmul of each group; a row alone == in a batch': () => {
      // 2 groups, N=2, K=3: W_0 = [[1,0,0],[0,1,1]], W_1 = [[2,0,0],[0,0,-1]]
      const w = f32w(4, 3, [1, 0, 0, 0, 1, 1, 2, 0, 0, 0, 0, -1]);
      close(ops.groupedMatmul(Float32Array.of(1, 2, 3, 4, 5, 6), 1, 2, w), [1, 5, 8, -6], tol, 'grouped');
      // x rows of width 9 with groups at stride 4 (plus padding), output rows of width 6 with groups at stride 3
      const x = Float32Array.of(1, 2, 3, 9, 4, 5, 6, 9, 9, -1, 0, 1, 9, 0, 0, 2, 9, 9);
      const out = new Float32Array(12).fill(7);
      ops.groupedMatmul(x, 2, 2, w, { xRowStride: 9, xGroupStride: 4, outRowStride: 6, outGroupStride: 3 }, out);
      close(out, [1, 5, 7, 8, -6, 7, -1, 1, 7, 0, -2, 7], tol, 'grouped strided');
      const rng = new Rng(4);
      const wr = f32w(3 * 5, 7, Array.from(randn(rng, 3 * 5 * 7)));
      const xr = randn(rng, 6 * 3 * 7);
      const all = ops.groupedMatmul(xr, 6, 3, wr);
      for (let g = 0; g < 3; g++) {
        const xg = new Float32Array(6 * 7);
        for (let m = 0; m < 6; m++) xg.set(xr.subarray(m * 21 + g * 7, m * 21 + g * 7 + 7), m * 7);
        const wg: Weight = { format: 'f32', shape: [5, 7], data: (wr.data as Float32Array).slice(g * 35, (g + 1) * 35) };
        const yg = ops.matmul(xg, 6, wg);
        for (let m = 0; m < 6; m++) assert.deepEqual(all.slice(m * 15 + g * 5, m * 15 + g * 5 + 5), yg.slice(m * 5, m * 5 + 5), `group ${g} row ${m} == matmul`);
      }
      assert.deepEqual(ops.groupedMatmul(xr.slice(4 * 21, 5 * 21), 1, 3, wr), all.slice(4 * 15, 5 * 15));
    },
    'indexerTopK: Σ_h w·ReLU(q·k) over causal keys, top-k ascending, all keys while ≤ topK, −1 padding': () => {
      // keys (headDim 2) of positions 0..3 through locs 3,1,0,2: k0=(-1,2) k1=(0,1) k2=(1,0) k3=(1,1); 2 heads
      const kBuf = Float32Array.of(1, 0, 9, 9, 0, 1, 9, 9, 1, 1, 9, 9, -1, 2, 9, 9); // kRowWidth 4
      const table = Int32Array.of(3, 1, 0, 2);
      const batch: AttentionBatch = { numReqs: 1, extendStartLoc: Int32Array.of(0), extendSeqLens: Int32Array.of(3), extendPrefixLens: Int32Array.of(1), reqPoolIndices: Int32Array.of(0), reqToToken: table, reqToTokenStride: 4 };
      // rows: positions 1, 2, 3; topK 2. Position 1 keeps [0, 1] whatever q is.
      const q = Float32Array.of(0, 0, 0, 0, /* pos 2 */ 1, 0, 0, 1, /* pos 3 */ 0, 1, 1, 0);
      const wts = Float32Array.of(0, 0, /* pos 2 */ 1, 2, /* pos 3 */ -1, 1);
      const out = ops.indexerTopK(q, wts, 3, { numHeads: 2, headDim: 2, topK: 2, kBuf, kRowWidth: 4 }, batch);
      // pos 2: I = 1·ReLU(k.x) + 2·ReLU(k.y) → [4, 2, 1] → {0, 1}; pos 3: I = ReLU(k.x) − ReLU(k.y) → [-2, -1, 1, 0] → {2, 3}
      assert.deepEqual(Array.from(out), [0, 1, 0, 1, 2, 3]);
      const wide = ops.indexerTopK(new Float32Array(0), new Float32Array(0), 3, { numHeads: 2, headDim: 2, topK: 5, kBuf, kRowWidth: 4 }, batch);
      assert.deepEqual(Array.from(wide), [0, 1, -1, -1, -1, 0, 1, 2, -1, -1, 0, 1, 2, 3, -1]);
      // ties → lower position: all scores equal
      const tie = ops.indexerTopK(Float32Array.of(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), new Float32Array(6), 3, { numHeads: 2, headDim: 2, topK: 2, kBuf, kRowWidth: 4 }, batch);
      assert.deepEqual(Array.from(tie), [0, 1, 0, 1, 0, 1]);
    },
    'fusedMoe: weighted SwiGLU experts, skipped ids, per-token invariance': () => {
      // D=2, I=1. Expert 0: gate [1,0], up [0,1], down [[1],[2]]. Expert 1: gate [0,1], up [1,1], down [[-1],[0]].
      const experts = [
        { gate: f32w(1, 2, [1, 0]), up: f32w(1, 2, [0, 1]), down: f32w(2, 1, [1, 2]) },
        { gate: f32w(1, 2, [0, 1]), up: f32w(1, 2, [1, 1]), down: f32w(2, 1, [-1, 0]) },
        null,
      ];
      const silu = (z: number): number => z / (1 + Math.exp(-z));
      const x = Float32Array.of(1, 2, -1, 0.5);
      const out = ops.fusedMoe(x, 2, 2, experts, Int32Array.of(1, 0, 2, 0), Float32Array.of(0.25, 0.75, 0.5, 0.5), 2);
      const h0a = silu(1) * 2, h0b = silu(2) * 3; // token 0: expert 0, expert 1
      const h1a = silu(-1) * 0.5; // token 1: expert 0 only (expert 2 is absent)
      close(out, [0.75 * h0a - 0.25 * h0b, 0.75 * 2 * h0a, 0.5 * h1a, 0.5 * 2 * h1a], tol, 'fusedMoe');
      const alone = ops.fusedMoe(x.slice(2), 1, 2, experts, Int32Array.of(2, 0), Float32Array.of(0.5, 0.5), 2);
      assert.deepEqual(alone, out.slice(2));
    },
  };
  for (const [caseName, fn] of Object.entries(cases)) {
    const reason = options.skip?.[caseName];
    test(`[${name}] ${caseName}`, reason ? { skip: reason } : {}, fn);
  }
}

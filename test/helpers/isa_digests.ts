// Run as a script (`node dist/test/helpers/isa_digests.js`): prints one JSON object {case: sha256 prefix} of the
// native linear-layer kernels' outputs (matmul in every stored format over M 1..100 — the direct and the blocked
// paths on either side of their thresholds, k tails, partial FP8 blocks, several k blocks —, groupedMatmul and
// fusedMoe) and of the fused sampler (tokens and RNG use of every mode over Gaussian, peaked, quantized and flat
// rows — the flat top-p tails take the radix sort) on fixed random inputs. test/native_isa.test.ts runs it with and without TSGLANG_NO_AVX512=1 and with 1
// and 2 threads: the AVX-512 and AVX2 kernels must give the same bits.
import { createHash } from 'node:crypto';
import { Rng, f32ToBf16, f32ToFp8E4m3 } from '../../src/common/index.js';
import { installNativeSampling } from '../../src/engine/index.js';
import { createOps } from '../../src/kernels/index.js';
import { normalizeSamplingParams, sampleRows } from '../../src/sampling/index.js';
import type { StoredTensor } from '../../src/kernels/index.js';

const ops = createOps({ backend: 'native', threads: Number(process.env.ISA_THREADS ?? 1) });
const rng = new Rng(5);
const randn = (n: number, s = 1): Float32Array => Float32Array.from({ length: n }, () => rng.nextGaussian() * s);
const digest = (y: Float32Array): string => createHash('sha256').update(Buffer.from(y.buffer, y.byteOffset, y.byteLength)).digest('hex').slice(0, 16);

/** A random [n, k] tensor of `dtype` (F16 as BF16 bit patterns with the exponent's top bit cleared: finite halves). */
function stored(dtype: 'f32' | 'bf16' | 'f16' | 'f8_e4m3', n: number, k: number, block: [number, number] = [128, 128]): StoredTensor {
  const v = randn(n * k, 0.5);
  if (dtype === 'f32') return { name: 'w', dtype, shape: [n, k], bytes: new Uint8Array(v.buffer) };
  if (dtype !== 'f8_e4m3') return { name: 'w', dtype, shape: [n, k], bytes: new Uint8Array(Uint16Array.from(v, (x) => f32ToBf16(x) & (dtype === 'f16' ? 0xbbff : 0xffff)).buffer) };
  const codes = Uint8Array.from({ length: n * k }, () => f32ToFp8E4m3(rng.nextGaussian() * 40));
  const sr = Math.ceil(n / block[0]);
  const sc = Math.ceil(k / block[1]);
  return { name: 'w', dtype, shape: [n, k], bytes: codes, scale: { data: Float32Array.from({ length: sr * sc }, () => 2 ** -8 * (0.5 + rng.nextFloat())), shape: [sr, sc], blockSize: block } };
}

const out: Record<string, string> = {};
const shapes: [number, number, [number, number]][] = [[131, 261, [128, 128]], [7, 9, [128, 128]], [260, 136, [128, 128]], [37, 45, [16, 24]], [50, 1100, [128, 128]], [140, 1800, [128, 128]], [96, 1000, [32, 40]]];
for (const fmt of ['f32', 'bf16', 'f16', 'f8_e4m3'] as const) {
  for (const [n, k, block] of shapes) {
    const w = ops.prepareWeight(stored(fmt, n, k, block));
    for (const m of [1, 2, 3, 4, 5, 8, 9, 13, 32, 47, 48, 49, 64, 100]) out[`matmul ${fmt} [${n},${k}] M=${m}`] = digest(ops.matmul(randn(m * k), m, w));
  }
  const g = ops.prepareWeight(stored(fmt, 4 * 40, 128, [16, 128]));
  for (const m of [1, 4, 9, 64]) out[`groupedMatmul ${fmt} M=${m}`] = digest(ops.groupedMatmul(randn(m * 4 * 128), m, 4, g));
}
const D = 136;
const I = 72;
for (const fmt of ['bf16', 'f8_e4m3'] as const) {
  const experts = Array.from({ length: 8 }, () => ({ gate: ops.prepareWeight(stored(fmt, I, D)), up: ops.prepareWeight(stored(fmt, I, D)), down: ops.prepareWeight(stored(fmt, D, I)) }));
  for (const T of [1, 3, 17, 40, 300]) {
    const ids = Int32Array.from({ length: T * 2 }, (_, i) => (i % 2 === 0 ? (i >> 1) % 8 : ((i >> 1) * 3 + 1) % 8 === (i >> 1) % 8 ? ((i >> 1) + 1) % 8 : ((i >> 1) * 3 + 1) % 8));
    out[`fusedMoe ${fmt} T=${T}`] = digest(ops.fusedMoe(randn(T * D), T, D, experts, ids, Float32Array.from({ length: T * 2 }, () => rng.nextFloat()), 2));
  }
}
// The fused sampler (native/src/fused_sampling.cc: AVX-512 and AVX2 exp / max / gather passes): the drawn tokens and
// the RNG state after each row (logprobs are left out: their lse sums in another order, an f32 ulp apart at times).
if (installNativeSampling(undefined, Number(process.env.ISA_THREADS ?? 1))) {
  const modes = { greedy: { temperature: 0 }, temp: { temperature: 1 }, top_p: { temperature: 0.8, topP: 0.95 }, top_k: { temperature: 1, topK: 40 }, min_p: { temperature: 0.7, minP: 0.05 }, combined: { temperature: 1.3, topK: 50, topP: 0.9, minP: 0.02 } };
  for (const V of [1000, 32000]) {
    for (const [name, sp] of Object.entries(modes)) {
      const B = 24;
      const logits = new Float32Array(B * V);
      for (let b = 0; b < B; b++) {
        const kind = b % 4;
        for (let i = 0; i < V; i++) logits[b * V + i] = kind === 0 ? 2 * rng.nextGaussian() : kind === 1 ? Math.round(rng.nextGaussian() * 2) / 2 : kind === 2 ? 0.2 * rng.nextGaussian() : 0.25;
        if (kind === 0) for (let j = 0; j < 3; j++) logits[b * V + rng.nextInt(V)] = 12 - j;
      }
      const params = normalizeSamplingParams(sp, V);
      const rngs = Array.from({ length: B }, (_, b) => new Rng(1000 + b));
      const got = sampleRows(logits, V, rngs.map((r, b) => ({ logitIdx: b, info: { params, rng: r, outputCounts: new Map(), numOutputTokens: 0, stopTokenIds: [], topLogprobsNum: 0, needLogprob: false } })));
      out[`fusedSampler ${name} V=${V}`] = createHash('sha256').update(got.map((g, b) => `${g.tokenId}:${rngs[b].nextU32()}`).join(',')).digest('hex').slice(0, 16);
    }
  }
}
process.stdout.write(JSON.stringify(out) + '\n');

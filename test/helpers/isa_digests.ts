// Run as a script (`node dist/test/helpers/isa_digests.js`): prints one JSON object {case: sha256 prefix} of the
// native linear-layer kernels' outputs (matmul in every stored format over M 1..100 — the direct and the blocked
// paths on either side of their thresholds, k tails, partial FP8 blocks, several k blocks —, groupedMatmul and
// fusedMoe) on fixed random inputs. test/native_isa.test.ts runs it with and without TSGLANG_NO_AVX512=1 and with 1
// and 2 threads: the AVX-512 and AVX2 kernels must give the same bits.
import { createHash } from 'node:crypto';
import { Rng, f32ToBf16, f32ToFp8E4m3 } from '../../src/common/index.js';
import { createOps } from '../../src/kernels/index.js';
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
process.stdout.write(JSON.stringify(out) + '\n');

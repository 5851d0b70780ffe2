// Loading the native addon (native/build/Release/tsglang_native.node, built by scripts/build_native.mjs during
// npm install). Loading never throws: a missing build, a CPU without AVX2/FMA/F16C or a load error yields
// `null` plus a one-line reason, and callers fall back to the TypeScript reference.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { readKernelEnv } from '../../config/index.js';
import type { KernelEnv } from '../../config/index.js';

/** An opaque native object (thread pool / weight view), owned by the JS garbage collector. */
export type NativeHandle = { readonly __nativeHandle: unique symbol };

/** The functions the addon exports (native/src/addon.cc). All sizes are element counts; arrays are f32 unless named. */
export interface NativeAddon {
  createBackend(threads: number, gemmMode: number, blasMinM: number): NativeHandle;
  buildInfo(): { blas: boolean; isa: string };
  makeWeight(format: number, data: Float32Array | Uint16Array | Uint8Array, n: number, k: number, scale: Float32Array | null,
    sRows: number, sCols: number, bn: number, bk: number): NativeHandle;
  matmul(b: NativeHandle, x: Float32Array, m: number, w: NativeHandle, out: Float32Array): void;
  embedding(b: NativeHandle, ids: Int32Array, table: NativeHandle, out: Float32Array): void;
  rmsNorm(b: NativeHandle, x: Float32Array, rows: number, width: number, xStride: number, w: Float32Array, eps: number, out: Float32Array): void;
  layerNorm(b: NativeHandle, x: Float32Array, rows: number, width: number, w: Float32Array, bias: Float32Array, eps: number, out: Float32Array): void;
  softmax(b: NativeHandle, x: Float32Array, rows: number, width: number, out: Float32Array): void;
  /** kind 0 add, 1 sigmoid (b ignored), 2 siluAndMul. */
  elementwise(kind: number, a: Float32Array, b: Float32Array | null, out: Float32Array): void;
  rope(b: NativeHandle, x: Float32Array, numTokens: number, positions: Int32Array, numHeads: number, headDim: number,
    rowStride: number, offset: number, invFreq: Float32Array, rotaryDim: number, interleaved: boolean, mscale: number): void;
  topk(b: NativeHandle, x: Float32Array, rows: number, width: number, k: number, idx: Int32Array, val: Float32Array): void;
  attention(b: NativeHandle, q: Float32Array, numTokens: number, ints: Int32Array, scale: number, kBuf: Float32Array, vBuf: Float32Array,
    extendStartLoc: Int32Array, extendSeqLens: Int32Array, extendPrefixLens: Int32Array, reqPoolIndices: Int32Array,
    reqToToken: Int32Array, sparse: Int32Array | null, out: Float32Array,
    /** [kKind, kRowFloats, kFp8Dims, vKind, vRowFloats, vFp8Dims] (common/kv_dtype.ts); kBuf / vBuf are the raw row storage */
    kvInts: Int32Array, kvScales: Float32Array): void;
  /** ints = [groups, xRowStride, xGroupStride, outRowStride, outGroupStride]. */
  groupedMatmul(b: NativeHandle, x: Float32Array, m: number, w: NativeHandle, ints: Int32Array, out: Float32Array): void;
  /** ints = [numHeads, headDim, topK, kRowWidth, numReqs, reqToTokenStride]. */
  indexerTopK(b: NativeHandle, q: Float32Array, weights: Float32Array, numTokens: number, ints: Int32Array, kBuf: Float32Array,
    extendStartLoc: Int32Array, extendSeqLens: Int32Array, extendPrefixLens: Int32Array, reqPoolIndices: Int32Array,
    reqToToken: Int32Array, out: Int32Array, kvInts: Int32Array, kScale: number): void;
  fusedMoe(b: NativeHandle, x: Float32Array, numTokens: number, hidden: number, experts: readonly unknown[], topkIds: Int32Array,
    topkWeights: Float32Array, topK: number, out: Float32Array): void;
  measureFmaPeak(b: NativeHandle, seconds: number): number;
  measureReadBandwidth(b: NativeHandle, bytes: number, reps: number): number;
  /** Greedy sampling: index of the largest s[i] for i < n, first among equals (native/src/sampling.h). */
  argmaxF32?(s: Float32Array, n: number): number;
  /** Sampler temperature scaling: s[i] = f32(s[i] · invT) in place, returns the max (NaN skipped) (native/src/sampling.h). */
  scaleMaxF32?(s: Float32Array, n: number, invT: number): number;
  /** Sampler exp pass: e[i] = exp(s[i] − shift) (f64, Math.exp-identical), returns Σ e in index order (native/src/sampling.h). */
  expShiftSum?(s: Float32Array, n: number, shift: number, e: Float64Array): number;
  /** Sampler exp pass: p[i] = f32(exp(f32(s[i] − lse))), returns Σ p in index order (native/src/sampling.h). */
  expProbs?(s: Float32Array, n: number, lse: number, p: Float32Array): number;
  /** Sampler candidate gather: writes the i < n with e[i] ≥ bound to ids (ascending), returns their count (native/src/sampling.h). */
  selectAtLeast?(e: Float64Array, n: number, bound: number, ids: Int32Array): number;
  /** `bytes` zeroed bytes, 2 MiB aligned, advised for transparent huge pages; null when the memory cannot be mapped. */
  allocWeightMemory?(bytes: number): ArrayBuffer | null;
  /**
   * Fused sampler: every sampling mode for the rows of [*, V] logits on b's threads; params 8 f64 per row (invT (0 =
   * greedy), topK, topP, minP, u, wantLp, topN, 0); tok / lp / status out per row (native/src/fused_sampling.h).
   */
  fusedSampleRows?(b: NativeHandle, logits: Float32Array, V: number, rows: Int32Array, params: Float64Array, tok: Int32Array, lp: Float64Array, status: Int32Array): void;
}

/** The compute backend (thread pool) of this thread's model per thread count (registerComputeBackend). */
const computeBackends = new Map<number, NativeHandle>();

/**
 * Records the backend a model's NativeOps computes on, so that other native work of the same thread (the sampler)
 * runs on the same pool instead of a second one: one set of worker threads per JS thread, never more busy threads
 * than the pool's size. Pools are not re-entrant: only callers on this JS thread, one call at a time, may share it.
 */
export function registerComputeBackend(threads: number, backend: NativeHandle): void {
  computeBackends.set(threads, backend);
}

/** The backend registered for `threads` on this JS thread, or null. */
export function computeBackendFor(threads: number): NativeHandle | null {
  return computeBackends.get(threads) ?? null;
}

/** Outcome of loading the addon. */
export interface NativeAddonStatus {
  readonly addon: NativeAddon | null;
  /** Absolute path tried (or loaded). */
  readonly path: string;
  /** Why the addon is unavailable (null when loaded). */
  readonly reason: string | null;
}

let cached: NativeAddonStatus | undefined;

/** Default location: `<repo>/native/build/Release/tsglang_native.node` (this file is dist/src/kernels/native/*.js). */
function defaultAddonPath(): string {
  return fileURLToPath(new URL('../../../../native/build/Release/tsglang_native.node', import.meta.url));
}

/** CPU flags the addon was compiled for (-mavx2 -mfma -mf16c); null when /proc/cpuinfo is unreadable (then we just try). */
function missingCpuFeatures(): string[] | null {
  let info: string;
  try {
    info = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return null;
  }
  const line = /^flags\s*:(.*)$/m.exec(info);
  if (!line) return null;
  const flags = new Set(line[1].trim().split(/\s+/));
  return ['avx2', 'fma', 'f16c'].filter((f) => !flags.has(f));
}

/**
 * Loads the addon once per process (the first call's settings win).
 * @param env nativeAddonPath overrides the path, nativeDisabled disables the addon (default: config's readKernelEnv(),
 *   i.e. env TSGLANG_NATIVE_ADDON / TSGLANG_NATIVE=0)
 * @returns the addon or null with the reason; never throws
 */
export function loadNativeAddon(env: Pick<KernelEnv, 'nativeAddonPath' | 'nativeDisabled'> = readKernelEnv()): NativeAddonStatus {
  if (cached) return cached;
  const path = env.nativeAddonPath ?? defaultAddonPath();
  const fail = (reason: string): NativeAddonStatus => (cached = { addon: null, path, reason });
  if (env.nativeDisabled) return fail('disabled by TSGLANG_NATIVE=0');
  if (!existsSync(path)) return fail(`native addon not built (${path} missing; run \`npm run build:native\`)`);
  const missing = missingCpuFeatures();
  if (missing && missing.length > 0) return fail(`CPU lacks ${missing.join(', ')} (the addon needs AVX2, FMA and F16C)`);
  try {
    const addon = createRequire(import.meta.url)(path) as NativeAddon;
    if (typeof addon.matmul !== 'function') return fail(`${path} is not the tsglang addon`);
    return (cached = { addon, path, reason: null });
  } catch (err) {
    return fail(`native addon failed to load: ${(err as Error).message.split('\n')[0]}`);
  }
}

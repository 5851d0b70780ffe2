// The native sampling kernels of a thread (the sampler's module state is per thread): installed by the engine core
// for rank 0's sampling and by a pipeline's last stage, which samples on its own thread (pp_stage.ts).
import { availableParallelism } from 'node:os';
import { readKernelEnv, type KernelEnv } from '../config/index.js';
import { computeBackendFor, loadNativeAddon, type NativeAddon, type NativeHandle } from '../kernels/index.js';
import { setSamplerKernels } from '../sampling/index.js';

/**
 * Gives the sampler the native addon's greedy argmax and exp passes (bit-identical to its JavaScript loops; about
 * 3× (exp) and 10× (argmax) faster per vocab id) when the addon loads and the backend is not forced to 'cpu';
 * otherwise leaves the JavaScript loops. When the addon has the fused sampler (fusedSampleRows), a decode step's
 * rows (every sampling mode) run through it over `threads` threads — the model's own pool when its NativeOps has
 * that many threads, else a pool of their own (sampleRows).
 * @param threads threads of the fused sampler (default: available cores)
 * @returns true when installed
 */
export function installNativeSampling(env: KernelEnv = readKernelEnv(), threads = availableParallelism()): boolean {
  if (env.backend === 'cpu') return false;
  const addon = loadNativeAddon(env).addon;
  if (!addon?.argmaxF32 || !addon.scaleMaxF32 || !addon.expShiftSum || !addon.expProbs || !addon.selectAtLeast) return false;
  const fused = addon.fusedSampleRows;
  const rows = fused ? samplingBackend(addon, Math.max(1, Math.floor(threads))) : null;
  setSamplerKernels({
    argmax: addon.argmaxF32, scaleMax: addon.scaleMaxF32, expShiftSum: addon.expShiftSum, expProbs: addon.expProbs, selectAtLeast: addon.selectAtLeast,
    ...(rows && fused ? {
      fusedRows: (l: Float32Array, V: number, r: Int32Array, p: Float64Array, tok: Int32Array, lp: Float64Array, st: Int32Array) => fused(rows, l, V, r, p, tok, lp, st),
    } : {}),
  });
  return true;
}

/**
 * The thread pool of the fused sampler: the model's own (computeBackendFor: the same worker threads, so sampling
 * adds no spinning threads), else one per thread count for the life of the thread (a model without native ops).
 */
const samplingBackends = new Map<number, NativeHandle>();
function samplingBackend(addon: NativeAddon, threads: number): NativeHandle {
  const shared = computeBackendFor(threads);
  if (shared) return shared;
  let b = samplingBackends.get(threads);
  if (!b) { b = addon.createBackend(threads, 0, 32); samplingBackends.set(threads, b); }
  return b;
}


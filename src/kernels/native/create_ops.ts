// Backend selection: `createOps({ backend, threads })` for the loader, model runner and CLI.
import { availableParallelism } from 'node:os';
import { InvalidRequestError } from '../../common/index.js';
import { readKernelEnv } from '../../config/index.js';
import type { KernelEnv } from '../../config/index.js';
import type { Ops } from '../ops.js';
import { CpuOps } from '../cpu/cpu_ops.js';
import { loadNativeAddon } from './native_addon.js';
import { NativeOps } from './native_ops.js';
import type { GemmMode } from './native_ops.js';

/** 'native' = the C++ addon (error if unavailable), 'cpu' = the TypeScript reference, 'auto' = native else cpu. */
export type OpsBackend = 'auto' | 'native' | 'cpu';

/** Options of createOps. Unset fields come from `env` (TSGLANG_BACKEND / TSGLANG_THREADS / TSGLANG_GEMM), then defaults. */
export interface CreateOpsOptions {
  /** The kernel environment variables, read by config's readKernelEnv() (default: read now). */
  readonly env?: KernelEnv;
  readonly backend?: OpsBackend;
  /** Compute threads incl. the calling thread (native only); default: available cores. */
  readonly threads?: number;
  /** Large-M matmul engine of the native backend (default 'own': batch invariant). */
  readonly gemm?: GemmMode;
  /** Where the one fallback warning goes (default stderr). */
  readonly warn?: (line: string) => void;
}

let warned = false;

/** Parses a backend name (CLI flag or env). @throws InvalidRequestError naming `what` for anything else */
export function parseOpsBackend(value: string, what = 'backend'): OpsBackend {
  if (value === 'auto' || value === 'native' || value === 'cpu') return value;
  throw new InvalidRequestError(`${what} must be one of auto, native, cpu; got '${value}'`, what);
}

/**
 * Default compute threads: env TSGLANG_THREADS, else the available cores.
 * @param env the kernel environment (default: config's readKernelEnv())
 */
export function defaultThreads(env: Pick<KernelEnv, 'threads'> = readKernelEnv()): number {
  return env.threads ?? Math.max(1, availableParallelism());
}

/** True when the native addon is built and loads on this CPU. */
export function nativeBackendAvailable(): boolean {
  return loadNativeAddon().addon !== null;
}

/**
 * Creates the compute backend. 'auto' (default) uses the native addon when it loads, else the TS reference after
 * one warning line (once per process).
 * @throws InvalidRequestError for backend 'native' when the addon is unavailable, or threads < 1
 */
export function createOps(options: CreateOpsOptions = {}): Ops {
  const env = options.env ?? readKernelEnv();
  const backend = options.backend ?? parseOpsBackend(env.backend, 'TSGLANG_BACKEND');
  const threads = options.threads ?? defaultThreads(env);
  if (!Number.isInteger(threads) || threads < 1) throw new InvalidRequestError(`threads must be an integer ≥ 1, got ${threads}`, 'threads');
  if (backend === 'cpu') return new CpuOps();
  const status = loadNativeAddon(env);
  if (status.addon) {
    const gemm = options.gemm ?? env.gemm;
    return new NativeOps(status.addon, { threads, gemm });
  }
  if (backend === 'native') throw new InvalidRequestError(`native backend unavailable: ${status.reason}`, 'backend');
  if (!warned) {
    warned = true;
    (options.warn ?? ((l: string) => process.stderr.write(l)))(`WARNING tsglang: ${status.reason}; using the TypeScript reference kernels (slow)\n`);
  }
  return new CpuOps();
}

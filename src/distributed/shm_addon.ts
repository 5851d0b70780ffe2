// The shared-memory collectives of the native addon (native/src/shm_comm_napi.cc), loaded from the compute addon's
// file (native/build/Release/tsglang_native.node; $TSGLANG_NATIVE_ADDON overrides it, TSGLANG_NATIVE=0 disables it).
// Loading never throws: an absent or old addon gives null plus the reason, and the factory falls back to the
// plain-TypeScript communicator. Node caches a .node file per path, so this and kernels/ share one module instance.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { readKernelEnv } from '../config/index.js';

/** An opaque native per-rank handle (owned by the JS garbage collector). */
export type ShmHandle = { readonly __shmHandle: unique symbol };

/** Status codes of the native collectives (native/src/shm_comm.h ShmStatus). */
export const SHM_OK = 0;
export const SHM_TIMEOUT = 1;
export const SHM_ABORTED = 2;
export const SHM_MISMATCH = 3;

/** What a failed call left behind (shmLastError). */
export interface ShmErrorInfo {
  readonly status: number;
  /** Ranks that had not arrived when the call timed out. */
  readonly missing: number[];
  /** The group's abort word (1 + the rank that died, −1 closed, −2 aborted by the owner) when status is SHM_ABORTED. */
  readonly abortCode: number;
  /** For SHM_MISMATCH: which ranks called what. */
  readonly detail: string;
  /** This rank's step counter at the failure. */
  readonly seq: number;
}

/** The addon's shm functions. All return a status code (SHM_OK …) unless noted; timeoutMs < 0 waits forever. */
export interface ShmAddon {
  /** @param view a Uint8Array over the whole group SharedArrayBuffer */
  shmAttach(view: Uint8Array, rank: number, size: number, slotBytes: number, spinNs: number): ShmHandle;
  shmAllReduce(h: ShmHandle, buf: Float32Array, timeoutMs: number): number;
  shmAllGather(h: ShmHandle, src: ArrayBufferView, dst: ArrayBufferView, timeoutMs: number): number;
  shmReduceScatter(h: ShmHandle, src: Float32Array, dst: Float32Array, timeoutMs: number): number;
  shmBroadcast(h: ShmHandle, buf: ArrayBufferView, root: number, timeoutMs: number): number;
  shmAllToAll(h: ShmHandle, src: ArrayBufferView, dst: ArrayBufferView, timeoutMs: number): number;
  shmBarrier(h: ShmHandle, timeoutMs: number): number;
  shmLastError(h: ShmHandle): ShmErrorInfo;
  /** The group's abort word (0 while healthy). */
  shmAbortCode(view: Uint8Array): number;
  /** Breaks the group and wakes every waiter (any thread). code ≠ 0. */
  shmAbort(view: Uint8Array, size: number, code: number): void;
}

let cached: { addon: ShmAddon | null; reason: string | null } | undefined;

/**
 * The addon's shared-memory collectives, loaded once per thread.
 * @returns the functions, or null with the reason (addon not built, disabled, or built before the shm collectives)
 */
export function loadShmAddon(): { addon: ShmAddon | null; reason: string | null } {
  if (cached) return cached;
  const env = readKernelEnv();
  const path = env.nativeAddonPath ?? fileURLToPath(new URL('../../../native/build/Release/tsglang_native.node', import.meta.url));
  const fail = (reason: string) => (cached = { addon: null, reason });
  if (env.nativeDisabled) return fail('native addon disabled by TSGLANG_NATIVE=0');
  if (!existsSync(path)) return fail(`native addon not built (${path} missing)`);
  try {
    const mod = createRequire(import.meta.url)(path) as Partial<ShmAddon>;
    if (typeof mod.shmAttach !== 'function') return fail(`${path} has no shared-memory collectives (rebuild it: npm run build:native)`);
    return (cached = { addon: mod as ShmAddon, reason: null });
  } catch (err) {
    return fail(`native addon failed to load: ${(err as Error).message.split('\n')[0]}`);
  }
}

// The in-process group factory: one call on the thread that owns the rank threads makes the shared memory of a group,
// the handle (plain data) goes to every rank thread in workerData, and each rank opens its end. The native shm
// communicator (shm_communicator.ts) is used when the addon with its shm collectives loads; otherwise the
// plain-TypeScript SabCommunicator (sab_communicator.ts) — the same results, bit for bit (both sum in rank order with
// f32 rounding), only slower.
import { DistributedError } from '../common/index.js';
import type { Communicator } from './communicator.js';
import { createSabGroup, SabCommunicator } from './sab_communicator.js';
import type { SabGroupHandle } from './sab_communicator.js';
import { loadShmAddon } from './shm_addon.js';
import { abortShmGroup, createShmGroup, ShmCommunicator } from './shm_communicator.js';
import type { ShmGroupHandle } from './shm_communicator.js';

/** A SabCommunicator group handle, tagged. */
export interface SabLocalGroupHandle extends SabGroupHandle {
  readonly backend: 'sab';
}

/** An in-process group's handle (structured-clonable: pass it to every rank thread). */
export type LocalGroupHandle = ShmGroupHandle | SabLocalGroupHandle;

/** Options of createLocalGroup. */
export interface LocalGroupOptions {
  /** Group name for messages ("tp", "world", …). Default "world". */
  readonly name?: string;
  /** Bytes of each rank's slot; the backend's default when unset (shm 1 MiB, sab 4 MiB). */
  readonly slotBytes?: number;
  /** Timeout of each call in ms (default 1 800 000, torch.distributed's 30 minutes). */
  readonly timeoutMs?: number;
  /** 'auto' (native when the addon loads, else sab), 'shm' (native or throw), 'sab'. Default 'auto'. */
  readonly backend?: 'auto' | 'shm' | 'sab';
}

/**
 * Makes the shared memory of an in-process group of `size` ranks.
 * @throws DistributedError for a bad size/slot, or backend 'shm' without the native addon (the message says why)
 */
export function createLocalGroup(size: number, options: LocalGroupOptions = {}): LocalGroupHandle {
  const want = options.backend ?? 'auto';
  if (want !== 'sab') {
    const { addon, reason } = loadShmAddon();
    if (addon) return createShmGroup(size, options);
    if (want === 'shm') throw new DistributedError(`group '${options.name ?? 'world'}': the native shm communicator is unavailable (${reason})`);
  }
  return { ...createSabGroup(size, options), backend: 'sab' };
}

/**
 * Opens rank `rank`'s end of a group made by createLocalGroup (on the rank's own thread).
 * @throws DistributedError for a rank outside the group or a backend unavailable on this thread
 */
export function openLocalCommunicator(handle: LocalGroupHandle, rank: number): Communicator {
  return handle.backend === 'shm' ? new ShmCommunicator(handle, rank) : new SabCommunicator(handle, rank);
}

/**
 * Breaks a group from the owner's thread, e.g. when a rank thread exited or threw: every rank inside or entering a
 * collective throws DistributedError at once instead of waiting out its timeout (the shm backend also carries
 * `deadRank` and `reason` into the message; the sab one reports "rank deadRank failed").
 * @param deadRank the rank that died, or null for a shutdown by the owner
 */
export function abortLocalGroup(handle: LocalGroupHandle, deadRank: number | null, reason: string): void {
  if (handle.backend === 'shm') return abortShmGroup(handle, deadRank, reason);
  new SabCommunicator(handle, deadRank ?? 0).abort();
}

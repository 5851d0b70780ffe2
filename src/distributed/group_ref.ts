// A group as plain data, whatever carries it: an in-process group (native shm or SharedArrayBuffer) or a Gloo group
// across processes. The thread that sets up the ranks makes the refs; each rank thread opens its end with openGroup.
import type { Communicator } from './communicator.js';
import { GlooCommunicator } from './gloo_communicator.js';
import type { GlooGroupSpec } from './gloo_communicator.js';
import { openLocalCommunicator } from './local_group.js';
import type { LocalGroupHandle } from './local_group.js';

/** A Gloo group, every field but the rank (the rank is given to openGroup). */
export interface GlooGroupRef {
  readonly backend: 'gloo';
  readonly spec: Omit<GlooGroupSpec, 'rank'>;
}

/** Any group (structured-clonable: pass it in workerData). */
export type GroupRef = LocalGroupHandle | GlooGroupRef;

/**
 * Opens `rank`'s end of the group (an in-process group attaches; a Gloo group joins, blocking until every rank has).
 * @throws DistributedError when the backend is unavailable or the peers do not join in time
 */
export function openGroup(ref: GroupRef, rank: number): Communicator {
  if (ref.backend === 'gloo') return new GlooCommunicator({ ...ref.spec, rank });
  return openLocalCommunicator(ref, rank);
}

/**
 * Breaks a communicator's group because this rank failed, so peers blocked in it fail at once: abort() where the
 * communicator has it (shm, sab: the shared memory is poisoned; Gloo: the TCP pairs close), else close().
 */
export function abortCommunicator(c: Communicator): void {
  const a = (c as { abort?: () => void }).abort;
  if (typeof a === 'function') a.call(c);
  else c.close();
}

/**
 * Another Gloo group of the same cluster and start-up as `base` (the same TCP store and run prefix), named `name`
 * with `size` ranks: every node derives the same group from its own `base` (its bind address kept), so the ranks meet.
 */
export function glooSubgroupRef(base: GlooGroupRef, name: string, size: number): GlooGroupRef {
  const suffix = `${base.spec.name}/`;
  const root = base.spec.prefix.endsWith(suffix) ? base.spec.prefix.slice(0, -suffix.length) : base.spec.prefix;
  return { backend: 'gloo', spec: { ...base.spec, name, prefix: `${root}${name}/`, size } };
}

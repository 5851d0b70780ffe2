// Which KV transfer backend a PD server uses (--disaggregation-transfer-backend). SGLang's names for libraries tsglang
// cannot load stop start-up with a message naming what is available; without the flag the best backend available on
// this machine is used (SGLang's default, mooncake, is not available here): ucx when its addon loads, else tcp, named
// in the start-up log.
import { UnsupportedFeatureError } from '../common/index.js';
import { loadUcxAddon } from './ucx_addon.js';

/** Every name the flag accepts: SGLang's, plus tsglang's `tcp` and `ucx`. */
export const TRANSFER_BACKENDS = ['mooncake', 'nixl', 'ascend', 'mori', 'mooncake_tcp', 'fake', 'tcp', 'ucx'] as const;

/** A backend tsglang runs (`fake`: SGLang's no-transfer backend, for warm-up and tests; never the default). */
export type TransferBackendChoice = 'ucx' | 'tcp' | 'fake';

/** Why each backend that does not run here is unavailable. */
const UNAVAILABLE: Record<string, string> = {
  mooncake: 'tsglang cannot load the Mooncake transfer engine (a Python/CUDA library)',
  mooncake_tcp: 'tsglang cannot load the Mooncake transfer engine (a Python/CUDA library)',
  nixl: 'tsglang cannot load NVIDIA NIXL (a CUDA library)',
  ascend: 'tsglang cannot load the Ascend transfer engine (it needs Ascend NPUs)',
  mori: 'tsglang cannot load MORI (it needs AMD GPUs)',
};

/**
 * Backends that run on this machine, the default first: ucx when its addon loads (one-sided puts; shared memory on one
 * host, TCP or RDMA across hosts), then tcp (the payload over the control connection).
 */
export function availableTransferBackends(): TransferBackendChoice[] {
  return loadUcxAddon().addon ? ['ucx', 'tcp', 'fake'] : ['tcp', 'fake'];
}

/**
 * The backend to use. @param given the flag's value, or null when it was not given
 * @throws UnsupportedFeatureError for a backend that cannot run here, naming the ones that can
 */
export function resolveTransferBackend(given: string | null): TransferBackendChoice {
  const avail = availableTransferBackends();
  if (given === null) return avail[0];
  if ((avail as string[]).includes(given)) return given as TransferBackendChoice;
  const why = given === 'ucx' ? loadUcxAddon().reason ?? 'unknown' : UNAVAILABLE[given] ?? 'unknown backend';
  throw new UnsupportedFeatureError(`--disaggregation-transfer-backend ${given} is not available: ${why}. Available here: ${avail.join(', ')}`);
}

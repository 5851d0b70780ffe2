// Environment variables of the distributed layer (read only here, like every TSGLANG_ variable).

/** The communicators' environment. */
export interface DistEnv {
  /** $TSGLANG_SHM_SPIN_US (µs ≥ 0): how long a waiting shm rank spins before it sleeps; null = the default. */
  readonly shmSpinUs: number | null;
  /** $TSGLANG_GLOO_ADDON: path of dist_gloo.node (null: native/gloo/build/Release/dist_gloo.node). */
  readonly glooAddonPath: string | null;
  /** $SGLANG_PP_LAYER_PARTITION: decoder layers per pipeline stage, comma-separated (null: SGLang's even split). */
  readonly ppLayerPartition: string | null;
}

/**
 * Reads TSGLANG_SHM_SPIN_US, TSGLANG_GLOO_ADDON and SGLANG_PP_LAYER_PARTITION.
 * @param env process.env or a test copy
 */
export function readDistEnv(env: NodeJS.ProcessEnv = process.env): DistEnv {
  const spin = env.TSGLANG_SHM_SPIN_US !== undefined && env.TSGLANG_SHM_SPIN_US !== '' ? Number(env.TSGLANG_SHM_SPIN_US) : NaN;
  return {
    shmSpinUs: Number.isFinite(spin) && spin >= 0 ? spin : null,
    glooAddonPath: env.TSGLANG_GLOO_ADDON || null,
    ppLayerPartition: env.SGLANG_PP_LAYER_PARTITION || null,
  };
}

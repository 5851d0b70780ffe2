// Public surface of layers/ (level 3: imports common, config, kernels, distributed, mem_cache, sampling).
export * from './forward_batch.js';

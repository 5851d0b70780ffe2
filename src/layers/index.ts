// Public surface of layers/ (level 3: imports common, config, kernels, distributed, mem_cache, sampling).
export * from './forward_batch.js';
export * from './rotary_yarn.js';
export * from './moe/grouped_topk.js';
export * from './attention/dsa_indexer.js';
export * from './attention/mla.js';

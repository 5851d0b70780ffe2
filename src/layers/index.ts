// Public surface of layers/ (level 3: imports common, config, kernels, distributed, mem_cache, sampling).
export * from './forward_batch.js';
export * from './rotary_yarn.js';
export * from './moe/grouped_topk.js';
export * from './attention/dsa_indexer.js';
export * from './attention/mla.js';
export * from './linear.js';
export * from './norm.js';
export * from './scratch.js';
export * from './rotary.js';
export * from './embedding.js';
export * from './logits_processor.js';
export * from './simple_batch.js';
export * from './attention/backend.js';
export * from './attention/cpu_backend.js';
export * from './attention/radix_attention.js';
export * from './moe/router.js';
export * from './moe/experts.js';

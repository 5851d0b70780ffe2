export * from './kv_pool.js';
export * from './req_to_token_pool.js';
export * from './allocator.js';
export * from './base_prefix_cache.js';
export * from './radix_cache.js';
export * from './chunk_cache.js';
export * from './kv_rows.js';

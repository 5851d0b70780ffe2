export * from './kv_pool.js';

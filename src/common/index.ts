// Public surface of common/ (level 0: imports nothing from src/).
export * from './errors.js';
export * from './assert.js';
export * from './dtype.js';
export * from './tensor.js';
export * from './rng.js';
export * from './logger.js';
export * from './async_queue.js';
export * from './py_json.js';
export * from './py_repr.js';
export * from './fs_utils.js';
export * from './kv_dtype.js';

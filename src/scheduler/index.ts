// Public surface of scheduler/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './schedule_policy.js';
export * from './schedule_batch.js';
export * from './io.js';
export * from './req.js';
export * from './cache_manager.js';
export * from './forward_batch_builder.js';
export * from './scheduler.js';
export * from './grammar.js';
export * from './spec_decode.js';

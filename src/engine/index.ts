// Public surface of engine/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './types.js';
export * from './messages.js';
export * from './detokenizer_manager.js';
export * from './async_encoder.js';
export * from './tokenizer_worker.js';
export * from './tokenizer_manager.js';
export * from './engine_core.js';
export * from './transport.js';
export * from './engine.js';
export * from './dp_controller.js';
export * from './remote_core.js';

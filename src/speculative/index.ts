// Public surface of speculative/ (see ARCHITECTURE.md for what it may import).
export * from './spec_config.js';
export * from './spec_tree.js';
export * from './spec_verify.js';
export * from './draft_model.js';

// Public surface of tokenizer/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './tokenizer.js';
export * from './incremental_detokenizer.js';

// Public surface of tokenizer/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './tokenizer.js';
export * from './byte_level.js';
export * from './token_bound.js';
export * from './incremental_detokenizer.js';
export * from './chat_template.js';
export * from './encoding_dsv32.js';
export * from './tiny_tokenizer.js';

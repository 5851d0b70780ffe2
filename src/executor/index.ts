// Public surface of executor/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './tiny_weights.js';

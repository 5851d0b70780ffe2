// Public surface of engine/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './types.js';

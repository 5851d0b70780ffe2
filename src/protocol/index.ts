// Public surface of protocol/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './sse.js';
export * from './openai.js';
export * from './generate.js';

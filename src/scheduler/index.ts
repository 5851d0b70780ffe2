// Public surface of scheduler/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './schedule_policy.js';

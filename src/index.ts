// Package entry: the public API of tsglang (grows as the engine and server land).
export * from './common/index.js';

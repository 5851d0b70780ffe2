// Public surface of sampling/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './sampling_params.js';
export * from './sampler.js';
export * from './fused_rows.js';
export { topLogprobsOf } from './top_logprobs.js';

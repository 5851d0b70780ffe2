// Public surface of executor/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './model_runner.js';
export * from './tiny_weights.js';
export * from './memory_plan.js';
export * from './step_codec.js';
export * from './rank_channel.js';
export * from './tp_runner.js';
export * from './dp_lockstep.js';
export * from './dp_attention_runner.js';
export * from './demo_weights.js';
export * from './native_sampling.js';
export * from './pp_protocol.js';
export * from './pp_stage.js';
export * from './pp_layout.js';
export * from './pp_runner.js';
export * from './kv_steps.js';

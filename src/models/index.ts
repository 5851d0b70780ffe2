// Public surface of models/ (level 4: imports layers and everything layers may).
export * from './safetensors.js';
export * from './weights.js';
export * from './model_base.js';
export * from './registry.js';
export * from './loader.js';
export * from './minimax_m2.js';
export * from './deepseek_v32.js';
export * from './deepseek_v32_config.js';
export * from './scripted.js';

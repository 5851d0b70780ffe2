// Public surface of config/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './server_args.js';
export * from './slices.js';
export * from './model_config.js';
export * from './dist_env.js';

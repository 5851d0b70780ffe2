// Public surface of server/ (see ARCHITECTURE.md for what it may import).
export {};
export * from './http_errors.js';
export * from './http_server.js';
export * from './context.js';
export * from './chat_prompt.js';
export * from './chat_output.js';
export * from './metrics.js';
export * from './request_utils.js';
export * from './serving_chat.js';
export * from './serving_completions.js';
export * from './serving_generate.js';
export * from './serving_tokenize.js';

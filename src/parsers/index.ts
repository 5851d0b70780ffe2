// Public surface of parsers/ (see ARCHITECTURE.md for what it may import).

export * from './types.js';
export * from './reasoning_parser.js';
export * from './function_call_parser.js';
export * from './chat_output.js';
export * from './schema_typing.js';
export * from './minimax_m2.js';
export * from './deepseekv32_detector.js';
export * from './deepseekv31_detector.js';
export * from './json_array_parser.js';
export * from './tool_constraint.js';

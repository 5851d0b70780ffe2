// Package entry (`import { Engine, ... } from 'tsglang'`): the public API, by name, so that internals can move
// without breaking users. Layers of SGLang this mirrors: sglang.Engine (offline engine), sglang.launch_server
// (`serve`), ServerArgs parsing, the model loader, the OpenAI wire schemas and the chat parsers.
//
//   parseServerArgs(argv) ─▶ engineSlice(args, modelPath) ─▶ Engine.create(options) ─▶ engine.generate(req)
//                                                             loadModel(dir, { ops: createOps() }) (no server)

// Errors, logging, small utilities (the error classes are part of every contract below).
export * from './common/index.js';

// Server arguments (SGLang flags) and the model config.
export {
  SERVER_FLAGS,
  defaultServerArgs,
  engineSlice,
  httpServerSlice,
  loadModelConfig,
  parseModelConfig,
  parseOverrideArgs,
  parseServerArgs,
  readKernelEnv,
  readServerEnv,
  servedModelName,
  serverArgsHelp,
  validateServerArgs,
} from './config/index.js';
export type {
  EngineSlice,
  FlagSpec,
  HttpServerConfig,
  ModelConfig,
  ParsedServerArgs,
  QuantConfig,
  ServerArgs,
  ServerArgsCheck,
  ServerEnv,
  KernelEnv,
} from './config/index.js';

// Compute backends: createOps picks the native addon when built, else the portable CPU ops.
export { CpuOps, createCpuOps, createOps, loadNativeAddon } from './kernels/index.js';
export type { Ops } from './kernels/index.js';

// Models: load a local Hugging Face checkpoint directory.
export { Checkpoint, MODEL_DEFINITIONS, getModelDefinition, loadModel } from './models/index.js';
export type { CausalLM, LoadOptions, LoadedModel, ModelDefinition } from './models/index.js';

// Sampling parameters (SGLang sampling_params.py).
export { DEFAULT_MAX_NEW_TOKENS } from './sampling/index.js';
export type { SamplingParams, SamplingParamsInput } from './sampling/index.js';

// Tokenizer and chat prompts.
export { ChatPromptBuilder, HfTokenizer, IncrementalDetokenizer, loadTokenizer } from './tokenizer/index.js';
export type { BuiltPrompt, ChatRequestLike, DecodeOptions, EncodeOptions, PromptBuilderOptions, Tokenizer } from './tokenizer/index.js';

// The engine (SGLang's sglang.Engine): tokenizer manager here, prompt encoding in a tokenizer worker thread,
// scheduler + model in a worker thread.
export { Engine } from './engine/index.js';
export type {
  EngineApi,
  EngineInfo,
  EngineLoad,
  EngineOptions,
  FinishReason,
  GenerateOutput,
  GenerateRequest,
  OutputLogprobs,
  TokenLogprob,
} from './engine/index.js';

// Reasoning and tool-call parsers (SGLang --reasoning-parser / --tool-call-parser).
export {
  ChatOutputProcessor,
  REASONING_PARSER_NAMES,
  TOOL_CALL_PARSER_NAMES,
  aggregateChatDeltas,
  parseChatOutput,
} from './parsers/index.js';
export type { ChatDelta, ChatParseOptions, ParsedChatOutput, ParsedToolCall } from './parsers/index.js';

// OpenAI-compatible and native wire schemas (zod) and SSE framing.
export {
  ChatCompletionRequestSchema,
  CompletionRequestSchema,
  GenerateReqInputSchema,
  parseWire,
} from './protocol/index.js';
export type { ChatCompletionRequest, CompletionRequest, GenerateReqInput } from './protocol/index.js';

// HTTP server and the command line: `serve(argv)` is `tsglang serve` (sglang.launch_server), `main(argv)` the
// whole CLI; both resolve to the process exit code.
export { HttpServer } from './server/index.js';
export { main } from './cli/main.js';
export { run as serve } from './cli/serve.js';

// What every route handler gets: the server's dependencies and one HTTP exchange (JSON or SSE response,
// abort signal tied to the client connection). No routing here.
import type { Logger } from '../common/index.js';
import type { HttpServerConfig } from '../config/index.js';
import type { EngineApi } from '../engine/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import type { ChatPromptSource } from './chat_prompt.js';
import type { ChatOutputParsing } from './chat_output.js';
import type { ServerMetrics } from './metrics.js';

/** Static facts about the served checkpoint (config.json) for /get_model_info. */
export interface ModelFacts {
  readonly modelType: string | null;
  readonly architectures: readonly string[];
}

/** Dependencies of the HTTP server, built once by `tsglang serve` (or a test). */
export interface ServerDeps {
  readonly engine: EngineApi;
  /** For logprob token texts, /v1/tokenize; null with --skip-tokenizer-init. */
  readonly tokenizer: Tokenizer | null;
  readonly config: HttpServerConfig;
  /** Chat prompt construction; null when the model has no chat template (chat requests then fail with 400). */
  readonly chatPrompt: ChatPromptSource | null;
  /** Reasoning / tool-call parsing of chat outputs. */
  readonly chatOutput: ChatOutputParsing;
  readonly modelFacts: ModelFacts;
  /** Resolved server args, snake_case, for /get_server_info. */
  readonly serverArgs: Readonly<Record<string, unknown>>;
  readonly metrics: ServerMetrics | null;
  readonly logger: Logger;
  /** /get_server_info `version`: the SGLang release tsglang follows (SGLang reports its own __version__ there). */
  readonly version: string;
  /** tsglang's own version (package.json), reported beside it as `tsglang_version`. */
  readonly tsglangVersion?: string;
  /** Default output dir of /start_profile ($SGLANG_TORCH_PROFILER_DIR, else /tmp, as SGLang). */
  readonly profilerDir?: string;
  /** Largest request body accepted, bytes (default http_server.ts MAX_BODY_BYTES, ~512 MiB); larger → 413. */
  readonly maxBodyBytes?: number;
}

/** One request/response pair as the handlers see it. */
export interface Exchange {
  /** Aborted when the client disconnects before the response is complete. */
  readonly signal: AbortSignal;
  /** performance.now() (ms) when the request arrived: the start of TTFT and E2E latency (SGLang's created_time). */
  readonly arrivalMs: number;
  /** True once a status line was written. */
  readonly headersSent: boolean;
  /** Writes a complete JSON response. */
  sendJson(status: number, body: unknown): void;
  /** Writes a plain-text response. */
  sendText(status: number, text: string, contentType?: string): void;
  /** Starts a 200 `text/event-stream` response. */
  startSse(): void;
  /** Writes one raw SSE event (already encoded). */
  writeSse(event: string): void;
  /** Ends the response. */
  end(): void;
}

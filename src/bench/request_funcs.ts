// One benchmark request per backend, timed the way sglang.bench_serving times it: `st` just before the POST,
// each non-empty body line timestamped when read (TTFT at the first line with text, ITL between text lines,
// E2E latency at the last line incl. [DONE]). Source: python/sglang/bench_serving.py (async_request_*).
// Knows wire formats (protocol/) and HTTP, nothing of datasets or metrics.
import { parseSseLine, SseLineSplitter } from '../protocol/index.js';
import { httpRequest } from './http_client.js';
import type { BenchChatMessage } from './bench_tokenizer.js';

/** Time source of the bench client (injectable: tests drive it from the fake server). */
export interface Clock {
  /** Monotonic time in seconds. */
  now(): number;
  /** Resolves after `seconds` (request-rate gaps). */
  sleep(seconds: number): Promise<void>;
}

/** The wall clock: performance.now() and setTimeout. */
export const SYSTEM_CLOCK: Clock = {
  now: () => performance.now() / 1000,
  sleep: (seconds) => new Promise((resolve) => setTimeout(resolve, Math.max(0, seconds * 1000))),
};

/** What one request sends (SGLang's `RequestFuncInput`). */
export interface RequestFuncInput {
  /** Text, token ids (native backend only) or chat messages (chat backends). */
  prompt: string | number[] | BenchChatMessage[];
  apiUrl: string;
  promptLen: number;
  /** max_new_tokens / max_tokens / max_completion_tokens. */
  outputLen: number;
  model: string;
  loraName: string | null;
  /** Merged over the payload last (overrides everything, incl. a whole `sampling_params`). */
  extraRequestBody: Record<string, unknown>;
}

/** What one request measured (SGLang's `RequestFuncOutput`); times in seconds. */
export interface RequestFuncOutput {
  generatedText: string;
  success: boolean;
  /** E2E latency: last body line read − st (s). */
  latency: number;
  /** Time to the first line with text (s); 0 if none. */
  ttft: number;
  /** Inter-token latencies (s): native backend one entry per new token, OpenAI backends one per chunk. */
  itl: number[];
  /** Text of each chunk after the first (OpenAI backends), for re-tokenized ITL with speculative decoding. */
  textChunks: string[];
  promptLen: number;
  /** '' on success; `reason: body` for HTTP errors, the exception text otherwise. */
  error: string;
  /** Generated tokens: server-reported when available, else the requested count. */
  outputLen: number;
  /** st (s, on the client clock). */
  startTime: number;
}

/** Run-wide request settings (flags of bench-serving). */
export interface RequestSettings {
  disableStream: boolean;
  disableIgnoreEos: boolean;
  returnLogprob: boolean;
  /** Authorization and `--header` pairs. */
  headers: Record<string, string>;
  clock: Clock;
  /** Whole-request timeout (ms); SGLang uses 6 h. */
  timeoutMs: number;
}

/** Sends one request and measures it; never rejects (failures are `success: false`). */
export type RequestFunc = (input: RequestFuncInput, settings: RequestSettings) => Promise<RequestFuncOutput>;

/** Backends bench-serving accepts (SGLang's, plus `openai` / `openai-chat` as vLLM names them). */
export const BACKENDS = [
  'sglang',
  'sglang-native',
  'sglang-oai',
  'sglang-oai-chat',
  'vllm',
  'vllm-chat',
  'lmdeploy',
  'lmdeploy-chat',
  'openai',
  'openai-chat',
] as const;

/** A backend name. */
export type Backend = (typeof BACKENDS)[number];

/** The API path of a backend (appended to the server root). */
export function apiPathFor(backend: Backend): string {
  switch (backend) {
    case 'sglang':
    case 'sglang-native':
      return '/generate';
    case 'sglang-oai':
    case 'vllm':
    case 'lmdeploy':
    case 'openai':
      return '/v1/completions';
    case 'sglang-oai-chat':
    case 'vllm-chat':
    case 'lmdeploy-chat':
    case 'openai-chat':
      return '/v1/chat/completions';
  }
}

/** The default port of a backend when neither --port nor --base-url is given. */
export function defaultPortFor(backend: Backend): number {
  if (backend === 'lmdeploy') return 23333;
  if (backend === 'vllm') return 8000;
  return 30000;
}

/** The request function of a backend. */
export function requestFuncFor(backend: Backend): RequestFunc {
  const path = apiPathFor(backend);
  if (path === '/generate') return requestSglangGenerate;
  if (path === '/v1/completions') return requestOpenAiCompletions;
  return requestOpenAiChatCompletions;
}

function newOutput(input: RequestFuncInput): RequestFuncOutput {
  return {
    generatedText: '',
    success: false,
    latency: 0,
    ttft: 0,
    itl: [],
    textChunks: [],
    promptLen: input.promptLen,
    error: '',
    outputLen: 0,
    startTime: 0,
  };
}

function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}${err.cause ? ` (${String(err.cause)})` : ''}`;
  return String(err);
}

/**
 * POSTs `payload` and feeds each non-empty body line to `onLine` with the clock read once per line.
 * @returns the HTTP error text, or null on status 200
 */
async function streamLines(
  input: RequestFuncInput,
  settings: RequestSettings,
  payload: unknown,
  onLine: (kind: 'data' | 'done', data: string, ts: number) => void,
): Promise<string | null> {
  const res = await httpRequest(input.apiUrl, {
    json: payload,
    headers: settings.headers,
    signal: AbortSignal.timeout(settings.timeoutMs),
  });
  if (res.status !== 200) return `${res.reason}: ${await res.text()}`;
  if (settings.disableStream) {
    // One JSON document (read whole, so a pretty-printed body also parses); one clock read when it is in.
    const text = (await res.text()).trim();
    const ts = settings.clock.now();
    if (text !== '') onLine('data', text, ts);
    return null;
  }
  const splitter = new SseLineSplitter();
  const handle = (line: string): void => {
    const parsed = parseSseLine(line);
    if (parsed.kind === 'skip') return;
    const ts = settings.clock.now();
    onLine(parsed.kind, parsed.kind === 'data' ? parsed.data : '', ts);
  };
  for await (const chunk of res.body) for (const line of splitter.push(chunk)) handle(line);
  for (const line of splitter.end()) handle(line);
  return null;
}

/**
 * Timing state of one request, handed to its backend's line handler: `st`, the time of the last line that
 * counted, and the output being filled (`ttft`, `itl` and `textChunks` are the handler's to set).
 */
class RequestTiming {
  /** Clock time (s) of the last line that counted; starts at `st`. */
  mostRecent: number;

  constructor(
    /** st (s): clock read just before the POST. */
    readonly st: number,
    readonly output: RequestFuncOutput,
  ) {
    this.mostRecent = st;
  }

  /**
   * Per-chunk timing of the OpenAI backends: the first non-empty chunk sets TTFT, each later one adds an
   * ITL entry (gap since the previous chunk, s) and its text to `textChunks`.
   */
  recordChunk(text: string, ts: number): void {
    if (this.output.ttft === 0) {
      this.output.ttft = ts - this.st;
    } else {
      this.output.textChunks.push(text);
      this.output.itl.push(ts - this.mostRecent);
    }
    this.mostRecent = ts;
  }
}

/**
 * The frame every backend shares: reads `st`, POSTs `payload`, passes each `data:` line (or the whole body when
 * not streaming) to `onData` with its timestamp (s), sets E2E latency from the last line read (incl. `[DONE]`),
 * and turns HTTP errors and exceptions into `success: false` (never rejects). `onSuccess` fills the fields
 * only known at the end (generated text, output length).
 */
async function timedRequest(
  input: RequestFuncInput,
  settings: RequestSettings,
  payload: unknown,
  onData: (data: string, ts: number, timing: RequestTiming) => void,
  onSuccess: (output: RequestFuncOutput) => void,
): Promise<RequestFuncOutput> {
  const output = newOutput(input);
  const st = settings.clock.now();
  output.startTime = st;
  const timing = new RequestTiming(st, output);
  let latency = 0;
  try {
    const error = await streamLines(input, settings, payload, (kind, data, ts) => {
      latency = ts - st;
      if (kind === 'data') onData(data, ts, timing);
    });
    if (error === null) {
      output.success = true;
      output.latency = latency;
      onSuccess(output);
    } else {
      output.error = error;
    }
  } catch (err) {
    output.success = false;
    output.error = describeError(err);
  }
  return output;
}

interface GenerateEvent {
  text?: string;
  meta_info?: { completion_tokens?: number };
}

/**
 * SGLang native `/generate`: cumulative `text` per event; ITL splits each gap evenly over the new tokens
 * (`completion_tokens` delta); events adding no token are skipped.
 */
export const requestSglangGenerate: RequestFunc = (input, settings) => {
  const prompt = input.prompt;
  const payload: Record<string, unknown> = {
    [typeof prompt === 'string' ? 'text' : 'input_ids']: prompt,
    sampling_params: {
      temperature: 0.0,
      max_new_tokens: input.outputLen,
      ignore_eos: !settings.disableIgnoreEos,
    },
    stream: !settings.disableStream,
    lora_path: input.loraName,
    return_logprob: settings.returnLogprob,
    logprob_start_len: -1,
    ...input.extraRequestBody,
  };
  let outputLen = input.outputLen;
  let lastOutputLen = 0;
  return timedRequest(
    input,
    settings,
    payload,
    (data, ts, timing) => {
      const output = timing.output;
      const event = JSON.parse(data) as GenerateEvent;
      if (!event.text) return;
      output.generatedText = event.text;
      outputLen = event.meta_info?.completion_tokens ?? outputLen;
      if (output.ttft === 0) {
        output.ttft = ts - timing.st;
      } else {
        const numNew = outputLen - lastOutputLen;
        if (numNew === 0) return;
        const gap = (ts - timing.mostRecent) / numNew;
        for (let k = 0; k < numNew; k++) output.itl.push(gap);
      }
      timing.mostRecent = ts;
      lastOutputLen = outputLen;
    },
    (output) => {
      output.outputLen = outputLen;
    },
  );
};

interface CompletionEvent {
  choices?: { text?: string; delta?: { content?: string | null }; message?: { content?: string | null } }[];
  usage?: { completion_tokens?: number } | null;
}

function openAiDefaults(payload: Record<string, unknown>, input: RequestFuncInput, settings: RequestSettings): void {
  if (!('temperature' in input.extraRequestBody)) payload.temperature = 0.0;
  if (!('ignore_eos' in input.extraRequestBody)) payload.ignore_eos = !settings.disableIgnoreEos;
  Object.assign(payload, input.extraRequestBody);
  if (input.loraName) {
    payload.model = input.loraName;
    payload.lora_path = input.loraName;
  }
}

/**
 * The part both OpenAI backends share: SGLang's payload defaults (`openAiDefaults`), the event parse and the
 * running text / output length. `textOf` returns the text an event adds ('' for none; it may call
 * `timing.recordChunk`), or null to skip the event entirely (its `usage` is then not read either).
 */
function requestOpenAi(
  input: RequestFuncInput,
  settings: RequestSettings,
  payload: Record<string, unknown>,
  textOf: (event: CompletionEvent, ts: number, timing: RequestTiming) => string | null,
): Promise<RequestFuncOutput> {
  openAiDefaults(payload, input, settings);
  let generated = '';
  let outputLen = input.outputLen;
  return timedRequest(
    input,
    settings,
    payload,
    (data, ts, timing) => {
      const event = JSON.parse(data) as CompletionEvent;
      const text = textOf(event, ts, timing);
      if (text === null) return;
      generated += text;
      outputLen = event.usage?.completion_tokens ?? outputLen;
    },
    (output) => {
      output.generatedText = generated;
      output.outputLen = outputLen;
    },
  );
}

/**
 * OpenAI `/v1/completions`: one ITL entry per non-empty text chunk; output length from `usage` when a text
 * chunk carries it, else the requested count.
 */
export const requestOpenAiCompletions: RequestFunc = (input, settings) => {
  const payload: Record<string, unknown> = {
    model: input.model,
    prompt: input.prompt,
    best_of: 1,
    max_tokens: input.outputLen,
    stream: !settings.disableStream,
  };
  return requestOpenAi(input, settings, payload, (event, ts, timing) => {
    const text = event.choices?.[0]?.text;
    if (!text) return null;
    timing.recordChunk(text, ts);
    return text;
  });
};

/**
 * OpenAI `/v1/chat/completions`: `delta.content` chunks timed as completions (reasoning deltas are not
 * counted, as in SGLang's doc-era client); usage read from any event. Non-streamed: TTFT = latency.
 */
export const requestOpenAiChatCompletions: RequestFunc = (input, settings) => {
  const messages: BenchChatMessage[] = Array.isArray(input.prompt) && typeof input.prompt[0] === 'object'
    ? (input.prompt as BenchChatMessage[])
    : [{ role: 'user', content: typeof input.prompt === 'string' ? input.prompt : JSON.stringify(input.prompt) }];
  const payload: Record<string, unknown> = {
    model: input.model,
    messages,
    max_completion_tokens: input.outputLen,
    stream: !settings.disableStream,
  };
  return requestOpenAi(input, settings, payload, (event, ts, timing) => {
    if (settings.disableStream) {
      // The one whole-body event: its message is the whole text.
      timing.output.ttft = ts - timing.st;
      return event.choices?.[0]?.message?.content ?? '';
    }
    const content = event.choices?.[0]?.delta?.content ?? '';
    if (content) timing.recordChunk(content, ts);
    return content;
  });
};

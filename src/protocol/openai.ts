// OpenAI-compatible wire types of SGLang's server (python/sglang/srt/entrypoints/openai/protocol.py): request
// schemas (zod, snake_case as on the wire, unknown fields ignored as pydantic does) and response shapes.
// Owns the wire format only; the server converts these into camelCase engine types.
import { z } from 'zod';
import { InvalidRequestError } from '../common/index.js';
import { int, num, opt } from './lenient.js';

/** `stop`: a string or a list of strings. */
export const StopSchema = z.union([z.string(), z.array(z.string())]);

/** `stream_options`. */
export const StreamOptionsSchema = z.object({
  include_usage: opt(z.boolean()),
  continuous_usage_stats: opt(z.boolean()),
});

/** One content part of a message (`{type: "text", text}`; other part types are accepted and carried). */
export const ContentPartSchema = z.looseObject({ type: z.string(), text: z.string().optional() });

/** A tool call inside an assistant message. */
export const ToolCallSchema = z.looseObject({
  id: opt(z.string()),
  type: opt(z.string()),
  index: opt(int()),
  function: z.looseObject({ name: opt(z.string()), arguments: opt(z.union([z.string(), z.record(z.string(), z.unknown())])) }),
});

/** One chat message. */
export const ChatMessageSchema = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z.union([z.string(), z.array(z.union([ContentPartSchema, z.string()]))]).nullish(),
  name: opt(z.string()),
  tool_calls: opt(z.array(ToolCallSchema)),
  tool_call_id: opt(z.string()),
  reasoning_content: opt(z.string()),
});

/** A tool definition. */
export const ToolSchema = z.looseObject({
  type: z.literal('function').default('function'),
  function: z.looseObject({
    name: z.string(),
    description: opt(z.string()),
    parameters: opt(z.record(z.string(), z.unknown())),
    strict: opt(z.boolean()),
  }),
});

/**
 * Sampling fields that `/v1/chat/completions` and `/v1/completions` share (same names, types and leniency;
 * SGLang declares them on both request models in protocol.py). Spread into each schema in wire order.
 */
const SAMPLING_FIELDS = {
  temperature: opt(num()),
  top_p: opt(num()),
  top_k: opt(int()),
  min_p: opt(num()),
  repetition_penalty: opt(num()),
  frequency_penalty: opt(num()),
  presence_penalty: opt(num()),
  n: opt(int()),
  stop: opt(StopSchema),
  stop_token_ids: opt(z.array(int())),
  seed: opt(int()),
};

/** Logit bias, streaming and output-shaping fields shared by both OpenAI request bodies. */
const STREAM_AND_OUTPUT_FIELDS = {
  logit_bias: opt(z.record(z.string(), num())),
  stream: opt(z.boolean()),
  stream_options: opt(StreamOptionsSchema),
  ignore_eos: opt(z.boolean()),
  no_stop_trim: opt(z.boolean()),
  skip_special_tokens: opt(z.boolean()),
  min_tokens: opt(int()),
};

/**
 * `response_format` (SGLang protocol.py ResponseFormat / StructuralTagResponseFormat): `text`, `json_object`,
 * `json_schema` with `json_schema: {name, description?, schema, strict?}`, or `structural_tag` (legacy
 * `structures` + `triggers`, or a `format` object); other fields are kept for the structural tag.
 */
export const ResponseFormatSchema = z.looseObject({
  type: z.string(),
  json_schema: opt(z.looseObject({ name: opt(z.string()), description: opt(z.string()), schema: opt(z.unknown()), strict: opt(z.boolean()) })),
});
/** A parsed response_format. */
export type ResponseFormat = z.infer<typeof ResponseFormatSchema>;

/** `POST /v1/chat/completions` body (ChatCompletionRequest). */
export const ChatCompletionRequestSchema = z.looseObject({
  messages: z.array(ChatMessageSchema),
  model: z.string().default('default'),
  max_tokens: opt(int()),
  max_completion_tokens: opt(int()),
  ...SAMPLING_FIELDS,
  logprobs: opt(z.boolean()),
  top_logprobs: opt(int()),
  ...STREAM_AND_OUTPUT_FIELDS,
  tools: opt(z.array(ToolSchema)),
  tool_choice: opt(z.union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string() }) })])),
  parallel_tool_calls: opt(z.boolean()),
  chat_template_kwargs: opt(z.record(z.string(), z.unknown())),
  reasoning_effort: opt(z.string()),
  separate_reasoning: opt(z.boolean()),
  stream_reasoning: opt(z.boolean()),
  continue_final_message: opt(z.boolean()),
  response_format: opt(ResponseFormatSchema),
  regex: opt(z.string()),
  ebnf: opt(z.string()),
  rid: opt(z.string()),
  user: opt(z.string()),
});
/** A parsed `/v1/chat/completions` body (snake_case as on the wire; unknown fields kept). */
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/** `POST /v1/completions` body (CompletionRequest). `prompt`: str, list[str], list[int] or list[list[int]]. */
export const CompletionRequestSchema = z.looseObject({
  model: z.string().default('default'),
  prompt: z.union([z.string(), z.array(z.string()), z.array(int()), z.array(z.array(int()))]),
  max_tokens: int().nullish().default(16),
  ...SAMPLING_FIELDS,
  logprobs: opt(int()),
  echo: opt(z.boolean()),
  ...STREAM_AND_OUTPUT_FIELDS,
  suffix: opt(z.string()),
  response_format: opt(ResponseFormatSchema),
  json_schema: opt(z.string()),
  regex: opt(z.string()),
  ebnf: opt(z.string()),
  rid: opt(z.string()),
  user: opt(z.string()),
});
/** A parsed `/v1/completions` body (snake_case as on the wire; unknown fields kept). */
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/**
 * Validates a parsed JSON body against a schema, turning zod issues into one InvalidRequestError whose message
 * names every offending field (SGLang returns pydantic's list; we keep field + reason).
 * @throws InvalidRequestError (param = first offending field path)
 */
export function parseWire<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issues = flattenIssues(r.error.issues as unknown as WireIssue[], []);
  const where = (p: readonly PropertyKey[]) => (p.length ? p.map(String).join('.') : 'body');
  // pydantic's wording for an absent field, whatever zod reports for it (invalid_type or a failed union).
  const reason = (i: { path: PropertyKey[]; message: string }) => (valueAt(body, i.path) === undefined && i.path.length > 0 ? 'Field required' : i.message);
  const parts = issues.map((i) => `${where(i.path)}: ${reason(i)}`);
  const n = issues.length;
  throw new InvalidRequestError(`${n} validation error${n === 1 ? '' : 's'}: ${parts.join('; ')}`, issues.length ? where(issues[0].path) : null);
}

/** The parts of a zod issue parseWire reads (union issues carry one issue list per branch). */
interface WireIssue { code: string; path: PropertyKey[]; message: string; errors?: WireIssue[][] }

/**
 * Full-path issues; a failed union is replaced by the issues of the branch that got deepest into the value (e.g.
 * `sampling_params.max_new_tokens` rather than `sampling_params: Invalid input`), when some branch got past its root;
 * of equally deep branches, the one with the fewest issues (the member the value came closest to).
 */
function flattenIssues(issues: readonly WireIssue[], prefix: readonly PropertyKey[]): { path: PropertyKey[]; message: string }[] {
  const out: { path: PropertyKey[]; message: string }[] = [];
  for (const i of issues) {
    const path = [...prefix, ...i.path];
    if (i.code === 'invalid_union' && i.errors && i.errors.length > 0) {
      let best: WireIssue[] | null = null;
      let bestDepth = 0;
      for (const branch of i.errors) {
        const depth = Math.max(0, ...branch.map((b) => b.path.length));
        // deepest wins; among equally deep, the branch with fewest issues (prompt [1, 2.5] → the int list's prompt.1)
        if (depth > bestDepth || (best !== null && depth === bestDepth && branch.length < best.length)) { best = branch; bestDepth = depth; }
      }
      if (best) { out.push(...flattenIssues(best, path)); continue; }
    }
    out.push({ path, message: i.message });
  }
  return out;
}

/** The value at `path` inside a parsed JSON body (undefined when any step is missing). */
function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = body;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

/** SGLang's error body (`ErrorResponse`): every error path returns this object. */
export interface ErrorResponse {
  object: 'error';
  message: string;
  type: string;
  param: string | null;
  code: number;
}

/**
 * `usage` (SGLang's UsageInfo), keys in the model's field order. v0.5.x declares `reasoning_tokens` (default 0) but
 * never counts it on the chat/completions routes, so it is always 0; `prompt_tokens_details` is null unless
 * --enable-cache-report is on and some prompt tokens came from the prefix cache.
 */
export interface UsageInfo {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number } | null;
  reasoning_tokens: number;
}

/**
 * A UsageInfo as SGLang's UsageProcessor builds it (entrypoints/openai/usage_processor.py).
 * @param cachedTokens prompt tokens served from the prefix cache, or null when not reported (no
 *   --enable-cache-report); 0 is reported as null too (`_details_if_cached`: details only when N > 0)
 */
export function usageInfo(promptTokens: number, completionTokens: number, cachedTokens: number | null = null): UsageInfo {
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: cachedTokens ? { cached_tokens: cachedTokens } : null,
    reasoning_tokens: 0,
  };
}

/** `metadata` of a non-streaming chat / completion response. */
export interface ResponseMetadata {
  weight_version: string;
}

/**
 * One tool call (SGLang's ToolCall: `{id, index, type, function: {name, arguments}}`). In a non-streaming message
 * every field is set; in a streamed delta `id` and `function.name` are null after a call's first item.
 */
export interface ToolCallWire {
  id: string | null;
  index: number | null;
  type: 'function';
  function: { name: string | null; arguments: string };
}

/** A ToolCallWire in SGLang's key order. */
export function toolCallWire(id: string | null, index: number | null, name: string | null, args: string): ToolCallWire {
  return { id, index, type: 'function', function: { name, arguments: args } };
}

/** A chat logprob entry (OpenAI `ChatCompletionTokenLogprob`). */
export interface ChatTokenLogprob {
  token: string;
  bytes: number[];
  logprob: number;
  top_logprobs: { token: string; bytes: number[]; logprob: number }[];
}

/** Finish reasons of OpenAI responses. */
export type OpenAIFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'abort';

/** The assistant message of a non-streaming choice (ChatMessage): empty content / reasoning are null. */
export interface ChatMessageWire {
  role: 'assistant';
  content: string | null;
  reasoning_content: string | null;
  tool_calls: ToolCallWire[] | null;
}

/** One choice of a `chat.completion` (ChatCompletionResponseChoice; `hidden_states` is dropped when unset). */
export interface ChatCompletionChoice {
  index: number;
  message: ChatMessageWire;
  logprobs: { content: ChatTokenLogprob[] } | null;
  finish_reason: OpenAIFinishReason | null;
  matched_stop: number | string | null;
}

/** `chat.completion` response. */
export interface ChatCompletionResponse {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: ChatCompletionChoice[];
  usage: UsageInfo;
  metadata: ResponseMetadata;
}

/**
 * The delta of a `chat.completion.chunk` (DeltaMessage). SGLang v0.5.x serializes chunks with every field, unset
 * ones as null: `{"role": null, "content": "Hel", "reasoning_content": null, "tool_calls": null}`.
 */
export interface DeltaMessage {
  role: 'assistant' | null;
  content: string | null;
  reasoning_content: string | null;
  tool_calls: ToolCallWire[] | null;
}

/** A DeltaMessage with the given fields set (an empty string stays a string) and the others null. */
export function deltaMessage(fields: Partial<DeltaMessage> = {}): DeltaMessage {
  return {
    role: fields.role ?? null,
    content: fields.content ?? null,
    reasoning_content: fields.reasoning_content ?? null,
    tool_calls: fields.tool_calls ?? null,
  };
}

/** One choice of a `chat.completion.chunk` (ChatCompletionResponseStreamChoice). */
export interface ChatCompletionStreamChoice {
  index: number;
  delta: DeltaMessage;
  logprobs: { content: ChatTokenLogprob[] } | null;
  finish_reason: OpenAIFinishReason | null;
  matched_stop: number | string | null;
}

/** `chat.completion.chunk` streaming event (ChatCompletionStreamResponse): `usage` is null unless it carries usage. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChatCompletionStreamChoice[];
  usage: UsageInfo | null;
}

/** Legacy completion logprobs (SGLang's LogProbs model), keys in its field order. */
export interface CompletionLogprobs {
  text_offset: number[];
  token_logprobs: (number | null)[];
  tokens: string[];
  top_logprobs: (Record<string, number> | null)[];
}

/**
 * One choice of a `text_completion` (CompletionResponseChoice) or of a streamed one
 * (CompletionResponseStreamChoice: same fields; `text` is the delta).
 */
export interface CompletionChoice {
  index: number;
  text: string;
  logprobs: CompletionLogprobs | null;
  finish_reason: OpenAIFinishReason | null;
  matched_stop: number | string | null;
}

/** `text_completion` response. */
export interface CompletionResponse {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage: UsageInfo;
  metadata: ResponseMetadata;
}

/**
 * A streamed `text_completion` event (CompletionStreamResponse). SGLang writes the choice events with every field
 * (`usage` null), and the final usage event with `exclude_none` (see {@link excludeNone}).
 */
export interface CompletionStreamResponse {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage: UsageInfo | null;
}

/**
 * The value pydantic's `model_dump_json(exclude_none=True)` writes: object members whose value is null are left out,
 * at every depth (array items are kept).
 */
export function excludeNone<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => excludeNone(v)) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== null && v !== undefined) out[k] = excludeNone(v);
  return out as T;
}

/** One entry of `GET /v1/models`. */
export interface ModelCard {
  id: string;
  object: 'model';
  created: number;
  owned_by: 'sglang';
  root: string;
  max_model_len: number;
}

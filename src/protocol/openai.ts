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
  response_format: opt(z.looseObject({ type: z.string() })),
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

/** `usage` of a response. */
export interface UsageInfo {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number } | null;
  reasoning_tokens?: number;
}

/** One tool call of an assistant message. */
export interface ToolCallWire {
  id: string;
  type: 'function';
  index?: number;
  function: { name: string; arguments: string };
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

/** `chat.completion` response. */
export interface ChatCompletionResponse {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: 'assistant'; content: string | null; reasoning_content: string | null; tool_calls: ToolCallWire[] | null };
    logprobs: { content: ChatTokenLogprob[] } | null;
    finish_reason: OpenAIFinishReason | null;
    matched_stop: number | string | null;
  }[];
  usage: UsageInfo;
}

/** `chat.completion.chunk` streaming event. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    delta: {
      role?: 'assistant';
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { index: number; id?: string; type?: 'function'; function: { name?: string; arguments?: string } }[];
    };
    logprobs: { content: ChatTokenLogprob[] } | null;
    finish_reason: OpenAIFinishReason | null;
    matched_stop?: number | string | null;
  }[];
  usage?: UsageInfo | null;
}

/** `text_completion` response (and, with `object` unchanged, its streaming events). */
export interface CompletionResponse {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: {
    index: number;
    text: string;
    logprobs: { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[]; text_offset: number[] } | null;
    finish_reason: OpenAIFinishReason | null;
    matched_stop: number | string | null;
  }[];
  usage?: UsageInfo | null;
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

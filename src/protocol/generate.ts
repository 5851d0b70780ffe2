// Native `/generate` wire types (python/sglang/srt/managers/io_struct.py GenerateReqInput, sampling_params.py):
// request schema (snake_case, unknown fields ignored) and the response shape with `meta_info`.
import { z } from 'zod';
import { int, num, opt } from './lenient.js';

/** `sampling_params` of the native API (snake_case). Grammar fields are parsed so the server can refuse them. */
export const WireSamplingParamsSchema = z.looseObject({
  max_new_tokens: opt(int()),
  min_new_tokens: opt(int()),
  temperature: opt(num()),
  top_p: opt(num()),
  top_k: opt(int()),
  min_p: opt(num()),
  frequency_penalty: opt(num()),
  presence_penalty: opt(num()),
  repetition_penalty: opt(num()),
  stop: opt(z.union([z.string(), z.array(z.string())])),
  stop_token_ids: opt(z.array(int())),
  ignore_eos: opt(z.boolean()),
  skip_special_tokens: opt(z.boolean()),
  spaces_between_special_tokens: opt(z.boolean()),
  no_stop_trim: opt(z.boolean()),
  n: opt(int()),
  sampling_seed: opt(int()),
  logit_bias: opt(z.record(z.string(), num())),
  json_schema: opt(z.string()),
  regex: opt(z.string()),
  ebnf: opt(z.string()),
  structural_tag: opt(z.string()),
  stop_regex: opt(z.union([z.string(), z.array(z.string())])),
});
/** Parsed native `sampling_params` (snake_case; absent and null fields are `undefined` / `null`). */
export type WireSamplingParams = z.infer<typeof WireSamplingParamsSchema>;

/** `POST /generate` body. Exactly one of text / input_ids (checked by the server). */
export const GenerateReqInputSchema = z.looseObject({
  text: opt(z.union([z.string(), z.array(z.string())])),
  input_ids: opt(z.union([z.array(int()), z.array(z.array(int()))])),
  input_embeds: opt(z.unknown()),
  sampling_params: opt(z.union([WireSamplingParamsSchema, z.array(WireSamplingParamsSchema)])),
  rid: opt(z.union([z.string(), z.array(z.string())])),
  stream: opt(z.boolean()),
  return_logprob: opt(z.boolean()),
  logprob_start_len: opt(int()),
  top_logprobs_num: opt(int()),
  return_text_in_logprobs: opt(z.boolean()),
});
/** A parsed `POST /generate` body (SGLang's GenerateReqInput, single or batched). */
export type GenerateReqInput = z.infer<typeof GenerateReqInputSchema>;

/** A logprob entry as `/generate` returns it: [logprob, token_id, text or null]. */
export type WireTokenLogprob = [number | null, number, string | null];

/** `meta_info.finish_reason` (null while running). */
export type WireFinishReason =
  | { type: 'stop'; matched: number | string }
  | { type: 'length'; length: number }
  | { type: 'abort'; message: string; status_code?: number; err_type?: string }
  | null;

/**
 * `meta_info` of a /generate response, built in TokenizerManager `_handle_batch_output` (v0.5.x): the keys appear in
 * this order: `id`, `finish_reason`, `prompt_tokens`, `weight_version`, `total_retractions`, then (with
 * `return_logprob`) `input_token_logprobs`, `output_token_logprobs` and, only when `top_logprobs_num` > 0,
 * `input_top_logprobs`, `output_top_logprobs` (`add_logprob_to_meta_info`), then `completion_tokens`,
 * `cached_tokens`, and `e2e_latency` once finished.
 */
export interface GenerateMetaInfo {
  id: string;
  finish_reason: WireFinishReason;
  prompt_tokens: number;
  weight_version: string;
  total_retractions: number;
  input_token_logprobs?: WireTokenLogprob[];
  output_token_logprobs?: WireTokenLogprob[];
  input_top_logprobs?: (WireTokenLogprob[] | null)[];
  output_top_logprobs?: (WireTokenLogprob[] | null)[];
  completion_tokens: number;
  cached_tokens: number;
  /** Speculative decoding (present when the server runs it). */
  spec_accept_rate?: number;
  spec_accept_length?: number;
  spec_verify_ct?: number;
  spec_accept_token_num?: number;
  spec_draft_token_num?: number;
  e2e_latency?: number;
}

/** The speculative fields of GenerateMetaInfo. */
export type SpecMetaInfo = Pick<GenerateMetaInfo, 'spec_accept_rate' | 'spec_accept_length' | 'spec_verify_ct' | 'spec_accept_token_num' | 'spec_draft_token_num'>;

/**
 * One /generate response object (or one streaming event, with cumulative text and output_ids). Without a tokenizer
 * (--skip-tokenizer-init) there is no `text` (SGLang's BatchTokenIDOutput path: output_ids and meta_info only).
 */
export interface GenerateResponse {
  text?: string;
  output_ids: number[];
  meta_info: GenerateMetaInfo;
}

/**
 * `POST /abort_request` body: SGLang's `AbortReqInput` dataclass (io_struct.py), validated by FastAPI, so anything
 * but a JSON object (an array, a string, a number, null, an empty body) or a field of the wrong type is a 400
 * request-validation error. `rid` "" (the default) with `abort_all` false aborts nothing.
 */
export const AbortReqInputSchema = z.looseObject({
  rid: z.string().optional(),
  abort_all: z.boolean().optional(),
  abort_message: z.string().nullish(),
});
export type AbortReqInput = z.infer<typeof AbortReqInputSchema>;

/**
 * `POST /v1/tokenize` body: SGLang v0.5.10's `TokenizeRequest` (openai/protocol.py): `prompt`, a string or a list of
 * strings, and `add_special_tokens` (default true); it has no `messages` field (a chat is tokenized by rendering it
 * first, e.g. through /v1/chat/completions with max_tokens 1, whose usage counts the prompt).
 */
export const TokenizeRequestSchema = z.looseObject({
  model: z.string().nullish(),
  prompt: z.union([z.string(), z.array(z.string())]),
  add_special_tokens: z.boolean().optional(),
});
export type TokenizeRequest = z.infer<typeof TokenizeRequestSchema>;

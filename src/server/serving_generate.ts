// POST /generate, SGLang's native API (python/sglang/srt/entrypoints/http_server.py generate_request,
// managers/tokenizer_manager.py): text or input_ids (single or batch), sampling_params, stream with cumulative
// text/output_ids per event, logprobs in meta_info as [logprob, token_id, text|null].
import { bootstrapSlice, dataParallelRankOf, dpSizeOf } from './bootstrap_fields.js';
import { encodeSseEvent, encodeSseError, SSE_DONE, GenerateReqInputSchema, parseWire } from '../protocol/index.js';
import type { GenerateMetaInfo, GenerateResponse, SpecMetaInfo, WireSamplingParams, WireTokenLogprob } from '../protocol/index.js';
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';
import type { GenerateOutput, SamplingParamsInput } from '../engine/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import type { Exchange, ServerDeps } from './context.js';
import { abortHttpError, parseOrReply, toGenerateHttpError } from './http_errors.js';
import { WEIGHT_VERSION, accumulate, checkFanout, childAbortController, emptyChoice, mergeAsync, newRid, wireFinishReason, type ChoiceResult } from './request_utils.js';

/**
 * Native sampling params (snake_case) → engine params (json_schema / regex / ebnf / structural_tag are SGLang's
 * grammar constraints, passed through as text).
 * @throws UnsupportedFeatureError for stop_regex
 */
export function wireSamplingParams(p: WireSamplingParams | null | undefined): SamplingParamsInput {
  const s = p ?? {};
  for (const k of ['stop_regex'] as const) {
    if (s[k] !== null && s[k] !== undefined) throw new UnsupportedFeatureError(`sampling_params.${k} (constrained decoding) is not supported by tsglang yet`);
  }
  return {
    maxNewTokens: s.max_new_tokens === undefined ? undefined : s.max_new_tokens,
    minNewTokens: s.min_new_tokens ?? null,
    temperature: s.temperature ?? null,
    topP: s.top_p ?? null,
    topK: s.top_k ?? null,
    minP: s.min_p ?? null,
    frequencyPenalty: s.frequency_penalty ?? null,
    presencePenalty: s.presence_penalty ?? null,
    repetitionPenalty: s.repetition_penalty ?? null,
    stop: s.stop ?? null,
    stopTokenIds: s.stop_token_ids ?? null,
    ignoreEos: s.ignore_eos ?? null,
    skipSpecialTokens: s.skip_special_tokens ?? null,
    spacesBetweenSpecialTokens: s.spaces_between_special_tokens ?? null,
    noStopTrim: s.no_stop_trim ?? null,
    n: s.n ?? null,
    seed: s.sampling_seed ?? null,
    logitBias: s.logit_bias ?? null,
    jsonSchema: s.json_schema ?? null,
    regex: s.regex ?? null,
    ebnf: s.ebnf ?? null,
    structuralTag: s.structural_tag ?? null,
  };
}

function lpEntries(tok: Tokenizer | null, withText: boolean, pairs: readonly (readonly [number | null, number])[]): WireTokenLogprob[] {
  return pairs.map(([lp, id]) => [lp, id, withText && tok ? tok.decode([id], { skipSpecialTokens: false }) : null]);
}

/**
 * `meta_info` in TokenizerManager `_handle_batch_output`'s key order (v0.5.x): id, finish_reason, prompt_tokens,
 * weight_version, total_retractions, the logprob lists (`add_logprob_to_meta_info`: the top-logprob lists only when
 * top_logprobs_num > 0), completion_tokens, cached_tokens, and e2e_latency once finished.
 * @param id this sample's id (SGLang's meta_info.id)
 * @param logprob return_logprob, return_text_in_logprobs, top_logprobs_num > 0
 */
function metaInfo(deps: ServerDeps, c: ChoiceResult, id: string, logprob: { on: boolean; text: boolean; top: boolean }): GenerateMetaInfo {
  const tok = deps.tokenizer;
  const lp = logprob.on
    ? {
      input_token_logprobs: lpEntries(tok, logprob.text, c.inputTokenLogprobs ?? []),
      output_token_logprobs: lpEntries(tok, logprob.text, c.outputTokenLogprobs),
      ...(logprob.top ? {
        input_top_logprobs: (c.inputTopLogprobs ?? []).map((t) => (t && t.length ? lpEntries(tok, logprob.text, t) : null)),
        output_top_logprobs: c.outputTopLogprobs.map((t) => (t.length ? lpEntries(tok, logprob.text, t) : null)),
      } : {}),
    }
    : {};
  return {
    id,
    finish_reason: wireFinishReason(c.finishReason),
    prompt_tokens: c.promptTokens,
    weight_version: WEIGHT_VERSION,
    total_retractions: c.numRetractions,
    ...lp,
    completion_tokens: c.completionTokens,
    cached_tokens: c.cachedTokens,
    ...(c.spec ? specMetaInfo(c.spec, c.completionTokens) : {}),
    ...(c.finishReason !== null && c.e2eLatencyS !== undefined ? { e2e_latency: c.e2eLatencyS } : {}),
  };
}

/**
 * SGLang's speculative meta_info (tokenizer_manager.py _calculate_spec_decoding_metrics): spec_accept_rate = accepted
 * drafts / (verify_ct · (num_draft_tokens − 1)), spec_accept_length = completion_tokens / verify_ct (the bonus token
 * counts), spec_verify_ct, and once a verify ran spec_accept_token_num / spec_draft_token_num.
 */
function specMetaInfo(s: { verifyCt: number; acceptedTokens: number; numDraftTokens: number }, completionTokens: number): SpecMetaInfo {
  const drafts = s.verifyCt * (s.numDraftTokens - 1);
  if (s.verifyCt === 0 || drafts === 0) return { spec_accept_rate: 0.0, spec_accept_length: 0, spec_verify_ct: s.verifyCt };
  return {
    spec_accept_rate: s.acceptedTokens / drafts,
    spec_accept_length: completionTokens / s.verifyCt,
    spec_verify_ct: s.verifyCt,
    spec_accept_token_num: s.acceptedTokens,
    spec_draft_token_num: drafts,
  };
}

/** Handles one /generate request. */
export async function handleGenerate(deps: ServerDeps, ex: Exchange, body: unknown): Promise<void> {
  const req = parseOrReply(ex, () => parseWire(GenerateReqInputSchema, body));
  if (req === null) return;
  const logprob = { on: req.return_logprob === true, text: req.return_text_in_logprobs === true, top: (req.top_logprobs_num ?? 0) > 0 };
  let inputs: ({ text: string } | { inputIds: number[] })[];
  let isBatch: boolean;
  let rids: string[];
  let choiceOffset: number[] = [];
  let numSamples: number[] = [];
  let iter: AsyncIterator<GenerateOutput & { batchIdx: number }>;
  let first: IteratorResult<GenerateOutput & { batchIdx: number }>;
  const batchAbort = childAbortController(ex.signal);
  try {
    const hasText = req.text !== null && req.text !== undefined;
    const hasIds = req.input_ids !== null && req.input_ids !== undefined;
    if (req.input_embeds !== null && req.input_embeds !== undefined) throw new UnsupportedFeatureError('input_embeds is not supported by tsglang yet');
    if (!hasText && !hasIds) throw new InvalidRequestError('Either text, input_ids or input_embeds should be provided.', null);
    if (hasText && hasIds) throw new InvalidRequestError('Only one of text, input_ids, and input_embeds should be provided.', null);
    if (hasText) {
      isBatch = Array.isArray(req.text);
      inputs = (isBatch ? (req.text as string[]) : [req.text as string]).map((text) => ({ text }));
    } else {
      const ids = req.input_ids as number[] | number[][];
      isBatch = ids.length > 0 && Array.isArray(ids[0]);
      inputs = (isBatch ? (ids as number[][]) : [ids as number[]]).map((inputIds) => ({ inputIds }));
    }
    if (inputs.length === 0) throw new InvalidRequestError('The batch of inputs is empty.', null);
    const sp = req.sampling_params;
    const spList = Array.isArray(sp) ? sp : inputs.map(() => sp);
    if (spList.length !== inputs.length) throw new InvalidRequestError(`sampling_params has ${spList.length} entries for ${inputs.length} inputs`, 'sampling_params');
    const given = req.rid;
    rids = Array.isArray(given) ? given : inputs.map((_, i) => (given ? (isBatch ? `${given}_${i}` : given) : newRid()));
    if (rids.length !== inputs.length) throw new InvalidRequestError(`rid has ${rids.length} entries for ${inputs.length} inputs`, 'rid');
    const preferred = deps.config.preferredSamplingParams as WireSamplingParams | null;
    // stream event index = position among all choices of all inputs (input i's choices follow input i-1's)
    numSamples = spList.map((p) => p?.n ?? preferred?.n ?? 1);
    choiceOffset = [0];
    for (let i = 1; i < spList.length; i++) choiceOffset.push(choiceOffset[i - 1] + numSamples[i - 1]);
    checkFanout(inputs.length, numSamples.reduce((a, b) => Math.max(a, typeof b === 'number' ? b : 1), 1));
    const stream = req.stream === true;
    const sources = inputs.map((input, i) => {
      const params = wireSamplingParams({ ...(preferred ?? {}), ...(spList[i] ?? {}) });
      deps.metrics?.onRequestStart();
      const gen = deps.engine.generate({
        rid: rids[i], ...input, samplingParams: params, stream,
        returnLogprob: logprob.on,
        logprobStartLen: req.logprob_start_len ?? -1,
        topLogprobsNum: req.top_logprobs_num ?? 0,
        ...bootstrapSlice(req, choiceOffset[i], numSamples[i]),
        ...dataParallelRankOf(req, dpSizeOf(deps)),
      }, batchAbort.signal);
      const observed = deps.metrics ? deps.metrics.observe(gen, ex.arrivalMs) : gen;
      return (async function* () { for await (const o of observed) yield { ...o, batchIdx: i }; })();
    });
    iter = (sources.length === 1 ? sources[0] : mergeAsync(sources, batchAbort))[Symbol.asyncIterator]();
    first = await iter.next();
  } catch (err) {
    const e = toGenerateHttpError(err);
    if (req.stream === true && e.status === 400) {
      // SGLang's stream_results: the StreamingResponse has already started (200 text/event-stream) when the
      // tokenizer manager raises its ValueError, so the error is one event followed by [DONE]
      ex.startSse();
      ex.writeSse(encodeSseError((e.body as { error: { message: string } }).error.message));
      ex.writeSse(SSE_DONE);
      ex.end();
      return;
    }
    ex.sendJson(e.status, e.body);
    return;
  }
  const outputs = (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
  // key = batch index * 2^20 + choice index (choices of n > 1 are separate results, as SGLang's fan-out)
  const state = new Map<number, ChoiceResult & { batchIdx: number }>();
  const keyOf = (o: { batchIdx: number; index: number }) => o.batchIdx * 1048576 + o.index;
  // meta_info.id: the input's rid; with n > 1 SGLang sends every sample with a fresh uuid (io_struct regenerate_rid)
  const sampleIds = new Map<number, string>();
  const idOf = (c: { batchIdx: number; index: number }): string => {
    if (numSamples[c.batchIdx] <= 1) return rids[c.batchIdx];
    let id = sampleIds.get(keyOf(c));
    if (id === undefined) { id = newRid(); sampleIds.set(keyOf(c), id); }
    return id;
  };
  const withText = !deps.config.skipTokenizerInit; // SGLang: token-id outputs carry no "text"
  const response = (c: ChoiceResult & { batchIdx: number }): GenerateResponse => ({
    ...(withText ? { text: c.text } : {}), output_ids: c.outputIds, meta_info: metaInfo(deps, c, idOf(c), logprob),
  });
  if (req.stream !== true) {
    try {
      for await (const o of outputs) {
        let c = state.get(keyOf(o));
        if (!c) { c = { ...emptyChoice(o.index), batchIdx: o.batchIdx }; state.set(keyOf(o), c); }
        accumulate(c, o);
      }
    } catch (err) {
      const e = toGenerateHttpError(err);
      ex.sendJson(e.status, e.body);
      return;
    }
    const results = [...state.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c);
    // SGLang's _handle_abort_finish_reason: an abort with a status code (400 validation, 503 timeout, 500) is an error
    // response; one without (/abort_request) is a normal finish, 200 with the partial output
    if (ex.signal.aborted) return;
    const aborted = results.find((c) => c.finishReason?.type === 'abort' && c.finishReason.statusCode !== undefined);
    if (aborted && aborted.finishReason?.type === 'abort') {
      const e = abortHttpError(aborted.finishReason.message, aborted.finishReason.statusCode, true);
      ex.sendJson(e.status, e.body);
      return;
    }
    const out = results.map(response);
    ex.sendJson(200, isBatch || out.length > 1 ? out : out[0]);
    return;
  }
  ex.startSse();
  try {
    for await (const o of outputs) {
      let c = state.get(keyOf(o));
      if (!c) { c = { ...emptyChoice(o.index), batchIdx: o.batchIdx }; state.set(keyOf(o), c); }
      accumulate(c, o);
      const f = o.finishReason;
      if (o.finished && f?.type === 'abort' && f.statusCode !== undefined) {
        ex.writeSse(encodeSseError(f.message, { code: f.statusCode }));
        continue;
      }
      const ev: GenerateResponse & { index?: number } = response(c);
      // a batch or n > 1 is not single in SGLang: every event carries its position among all samples
      if (isBatch || numSamples[o.batchIdx] > 1) ev.index = choiceOffset[o.batchIdx] + o.index;
      ex.writeSse(encodeSseEvent(ev));
    }
  } catch (err) {
    const e = toGenerateHttpError(err);
    ex.writeSse(encodeSseError((e.body as { error: { message: string } }).error.message));
  }
  ex.writeSse(SSE_DONE);
  ex.end();
}

// --log-requests / --log-requests-level: SGLang's request log lines ("Receive: obj=GenerateReqInput(...)" when a
// request reaches the engine, "Finish: obj=..., out={...}" when one of its choices ends), with the fields each level
// shows and SGLang's truncation (python/sglang/srt/utils/request_logger.py RequestLogger and
// dataclass_to_string_truncated). Applied once, as a wrapper of the engine's generate(), so every route logs the
// same way.
import type { Logger } from '../common/index.js';
import { pyStrRepr } from '../common/index.js';
import type { EngineApi, GenerateOutput, GenerateRequest } from '../engine/index.js';

/** Which fields a level logs and how long a string/list may be before it is cut (RequestLogger._compute_metadata). */
export interface RequestLogMetadata {
  readonly maxLength: number;
  /** Top-level fields of the request object left out. */
  readonly skipNames: ReadonlySet<string>;
  /** Top-level fields of the output dict left out. */
  readonly outSkipNames: ReadonlySet<string>;
}

const INPUT_NAMES = ['text', 'input_ids', 'input_embeds', 'image_data', 'audio_data', 'lora_path'];

/**
 * The log metadata of a level: 0 metadata only, 1 + sampling params, 2 + inputs/outputs cut at 2048, 3 everything.
 * @throws RangeError for a level outside 0..3 (SGLang raises ValueError "Invalid --log-requests-level")
 */
export function requestLogMetadata(level: number): RequestLogMetadata {
  const big = 2 ** 30;
  switch (level) {
    case 0: return { maxLength: big, skipNames: new Set([...INPUT_NAMES, 'sampling_params']), outSkipNames: new Set(['text', 'output_ids', 'embedding']) };
    case 1: return { maxLength: big, skipNames: new Set(INPUT_NAMES), outSkipNames: new Set(['text', 'output_ids', 'embedding']) };
    case 2: return { maxLength: 2048, skipNames: new Set(), outSkipNames: new Set() };
    case 3: return { maxLength: big, skipNames: new Set(), outSkipNames: new Set() };
    default: throw new RangeError(`Invalid --log-requests-level: ${level} (choose from 0, 1, 2, 3)`);
  }
}

/** A Python dataclass instance for formatting: its class name and fields in declaration order. */
export class PyObject {
  constructor(readonly className: string, readonly fields: ReadonlyArray<readonly [string, unknown]>) {}
}

function pyScalar(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : pyFloat(v);
  if (typeof v === 'string') return pyStrRepr(v);
  if (Array.isArray(v)) return `[${v.map(pyScalar).join(', ')}]`;
  if (typeof v === 'object') return `{${Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyStrRepr(k)}: ${pyScalar(x)}`).join(', ')}}`;
  return String(v);
}

function pyFloat(v: number): string {
  if (Number.isNaN(v)) return 'nan';
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  return String(v);
}

/**
 * Python's dataclass_to_string_truncated: strings longer than maxLength become `repr(head) ... repr(tail)` (halves of
 * maxLength // 2), lists `str(head) ... str(tail)`; dicts and dataclasses recurse (skipNames only at the top level).
 * @param data a string, number, list, plain object (a Python dict) or PyObject (a dataclass)
 */
export function toStringTruncated(data: unknown, maxLength: number, skipNames: ReadonlySet<string> = new Set()): string {
  const half = Math.floor(maxLength / 2);
  if (typeof data === 'string') {
    const cps = [...data];
    return cps.length > maxLength ? `${pyStrRepr(cps.slice(0, half).join(''))} ... ${pyStrRepr(cps.slice(cps.length - half).join(''))}` : pyStrRepr(data);
  }
  if (Array.isArray(data)) {
    return data.length > maxLength ? `${pyScalar(data.slice(0, half))} ... ${pyScalar(data.slice(data.length - half))}` : pyScalar(data);
  }
  if (data instanceof PyObject) {
    return `${data.className}(${data.fields.filter(([k]) => !skipNames.has(k)).map(([k, v]) => `${k}=${toStringTruncated(v, maxLength)}`).join(', ')})`;
  }
  if (data !== null && typeof data === 'object') {
    return `{${Object.entries(data as Record<string, unknown>).filter(([k]) => !skipNames.has(k)).map(([k, v]) => `${pyStrRepr(k)}: ${toStringTruncated(v, maxLength)}`).join(', ')}}`;
  }
  return pyScalar(data);
}

const SAMPLING_WIRE: ReadonlyArray<readonly [string, string]> = [
  ['maxNewTokens', 'max_new_tokens'], ['minNewTokens', 'min_new_tokens'], ['temperature', 'temperature'], ['topP', 'top_p'], ['topK', 'top_k'],
  ['minP', 'min_p'], ['frequencyPenalty', 'frequency_penalty'], ['presencePenalty', 'presence_penalty'], ['repetitionPenalty', 'repetition_penalty'],
  ['stop', 'stop'], ['stopTokenIds', 'stop_token_ids'], ['ignoreEos', 'ignore_eos'], ['skipSpecialTokens', 'skip_special_tokens'],
  ['n', 'n'], ['seed', 'sampling_seed'],
];

/** The engine request as SGLang's GenerateReqInput (io_struct.py field order; fields tsglang has no use for are None). */
export function generateReqInput(req: GenerateRequest): PyObject {
  const sp: Record<string, unknown> = {};
  const given = (req.samplingParams ?? {}) as Record<string, unknown>;
  for (const [k, wire] of SAMPLING_WIRE) if (given[k] !== undefined) sp[wire] = given[k];
  const text = req.text ?? (req.textSegments ? req.textSegments.join('') : null);
  return new PyObject('GenerateReqInput', [
    ['text', text], ['input_ids', req.inputIds ? [...req.inputIds] : null], ['input_embeds', null], ['image_data', null], ['video_data', null], ['audio_data', null],
    ['sampling_params', sp], ['rid', req.rid], ['return_logprob', req.returnLogprob ?? false], ['logprob_start_len', req.logprobStartLen ?? -1],
    ['top_logprobs_num', req.topLogprobsNum ?? 0], ['token_ids_logprob', null], ['return_text_in_logprobs', false], ['stream', req.stream ?? false],
    ['log_metrics', true], ['return_hidden_states', false], ['modalities', null], ['session_params', null], ['lora_path', null], ['lora_id', null],
    ['custom_logit_processor', null], ['bootstrap_host', null], ['bootstrap_port', null], ['bootstrap_room', null], ['data_parallel_rank', null],
  ]);
}

/** The finished output dict SGLang logs: {text, output_ids, meta_info}. */
function outputDict(rid: string, text: string, ids: number[], last: GenerateOutput): Record<string, unknown> {
  const f = last.finishReason;
  const finish = f === null ? null
    : f.type === 'length' ? { type: 'length', length: f.length }
      : f.type === 'stop' ? { type: 'stop', matched: f.matched }
        : { type: 'abort', message: f.message, ...(f.statusCode !== undefined ? { status_code: f.statusCode } : {}) };
  return {
    text, output_ids: ids,
    meta_info: {
      id: rid, finish_reason: finish, prompt_tokens: last.promptTokens, completion_tokens: last.completionTokens,
      cached_tokens: last.cachedTokens, ...(last.e2eLatencyS !== undefined ? { e2e_latency: last.e2eLatencyS } : {}),
    },
  };
}

/**
 * An EngineApi whose generate() logs SGLang's Receive / Finish lines at info level; everything else is the engine's.
 * @param level --log-requests-level (0..3)
 * @throws RangeError for a level outside 0..3
 */
export function withRequestLogging(engine: EngineApi, logger: Logger, level: number): EngineApi {
  const meta = requestLogMetadata(level);
  const generate = async function* (req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerateOutput> {
    const obj = generateReqInput(req);
    logger.info(`Receive: obj=${toStringTruncated(obj, meta.maxLength, meta.skipNames)}`);
    const acc = new Map<number, { text: string; ids: number[] }>();
    for await (const o of engine.generate(req, signal)) {
      const a = acc.get(o.index) ?? { text: '', ids: [] };
      a.text += o.text;
      a.ids.push(...o.outputIds);
      acc.set(o.index, a);
      if (o.finished) {
        const out = outputDict(o.index === 0 ? req.rid : `${req.rid}-${o.index}`, a.text, a.ids, o);
        logger.info(`Finish: obj=${toStringTruncated(obj, meta.maxLength, meta.skipNames)}, out=${toStringTruncated(out, meta.maxLength, meta.outSkipNames)}`);
      }
      yield o;
    }
  };
  return new Proxy(engine, {
    get(target, prop, receiver) {
      if (prop === 'generate') return generate;
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

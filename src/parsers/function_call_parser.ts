// Tool-call parser registry (`--tool-call-parser`) and the tool_choice policy around the detectors
// (parsers-spec §4.1, §4.6). Source: python/sglang/srt/function_call/function_call_parser.py.

import { InvalidRequestError } from '../common/index.js';
import type { DetectorOptions } from './base_format_detector.js';
import { DeepSeekV31Detector, DeepSeekV3Detector } from './deepseekv31_detector.js';
import { DeepSeekV32Detector } from './deepseekv32_detector.js';
import { JsonArrayToolCallDetector } from './json_array_parser.js';
import { MiniMaxM2Detector } from './minimax_m2.js';
import type { DetectorResult, ParserTool, ToolCallDetector } from './types.js';

const DETECTORS: Record<string, new (tools: readonly ParserTool[], options?: DetectorOptions) => ToolCallDetector> = {
  'minimax-m2': MiniMaxM2Detector,
  deepseekv32: DeepSeekV32Detector,
  deepseekv31: DeepSeekV31Detector,
  deepseekv3: DeepSeekV3Detector,
};

/** Tool-call parser names accepted by `--tool-call-parser` (exact spelling). */
export const TOOL_CALL_PARSER_NAMES: readonly string[] = Object.keys(DETECTORS);

/**
 * Throws unless `name` is a known tool-call parser (startup check of `--tool-call-parser`).
 * @throws InvalidRequestError naming the flag and the accepted values
 */
export function assertToolCallParserName(name: string): void {
  if (!Object.hasOwn(DETECTORS, name)) {
    throw new InvalidRequestError(
      `--tool-call-parser: unknown parser '${name}' (choose from ${TOOL_CALL_PARSER_NAMES.join(', ')})`,
      'tool_call_parser',
    );
  }
}

/** `tool_choice` reduced to what parsing needs. */
export type ToolChoiceMode = 'none' | 'auto' | 'required' | { name: string };

/**
 * Normalizes a request's `tool_choice` (OpenAI shapes) with SGLang's defaults: absent → `auto` when tools are
 * present, else `none`.
 * @param toolChoice the request field as given (string, `{type:'function', function:{name}}`, or null)
 * @param hasTools whether the request has tools
 * @throws InvalidRequestError for a value of another shape
 */
export function normalizeToolChoice(toolChoice: unknown, hasTools: boolean): ToolChoiceMode {
  if (toolChoice === null || toolChoice === undefined) return hasTools ? 'auto' : 'none';
  if (toolChoice === 'none' || toolChoice === 'auto' || toolChoice === 'required') return toolChoice;
  if (typeof toolChoice === 'object') {
    const fn = (toolChoice as { function?: { name?: unknown } }).function;
    if (fn && typeof fn.name === 'string') return { name: fn.name };
  }
  throw new InvalidRequestError(`Invalid tool_choice: ${JSON.stringify(toolChoice)}`, 'tool_choice');
}

/**
 * Reduces the request's `tools` (OpenAI `{type:'function', function:{name, parameters, …}}` or bare function
 * objects) to {@link ParserTool}s.
 * @param tools the request field as given
 */
export function parserToolsFromRequest(tools: unknown): ParserTool[] {
  if (!Array.isArray(tools)) return [];
  const out: ParserTool[] = [];
  for (const t of tools) {
    if (t === null || typeof t !== 'object') continue;
    const fn = ((t as { function?: unknown }).function ?? t) as { name?: unknown; parameters?: unknown };
    if (typeof fn.name === 'string') out.push({ name: fn.name, parameters: fn.parameters });
  }
  return out;
}

/**
 * `tool_choice: "required"` or a named function: SGLang constrains decoding, either to the native format or to a
 * JSON array. This engine cannot constrain decoding, so both shapes are accepted: output whose first
 * non-whitespace character is `[` is parsed as a JSON array of calls, anything else by the native detector.
 */
class RequiredToolChoiceDetector implements ToolCallDetector {
  private inner: ToolCallDetector | null = null;
  private lead = '';

  constructor(
    private readonly makeNative: () => ToolCallDetector,
    private readonly makeJsonArray: () => ToolCallDetector,
  ) {}

  get hasToolCalls(): boolean {
    return this.inner?.hasToolCalls ?? false;
  }

  push(text: string): DetectorResult {
    if (this.inner !== null) return this.inner.push(text);
    this.lead += text;
    const t = this.lead.replace(/^\s+/, '');
    if (!t) return { normalText: '', calls: [] };
    this.inner = t[0] === '[' ? this.makeJsonArray() : this.makeNative();
    const all = this.lead;
    this.lead = '';
    return this.inner.push(all);
  }

  finish(): DetectorResult {
    if (this.inner === null) {
      this.inner = this.makeNative();
      const r = this.inner.push(this.lead);
      const f = this.inner.finish();
      return { normalText: r.normalText + f.normalText, calls: [...r.calls, ...f.calls] };
    }
    return this.inner.finish();
  }
}

/**
 * A fresh detector for one choice of one request.
 * @param name `--tool-call-parser` value
 * @param tools the request's tools
 * @param toolChoice normalized tool_choice (must not be `none`: then no parsing happens at all)
 * @param options detector options
 * @throws InvalidRequestError for an unknown parser name
 */
export function createToolCallDetector(
  name: string,
  tools: readonly ParserTool[],
  toolChoice: ToolChoiceMode = 'auto',
  options: DetectorOptions = {},
): ToolCallDetector {
  assertToolCallParserName(name);
  const Native = DETECTORS[name];
  if (toolChoice === 'auto' || toolChoice === 'none') return new Native(tools, options);
  return new RequiredToolChoiceDetector(
    () => new Native(tools, options),
    () => new JsonArrayToolCallDetector(tools, options),
  );
}

// Reasoning parsers: split model output into reasoning_content and content (parsers-spec §3).
// Pure string state machines; never see a request object, only the flags derived from it.
//
// Wire format (`<think>` detectors: deepseek-v3, deepseek-r1, qwen3, minimax):
//   [<think>]* REASONING </think> CONTENT        (forced: output starts inside reasoning)
//   CONTENT <think> REASONING </think> CONTENT   (not forced: a literal <think> switches to reasoning)
// `minimax-append-think` does not split: it prefixes the output with `<think>` and passes everything through.
// Source: python/sglang/srt/parser/reasoning_parser.py (BaseReasoningFormatDetector, MiniMaxAppendThinkDetector).

import { InvalidRequestError } from '../common/index.js';
import { partialMarkerSuffixLength } from './text_hold.js';
import type { ReasoningDetector, ReasoningResult } from './types.js';

const THINK_START = '<think>';
const THINK_END = '</think>';

/** Reasoning parser names accepted by `--reasoning-parser` (looked up lower-cased). */
export const REASONING_PARSER_NAMES: readonly string[] = ['deepseek-v3', 'deepseek-r1', 'qwen3', 'minimax', 'minimax-append-think'];

/**
 * Splits `<think>…</think>` reasoning from content, chunk-invariantly: a suffix that could still become
 * `<think>` / `</think>` is held until the next chunk (or the end) decides it.
 *
 * Rules (parsers-spec §3.2): with `forceReasoning` the text starts in reasoning; otherwise the first `<think>`
 * (dropped) starts it. Leading `<think>` tags of the reasoning are dropped. The first `</think>` (dropped) ends
 * reasoning; everything after it is content, whatever it contains. Output that ends inside reasoning is all
 * reasoning. With `streamReasoning` false, reasoning is released in one piece at `</think>` (or at the end).
 */
export class ThinkTagReasoningDetector implements ReasoningDetector {
  private state: 'before' | 'reasoning' | 'after';
  private atReasoningStart: boolean;
  private buffer = '';
  private pendingReasoning = '';

  /**
   * @param forceReasoning the prompt already opened the think block (output starts inside reasoning)
   * @param streamReasoning emit reasoning as it arrives (false: one piece at `</think>`)
   */
  constructor(forceReasoning: boolean, private readonly streamReasoning = true) {
    this.state = forceReasoning ? 'reasoning' : 'before';
    this.atReasoningStart = forceReasoning;
  }

  push(text: string): ReasoningResult {
    this.buffer += text;
    return this.drain(false);
  }

  finish(): ReasoningResult {
    const r = this.drain(true);
    if (this.pendingReasoning) {
      r.reasoningText += this.pendingReasoning;
      this.pendingReasoning = '';
    }
    return r;
  }

  private drain(eof: boolean): ReasoningResult {
    const out: ReasoningResult = { reasoningText: '', normalText: '' };
    const emitReasoning = (s: string): void => {
      if (this.streamReasoning) out.reasoningText += s;
      else this.pendingReasoning += s;
    };
    for (;;) {
      if (this.state === 'before') {
        const i = this.buffer.indexOf(THINK_START);
        if (i !== -1) {
          out.normalText += this.buffer.slice(0, i);
          this.buffer = this.buffer.slice(i + THINK_START.length);
          this.state = 'reasoning';
          this.atReasoningStart = true;
          continue;
        }
        const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [THINK_START]);
        out.normalText += this.buffer.slice(0, this.buffer.length - hold);
        this.buffer = this.buffer.slice(this.buffer.length - hold);
        return out;
      }
      if (this.state === 'reasoning') {
        if (this.atReasoningStart) {
          if (this.buffer.startsWith(THINK_START)) {
            this.buffer = this.buffer.slice(THINK_START.length);
            continue;
          }
          if (!eof && THINK_START.startsWith(this.buffer)) return out; // may still be a leading <think>
          this.atReasoningStart = false;
        }
        const i = this.buffer.indexOf(THINK_END);
        if (i !== -1) {
          emitReasoning(this.buffer.slice(0, i));
          out.reasoningText += this.pendingReasoning;
          this.pendingReasoning = '';
          this.buffer = this.buffer.slice(i + THINK_END.length);
          this.state = 'after';
          continue;
        }
        const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [THINK_END]);
        emitReasoning(this.buffer.slice(0, this.buffer.length - hold));
        this.buffer = this.buffer.slice(this.buffer.length - hold);
        return out;
      }
      out.normalText += this.buffer;
      this.buffer = '';
      return out;
    }
  }
}

/**
 * `minimax-append-think`: never splits; the content starts with `<think>` (the prompt opened the block, the
 * client gets it back closed so it can resend it verbatim). Non-streaming: `'<think>' + text`.
 */
export class AppendThinkReasoningDetector implements ReasoningDetector {
  private started = false;

  push(text: string): ReasoningResult {
    if (this.started) return { reasoningText: '', normalText: text };
    this.started = true;
    return { reasoningText: '', normalText: THINK_START + text };
  }

  finish(): ReasoningResult {
    return this.push('');
  }
}

/** Request-derived inputs of {@link createReasoningDetector}. */
export interface ReasoningParserOptions {
  /** `stream_reasoning` (default true). */
  streamReasoning?: boolean;
  /** `chat_template_kwargs` of the request (DeepSeek's `thinking`, Qwen's `enable_thinking`). */
  chatTemplateKwargs?: Record<string, unknown> | null;
}

/**
 * Whether output starts inside reasoning for this parser and request (SGLang `_get_reasoning_from_request`):
 * `deepseek-v3` only when `chat_template_kwargs.thinking` is exactly `true`; `qwen3` unless
 * `enable_thinking` is exactly `false`; `deepseek-r1` and `minimax` always.
 * @param name a name from {@link REASONING_PARSER_NAMES}
 */
export function isReasoningForced(name: string, kwargs: Record<string, unknown> | null | undefined): boolean {
  switch (name.toLowerCase()) {
    case 'deepseek-v3':
      return kwargs?.thinking === true;
    case 'qwen3':
      return kwargs?.enable_thinking !== false;
    case 'deepseek-r1':
    case 'minimax':
      return true;
    default:
      return false;
  }
}

/**
 * Throws unless `name` is a known reasoning parser (startup check of `--reasoning-parser`).
 * @throws InvalidRequestError naming the flag and the accepted values
 */
export function assertReasoningParserName(name: string): void {
  if (!REASONING_PARSER_NAMES.includes(name.toLowerCase())) {
    throw new InvalidRequestError(
      `--reasoning-parser: unknown parser '${name}' (choose from ${REASONING_PARSER_NAMES.join(', ')})`,
      'reasoning_parser',
    );
  }
}

/**
 * A fresh reasoning parser for one choice of one request.
 * @param name `--reasoning-parser` value
 * @param options the request's `stream_reasoning` and `chat_template_kwargs`
 * @throws InvalidRequestError for an unknown name
 */
export function createReasoningDetector(name: string, options: ReasoningParserOptions = {}): ReasoningDetector {
  assertReasoningParserName(name);
  const lower = name.toLowerCase();
  if (lower === 'minimax-append-think') return new AppendThinkReasoningDetector();
  return new ThinkTagReasoningDetector(isReasoningForced(lower, options.chatTemplateKwargs), options.streamReasoning ?? true);
}

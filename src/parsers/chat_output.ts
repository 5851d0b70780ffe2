// The chat output pipeline of one choice: reasoning parser → tool-call parser → deltas (parsers-spec §3.1, §4.1,
// §5). Streaming and non-streaming share it, so their results agree for any chunking of the model output.
// Produces plain data; server/ turns it into OpenAI chunks / messages. Never sees a request object.
//
//   model text delta ─► ReasoningDetector ─► reasoning_content
//                            │ normal text
//                            ▼
//                       ToolCallDetector ─► content, tool-call items (name first, then argument fragments)

import { randomUUID } from 'node:crypto';
import { createReasoningDetector } from './reasoning_parser.js';
import { createToolCallDetector, normalizeToolChoice, parserToolsFromRequest } from './function_call_parser.js';
import type { ReasoningDetector, ToolCallDetector, ToolCallItem } from './types.js';

/** Server flags and request fields that decide how one choice's output is parsed. */
export interface ChatParseOptions {
  /** `--reasoning-parser` (null: no reasoning split). */
  reasoningParser?: string | null;
  /** `--tool-call-parser` (null: no tool-call parsing). */
  toolCallParser?: string | null;
  /** The request's `tools`, as given (OpenAI `{type, function:{name, parameters…}}` objects). */
  tools?: unknown;
  /** The request's `tool_choice`, as given (absent → SGLang's default). */
  toolChoice?: unknown;
  /** `separate_reasoning` (default true; false disables the reasoning parser). */
  separateReasoning?: boolean;
  /** `stream_reasoning` (default true). */
  streamReasoning?: boolean;
  /** `chat_template_kwargs` (DeepSeek `thinking`, Qwen `enable_thinking`). */
  chatTemplateKwargs?: Record<string, unknown> | null;
  /** Report calls to functions not in `tools` (SGLANG_FORWARD_UNKNOWN_TOOLS; default false). */
  forwardUnknownTools?: boolean;
  /** Tool-call id generator (default `call_` + 24 hex digits of a random UUID, as SGLang). */
  newCallId?: () => string;
}

/** One streamed tool-call item in OpenAI's delta shape. */
export interface ToolCallDelta {
  index: number;
  /** Set on the first item of a call only. */
  id: string | null;
  /** Set on the first item of a call only. */
  name: string | null;
  /** '' on the name item, then fragments of the argument JSON text. */
  arguments: string;
}

/** One streamed chunk's worth of output: exactly one field is set. */
export interface ChatDelta {
  reasoningContent?: string;
  content?: string;
  toolCall?: ToolCallDelta;
}

/** A complete tool call of a non-streaming response. */
export interface ParsedToolCall {
  index: number;
  id: string;
  name: string;
  /** The argument JSON text the API sends. */
  arguments: string;
}

/** The non-streaming result of one choice. */
export interface ParsedChatOutput {
  /** null when empty (SGLang v0.5.x). */
  content: string | null;
  /** null when empty. */
  reasoningContent: string | null;
  /** In index order; empty when no call was found. */
  toolCalls: ParsedToolCall[];
}

/** SGLang's tool-call id: `call_` + the first 24 hex digits of a random UUID. */
export function newToolCallId(): string {
  return 'call_' + randomUUID().replace(/-/g, '').slice(0, 24);
}

/**
 * Streaming output processor of one choice. Feed every detokenized text delta to `push`, then call `finish`
 * once at the end of generation; each returned {@link ChatDelta} is one SSE chunk, in order.
 * @throws InvalidRequestError (constructor) for unknown parser names or a malformed tool_choice
 */
export class ChatOutputProcessor {
  private readonly reasoning: ReasoningDetector | null;
  private readonly tools: ToolCallDetector | null;
  private readonly newCallId: () => string;
  private readonly ids = new Map<number, string>();

  constructor(options: ChatParseOptions) {
    const separate = options.separateReasoning ?? true;
    this.reasoning =
      options.reasoningParser && separate
        ? createReasoningDetector(options.reasoningParser, {
            streamReasoning: options.streamReasoning,
            chatTemplateKwargs: options.chatTemplateKwargs,
          })
        : null;
    const parserTools = parserToolsFromRequest(options.tools);
    const choice = normalizeToolChoice(options.toolChoice, parserTools.length > 0);
    this.tools =
      options.toolCallParser && parserTools.length > 0 && choice !== 'none'
        ? createToolCallDetector(options.toolCallParser, parserTools, choice, { forwardUnknownTools: options.forwardUnknownTools })
        : null;
    this.newCallId = options.newCallId ?? newToolCallId;
  }

  /** True once a tool call was produced (finish_reason `stop` then becomes `tool_calls`). */
  get hasToolCalls(): boolean {
    return this.tools?.hasToolCalls ?? false;
  }

  /**
   * Feeds the next text delta of the model output.
   * @param text decoded text (special tokens kept; no EOS/stop text)
   */
  push(text: string): ChatDelta[] {
    const out: ChatDelta[] = [];
    let normal = text;
    if (this.reasoning !== null) {
      const r = this.reasoning.push(text);
      if (r.reasoningText) out.push({ reasoningContent: r.reasoningText });
      normal = r.normalText;
    }
    this.afterReasoning(normal, out, false);
    return out;
  }

  /** End of generation: releases held text and completes open tool calls. */
  finish(): ChatDelta[] {
    const out: ChatDelta[] = [];
    let normal = '';
    if (this.reasoning !== null) {
      const r = this.reasoning.finish();
      if (r.reasoningText) out.push({ reasoningContent: r.reasoningText });
      normal = r.normalText;
    }
    this.afterReasoning(normal, out, true);
    return out;
  }

  private afterReasoning(normal: string, out: ChatDelta[], eof: boolean): void {
    if (this.tools === null) {
      if (normal) out.push({ content: normal });
      return;
    }
    const r = normal || !eof ? this.tools.push(normal) : { normalText: '', calls: [] };
    const f = eof ? this.tools.finish() : { normalText: '', calls: [] };
    const text = r.normalText + f.normalText;
    if (text) out.push({ content: text });
    for (const item of [...r.calls, ...f.calls]) out.push({ toolCall: this.toDelta(item) });
  }

  private toDelta(item: ToolCallItem): ToolCallDelta {
    if (item.name !== null) {
      const id = this.newCallId();
      this.ids.set(item.toolIndex, id);
      return { index: item.toolIndex, id, name: item.name, arguments: item.parameters };
    }
    return { index: item.toolIndex, id: null, name: null, arguments: item.parameters };
  }
}

/**
 * Concatenates streamed deltas into the non-streaming shape (content, reasoning, per-index name and arguments).
 * @param deltas every delta of one choice, in order
 */
export function aggregateChatDeltas(deltas: readonly ChatDelta[]): ParsedChatOutput {
  let content = '';
  let reasoning = '';
  const calls = new Map<number, ParsedToolCall>();
  for (const d of deltas) {
    if (d.content !== undefined) content += d.content;
    if (d.reasoningContent !== undefined) reasoning += d.reasoningContent;
    if (d.toolCall !== undefined) {
      const t = d.toolCall;
      const c = calls.get(t.index);
      if (c === undefined) calls.set(t.index, { index: t.index, id: t.id ?? '', name: t.name ?? '', arguments: t.arguments });
      else c.arguments += t.arguments;
    }
  }
  return {
    content: content === '' ? null : content,
    reasoningContent: reasoning === '' ? null : reasoning,
    toolCalls: [...calls.values()].sort((a, b) => a.index - b.index),
  };
}

/**
 * Non-streaming parse of one choice's complete output: the same pipeline fed in one piece.
 * @param text the full generated text (special tokens kept; EOS/stop text excluded)
 * @param options parsers and request fields
 * @throws InvalidRequestError for unknown parser names or a malformed tool_choice
 */
export function parseChatOutput(text: string, options: ChatParseOptions): ParsedChatOutput {
  const p = new ChatOutputProcessor(options);
  return aggregateChatDeltas([...p.push(text), ...p.finish()]);
}

/**
 * The finish_reason SGLang reports: `stop` becomes `tool_calls` when the choice produced a tool call
 * (`length`, `abort` stay). Non-streaming responses then also report `matched_stop: null`.
 * @param engineReason the engine's finish reason type
 * @param hasToolCalls whether tool calls were produced
 */
export function finishReasonWithTools(engineReason: string, hasToolCalls: boolean): string {
  return hasToolCalls && engineReason === 'stop' ? 'tool_calls' : engineReason;
}

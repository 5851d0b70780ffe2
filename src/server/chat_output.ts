// Reasoning / tool-call parsing of chat outputs as serving_chat needs it: one streaming processor per choice
// and a one-shot parse. The plain implementation returns all text as content (no parser configured).
import { ChatOutputProcessor, isReasoningForced, parseChatOutput, toolCallConstraint } from '../parsers/index.js';
import type { ToolConstraint } from '../parsers/index.js';
import type { ChatParseOptions, ChatDelta as ParserDelta } from '../parsers/index.js';
import { toolCallWire } from '../protocol/index.js';
import type { ToolCallWire } from '../protocol/index.js';

/** One streaming delta = one SSE chunk. */
export type ChatDelta =
  | { readonly reasoningContent: string }
  | { readonly content: string }
  | { readonly toolCall: { readonly index: number; readonly id: string | null; readonly name: string | null; readonly arguments: string } };

/** Streaming parser of one choice. */
export interface ChatStreamParser {
  /** Feeds detokenized text; returns the deltas to send now (possibly none: a partial tag is held). */
  push(text: string): ChatDelta[];
  /** End of the choice: flushes held text. */
  finish(): ChatDelta[];
  /** True once a tool call was emitted (finish_reason stop → tool_calls). */
  readonly hasToolCalls: boolean;
}

/** One-shot parse result of a whole output. */
export interface ParsedChatOutput {
  readonly content: string | null;
  readonly reasoningContent: string | null;
  readonly toolCalls: readonly ToolCallWire[] | null;
}

/** Per-request parsing options (the request's own fields, as on the wire). */
export interface ChatParseRequest {
  readonly tools: readonly unknown[] | null;
  readonly toolChoice: unknown;
  readonly separateReasoning: boolean;
  readonly streamReasoning: boolean;
  readonly chatTemplateKwargs: Readonly<Record<string, unknown>> | null;
}

/** Factory of parsers for the server's --reasoning-parser / --tool-call-parser. */
export interface ChatOutputParsing {
  /** A streaming parser for one choice. */
  stream(req: ChatParseRequest): ChatStreamParser;
  /** Parses a complete output. */
  parse(text: string, req: ChatParseRequest): ParsedChatOutput;
  /** The grammar constraint of the request's tool choice (tool_choice required / named, strict tools), or null. */
  toolConstraint?(req: ChatParseRequest, parallelToolCalls: boolean): ToolConstraint | null;
  /** True when the model reasons first for this request (a grammar constraint then starts after the think-end token). */
  requiresReasoning?(req: ChatParseRequest): boolean;
}

/** No reasoning or tool-call parser: all text is content. */
export const PLAIN_CHAT_OUTPUT: ChatOutputParsing = {
  stream(): ChatStreamParser {
    return {
      push: (text: string) => (text ? [{ content: text }] : []),
      finish: () => [],
      hasToolCalls: false,
    };
  },
  parse(text: string): ParsedChatOutput {
    return { content: text, reasoningContent: null, toolCalls: null };
  },
};

/**
 * The parsers of parsers/ (reasoning and tool-call detectors) for the server's --reasoning-parser and
 * --tool-call-parser.
 */
export class ParserChatOutput implements ChatOutputParsing {
  /**
   * @param reasoningParser --reasoning-parser name, or null
   * @param toolCallParser --tool-call-parser name, or null
   */
  constructor(private readonly reasoningParser: string | null, private readonly toolCallParser: string | null) {}

  private options(req: ChatParseRequest): ChatParseOptions {
    return {
      reasoningParser: this.reasoningParser,
      toolCallParser: this.toolCallParser,
      tools: req.tools,
      toolChoice: req.toolChoice,
      separateReasoning: req.separateReasoning,
      streamReasoning: req.streamReasoning,
      chatTemplateKwargs: req.chatTemplateKwargs as Record<string, unknown> | null,
    };
  }

  stream(req: ChatParseRequest): ChatStreamParser {
    const p = new ChatOutputProcessor(this.options(req));
    const conv = (ds: ParserDelta[]): ChatDelta[] => ds.flatMap((d): ChatDelta[] => {
      if (d.reasoningContent !== undefined) return [{ reasoningContent: d.reasoningContent }];
      if (d.content !== undefined) return [{ content: d.content }];
      if (d.toolCall !== undefined) return [{ toolCall: { ...d.toolCall } }];
      return [];
    });
    return {
      push: (text: string) => conv(p.push(text)),
      finish: () => conv(p.finish()),
      get hasToolCalls() { return p.hasToolCalls; },
    };
  }

  toolConstraint(req: ChatParseRequest, parallelToolCalls: boolean): ToolConstraint | null {
    return toolCallConstraint(this.toolCallParser, req.tools, req.toolChoice, parallelToolCalls);
  }

  /** SGLang require_reasoning: minimax-append-think always (its prompt opens <think>), else the parser's forced-reasoning rule. */
  requiresReasoning(req: ChatParseRequest): boolean {
    const p = this.reasoningParser?.toLowerCase();
    if (!p) return false;
    return p === 'minimax-append-think' || isReasoningForced(p, req.chatTemplateKwargs as Record<string, unknown> | null);
  }

  parse(text: string, req: ChatParseRequest): ParsedChatOutput {
    const r = parseChatOutput(text, this.options(req));
    return {
      content: r.content,
      reasoningContent: r.reasoningContent,
      toolCalls: r.toolCalls.length ? r.toolCalls.map((c) => toolCallWire(c.id, c.index, c.name, c.arguments)) : null,
    };
  }
}

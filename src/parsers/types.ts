// Plain data types shared by the reasoning and tool-call parsers. No protocol types here: server/ converts these
// into OpenAI response objects (field names follow SGLang's `StreamingParseResult` / `ToolCallItem`).

/** A tool the request offers, reduced to what the parsers read: its name and JSON-Schema parameters. */
export interface ParserTool {
  name: string;
  /** `function.parameters` as given in the request (a JSON Schema object), or null/undefined. */
  parameters?: unknown;
}

/**
 * One tool-call event of a detector (SGLang `ToolCallItem`). Streaming: first an item with `name` set and
 * `parameters: ''`, then items with `name: null` whose `parameters` are fragments of the argument JSON text;
 * the fragments of one `toolIndex` concatenate to the call's complete argument JSON.
 */
export interface ToolCallItem {
  /** 0, 1, 2, … in order of appearance within one choice. */
  toolIndex: number;
  /** Function name on the first item of a call, else null. */
  name: string | null;
  /** A fragment of the argument JSON text ('' on the name item). */
  parameters: string;
}

/** What a tool-call detector returns for one piece of input: prose to show, and call events. */
export interface DetectorResult {
  normalText: string;
  calls: ToolCallItem[];
}

/** What a reasoning parser returns for one piece of input. */
export interface ReasoningResult {
  reasoningText: string;
  normalText: string;
}

/**
 * A streaming tool-call detector: a pure string state machine. `push` may be called with any chunking of the
 * model output; the concatenation of everything returned by `push`…`finish` is the same for every chunking.
 * Never throws on malformed model output (falls back to text or drops the markup).
 */
export interface ToolCallDetector {
  /** Feeds the next piece of (post-reasoning) model text. */
  push(text: string): DetectorResult;
  /** End of generation: releases held text and closes an open call (truncation rules of parsers-spec §4). */
  finish(): DetectorResult;
  /** True once at least one call item was produced. */
  readonly hasToolCalls: boolean;
}

/** A streaming reasoning parser (same chunk-invariance contract as {@link ToolCallDetector}). */
export interface ReasoningDetector {
  push(text: string): ReasoningResult;
  finish(): ReasoningResult;
}

// Shared bookkeeping of the tool-call detectors: the tool table, call indexes, name/argument items.
// Each detector supplies `step`, which consumes as much of `buffer` as the text seen so far decides.
// Source of the contract: python/sglang/srt/function_call/base_format_detector.py.

import { findFirstMarker } from './text_hold.js';
import type { DetectorResult, ParserTool, ToolCallDetector } from './types.js';

/** Options common to every detector. */
export interface DetectorOptions {
  /** Report calls of functions that are not in the request's tools (SGLANG_FORWARD_UNKNOWN_TOOLS); default false. */
  forwardUnknownTools?: boolean;
}

/**
 * Base class: buffers input, runs the subclass's `step`, and numbers calls 0, 1, 2, ….
 * Chunk-invariance contract for subclasses: `step(out, eof=false)` consumes only text whose meaning no later
 * input can change; `step(out, eof=true)` consumes the rest.
 */
export abstract class BaseToolCallDetector implements ToolCallDetector {
  private unconsumed = '';
  /** Offset before which a pending marker search already failed (reset whenever the buffer is reassigned). */
  private scanFrom = 0;
  private nextToolIndex = 0;
  private producedCalls = false;
  protected readonly toolsByName: Map<string, ParserTool>;

  constructor(tools: readonly ParserTool[], protected readonly options: DetectorOptions = {}) {
    this.toolsByName = new Map(tools.map((t) => [t.name, t]));
  }

  /** Text received but not yet consumed. Assigning it (consuming) restarts pending marker searches. */
  protected get buffer(): string {
    return this.unconsumed;
  }

  protected set buffer(text: string) {
    this.unconsumed = text;
    this.scanFrom = 0;
  }

  /**
   * `findFirstMarker` over the buffer for a state that waits without consuming: text already searched (except the
   * last `longest marker - 1` chars, where a marker may still complete) is not scanned again, so a long value
   * streamed in small pieces costs linear time.
   */
  protected findWaiting(markers: readonly string[]): { index: number; marker: string } | null {
    const m = findFirstMarker(this.unconsumed, markers, this.scanFrom);
    if (m === null) {
      const longest = markers.reduce((n, x) => Math.max(n, x.length), 0);
      this.scanFrom = Math.max(0, this.unconsumed.length - longest + 1);
    }
    return m;
  }

  get hasToolCalls(): boolean {
    return this.producedCalls;
  }

  push(text: string): DetectorResult {
    this.unconsumed += text;
    const out: DetectorResult = { normalText: '', calls: [] };
    this.step(out, false);
    return out;
  }

  finish(): DetectorResult {
    const out: DetectorResult = { normalText: '', calls: [] };
    this.step(out, true);
    return out;
  }

  /** Consumes decided text from `this.buffer` into `out` (see class contract). */
  protected abstract step(out: DetectorResult, eof: boolean): void;

  /** True if calls to `name` are reported (a request tool, or unknown tools are forwarded). */
  protected acceptsTool(name: string): boolean {
    return this.toolsByName.has(name) || this.options.forwardUnknownTools === true;
  }

  /** JSON Schema `parameters` of tool `name` (undefined if unknown or absent). */
  protected toolParameters(name: string): unknown {
    return this.toolsByName.get(name)?.parameters;
  }

  /** Emits the name item of a new call and returns its index. */
  protected startCall(out: DetectorResult, name: string): number {
    const toolIndex = this.nextToolIndex++;
    this.producedCalls = true;
    out.calls.push({ toolIndex, name, parameters: '' });
    return toolIndex;
  }

  /** Emits an argument fragment of call `toolIndex` (empty fragments are skipped). */
  protected appendArguments(out: DetectorResult, toolIndex: number, fragment: string): void {
    if (fragment) out.calls.push({ toolIndex, name: null, parameters: fragment });
  }
}

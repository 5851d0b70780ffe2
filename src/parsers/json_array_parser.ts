// Tool calls written as a JSON array, the shape SGLang constrains decoding to for `tool_choice: "required"` or a
// named function when the model's native format has no structural tag (parsers-spec §4.6):
//
//   [{"name": "get_weather", "parameters": {"city": "Paris"}}, …]
//
// Each element is reported as soon as its closing brace arrives. Text that does not start an array element
// (before any call) makes the whole output plain content, as SGLang returns unparseable text.
// Source: python/sglang/srt/function_call/json_array_parser.py, serving_chat.py `_process_tool_calls`.

import { PyFloat, pyJsonDumps, pyJsonLoads } from '../common/index.js';
import { BaseToolCallDetector } from './base_format_detector.js';
import type { DetectorResult } from './types.js';

type State = 'start' | 'between' | 'element' | 'done' | 'fallback';

/** Streaming parser of a JSON array of `{name, parameters}` objects. */
export class JsonArrayToolCallDetector extends BaseToolCallDetector {
  private state: State = 'start';
  private raw = '';
  private scan = 0;
  private depth = 0;
  private inString = false;
  private escaped = false;

  override push(text: string): DetectorResult {
    this.raw += text;
    return super.push(text);
  }

  protected step(out: DetectorResult, eof: boolean): void {
    for (;;) {
      if (this.state === 'fallback') {
        out.normalText += this.buffer;
        this.buffer = '';
        return;
      }
      if (this.state === 'done') {
        this.buffer = '';
        return;
      }
      if (this.state === 'start' || this.state === 'between') {
        const t = this.buffer.replace(/^\s+/, '');
        this.buffer = t;
        if (!t) return;
        const c = t[0];
        if (this.state === 'start') {
          if (c !== '[') return this.fallBack(out);
          this.buffer = t.slice(1);
          this.state = 'between';
          continue;
        }
        if (c === ',') {
          this.buffer = t.slice(1);
          continue;
        }
        if (c === ']') {
          this.state = 'done';
          continue;
        }
        if (c !== '{') return this.fallBack(out);
        this.state = 'element';
        this.scan = 0;
        this.depth = 0;
        this.inString = false;
        this.escaped = false;
        continue;
      }
      // element: find the matching closing brace
      let end = -1;
      for (; this.scan < this.buffer.length; this.scan++) {
        const c = this.buffer[this.scan];
        if (this.inString) {
          if (this.escaped) this.escaped = false;
          else if (c === '\\') this.escaped = true;
          else if (c === '"') this.inString = false;
        } else if (c === '"') this.inString = true;
        else if (c === '{' || c === '[') this.depth++;
        else if (c === '}' || c === ']') {
          this.depth--;
          if (this.depth === 0) {
            end = this.scan + 1;
            break;
          }
        }
      }
      if (end === -1) {
        if (eof) this.buffer = ''; // truncated element: not reported
        return;
      }
      this.emitElement(out, this.buffer.slice(0, end));
      this.buffer = this.buffer.slice(end);
      this.state = 'between';
    }
  }

  private fallBack(out: DetectorResult): void {
    this.state = this.hasToolCalls ? 'done' : 'fallback';
    if (this.state === 'fallback') {
      // Nothing was reported: the whole output is content.
      out.normalText += this.raw.slice(0, this.raw.length - this.buffer.length);
      return this.step(out, false);
    }
    this.buffer = '';
  }

  private emitElement(out: DetectorResult, text: string): void {
    let v: unknown;
    try {
      v = pyJsonLoads(text);
    } catch {
      return;
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof PyFloat) return;
    const o = v as Record<string, unknown>;
    const args = o.parameters ?? o.arguments ?? {};
    if (typeof o.name !== 'string' || !this.acceptsTool(o.name)) return;
    if (args === null || typeof args !== 'object' || Array.isArray(args)) return;
    const toolIndex = this.startCall(out, o.name);
    this.appendArguments(out, toolIndex, pyJsonDumps(args, { ensureAscii: false }));
  }
}

// `minimax-m2` tool-call detector (parsers-spec §4.2). Wire format emitted by MiniMax-M2 / M2.7:
//
//   <minimax:tool_call>
//   <invoke name="NAME">
//   <parameter name="KEY">VALUE</parameter>
//   ...
//   </invoke>
//   ...                                   (several invokes = parallel calls)
//   </minimax:tool_call>
//
// Prose may precede, follow or sit between blocks; it is content, verbatim. Parameter values are raw text
// (leading/trailing newlines removed), typed from the tool's JSON Schema. A value ends at the LAST
// `</parameter>` before the next `<parameter name="` or `</invoke>`, so a value may itself contain
// `</parameter>`. Source: python/sglang/srt/function_call/minimax_m2.py (+ its upstream tests).

import { pyJsonDumps } from '../common/index.js';
import { BaseToolCallDetector } from './base_format_detector.js';
import { convertParameterValue } from './schema_typing.js';
import { findFirstMarker, partialMarkerSuffixLength } from './text_hold.js';
import type { DetectorResult } from './types.js';

const BLOCK_START = '<minimax:tool_call>';
const BLOCK_END = '</minimax:tool_call>';
const INVOKE_START = '<invoke name="';
const INVOKE_END = '</invoke>';
const PARAM_START = '<parameter name="';
const PARAM_END = '</parameter>';
const ATTR_END = '">';

type State = 'text' | 'block' | 'invokeName' | 'invokeBody' | 'paramName' | 'paramValue';

/** Streaming, chunk-invariant parser of MiniMax-M2 tool calls. */
export class MiniMaxM2Detector extends BaseToolCallDetector {
  private state: State = 'text';
  /** The open call: its index (null when the invoke names an unknown tool), tool name, parameters emitted so far. */
  private call: { toolIndex: number | null; name: string; numParams: number } | null = null;
  private paramName = '';

  protected step(out: DetectorResult, eof: boolean): void {
    for (;;) {
      switch (this.state) {
        case 'text': {
          const i = this.buffer.indexOf(BLOCK_START);
          if (i !== -1) {
            out.normalText += this.buffer.slice(0, i);
            this.consume(i + BLOCK_START.length);
            this.state = 'block';
            continue;
          }
          const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [BLOCK_START]);
          out.normalText += this.buffer.slice(0, this.buffer.length - hold);
          this.consume(this.buffer.length - hold);
          return;
        }
        case 'block': {
          const m = findFirstMarker(this.buffer, [INVOKE_START, BLOCK_END]);
          if (m === null) {
            // Text between invokes is layout; keep only what may start a tag.
            const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [INVOKE_START, BLOCK_END]);
            this.consume(this.buffer.length - hold);
            return;
          }
          this.consume(m.index + m.marker.length);
          this.state = m.marker === BLOCK_END ? 'text' : 'invokeName';
          continue;
        }
        case 'invokeName': {
          const i = this.buffer.indexOf(ATTR_END);
          if (i === -1) {
            if (eof) this.buffer = ''; // cut inside the name tag: no call, markup is not content
            return;
          }
          const name = this.buffer.slice(0, i).trim();
          this.consume(i + ATTR_END.length);
          const toolIndex = this.acceptsTool(name) ? this.startCall(out, name) : null;
          this.call = { toolIndex, name, numParams: 0 };
          this.state = 'invokeBody';
          continue;
        }
        case 'invokeBody': {
          const m = findFirstMarker(this.buffer, [PARAM_START, INVOKE_END, BLOCK_END]);
          if (m === null) {
            const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [PARAM_START, INVOKE_END, BLOCK_END]);
            this.consume(this.buffer.length - hold);
            if (eof) this.closeCall(out, 'block');
            return;
          }
          this.consume(m.index + m.marker.length);
          if (m.marker === PARAM_START) {
            this.state = 'paramName';
          } else {
            this.closeCall(out, m.marker === INVOKE_END ? 'block' : 'text');
          }
          continue;
        }
        case 'paramName': {
          const i = this.buffer.indexOf(ATTR_END);
          if (i === -1) {
            if (eof) {
              this.buffer = '';
              this.closeCall(out, 'block');
            }
            return;
          }
          this.paramName = this.buffer.slice(0, i).trim();
          this.consume(i + ATTR_END.length);
          this.state = 'paramValue';
          continue;
        }
        case 'paramValue': {
          // The value ends at the last </parameter> before the next parameter / invoke end; until that
          // boundary arrives a later </parameter> could still belong to this value.
          const m = this.findWaiting([PARAM_START, INVOKE_END, BLOCK_END]);
          if (m === null && !eof) return;
          const segment = m === null ? this.buffer : this.buffer.slice(0, m.index);
          const close = segment.lastIndexOf(PARAM_END);
          if (close !== -1 || m !== null) this.emitParameter(out, close !== -1 ? segment.slice(0, close) : segment);
          this.consume(segment.length);
          if (m === null) {
            this.closeCall(out, 'block');
            return;
          }
          this.state = 'invokeBody';
          continue;
        }
      }
    }
  }

  private consume(n: number): void {
    this.buffer = this.buffer.slice(n);
  }

  private emitParameter(out: DetectorResult, rawWithNewlines: string): void {
    const call = this.call;
    if (call === null || call.toolIndex === null) return;
    const raw = rawWithNewlines.replace(/^\n+/, '').replace(/\n+$/, '');
    const value = convertParameterValue(raw, this.paramName, this.toolParameters(call.name));
    const pair = `${pyJsonDumps(this.paramName, { ensureAscii: false })}: ${pyJsonDumps(value, { ensureAscii: false })}`;
    this.appendArguments(out, call.toolIndex, (call.numParams === 0 ? '{' : ', ') + pair);
    call.numParams++;
  }

  private closeCall(out: DetectorResult, next: State): void {
    const call = this.call;
    if (call !== null && call.toolIndex !== null) this.appendArguments(out, call.toolIndex, call.numParams === 0 ? '{}' : '}');
    this.call = null;
    this.state = next;
  }
}

// `deepseekv32` tool-call detector: DeepSeek-V3.2's DSML markup (parsers-spec §4.3). `｜` is U+FF5C.
//
//   CONTENT\n\n<｜DSML｜function_calls>
//   <｜DSML｜invoke name="NAME">
//   <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜function_calls>
//
// An invoke body is parameter tags, a bare JSON object, or empty. `string="true"` values are the trimmed text;
// `string="false"` values are JSON-decoded (the trimmed text as a string if that fails). The tool schema is not
// consulted. Content = prose outside sections: trailing whitespace before a section is dropped, prose after a
// section is trimmed and joined to earlier content by one line break.
// Source: python/sglang/srt/function_call/deepseekv32_detector.py, encoding_dsv32.py (+ upstream tests).

import { PyFloat, pyJsonDumps, pyJsonLoads } from '../common/index.js';
import type { PyJson } from '../common/index.js';
import { BaseToolCallDetector } from './base_format_detector.js';
import { findFirstMarker, partialMarkerSuffixLength, trailingWhitespaceLength } from './text_hold.js';
import type { DetectorResult } from './types.js';

const DSML = '｜DSML｜';
const SECTION_START = `<${DSML}function_calls>`;
const SECTION_END = `</${DSML}function_calls>`;
const INVOKE_START = `<${DSML}invoke`;
const INVOKE_END = `</${DSML}invoke>`;
const PARAM_START = `<${DSML}parameter`;
const PARAM_END = `</${DSML}parameter>`;
/** Tags that may open a call outside a section (a bare invoke is accepted as an implicit section). */
const OPENERS = [SECTION_START, INVOKE_START];
/** Closers that are dropped when they appear outside any section. */
const STRAY_CLOSERS = [SECTION_END, INVOKE_END, PARAM_END];

type State = 'text' | 'section' | 'invokeTag' | 'invokeBody' | 'paramTag' | 'paramValue';

function decodeNonString(trimmed: string): PyJson {
  try {
    return pyJsonLoads(trimmed);
  } catch {
    return trimmed;
  }
}

/** Streaming, chunk-invariant parser of DeepSeek-V3.2 DSML tool calls. */
export class DeepSeekV32Detector extends BaseToolCallDetector {
  private state: State = 'text';
  /** A section has been seen: later prose is joined with a line break and trimmed. */
  private afterSection = false;
  private emittedContent = false;
  /** Prose seen next joins earlier content with a line break (set when a section opens). */
  private joinPending = false;
  private call: { toolIndex: number | null; numParams: number; bodyText: string } | null = null;
  private param: { name: string; isString: boolean } | null = null;

  protected step(out: DetectorResult, eof: boolean): void {
    for (;;) {
      switch (this.state) {
        case 'text': {
          const m = findFirstMarker(this.buffer, [...OPENERS, ...STRAY_CLOSERS]);
          if (m !== null && STRAY_CLOSERS.includes(m.marker)) {
            this.emitProse(out, this.buffer.slice(0, m.index), false);
            this.consume(m.index + m.marker.length);
            continue;
          }
          if (m !== null) {
            this.emitProse(out, this.buffer.slice(0, m.index), true);
            this.consume(m.index + m.marker.length);
            this.afterSection = true;
            this.joinPending = true;
            this.state = m.marker === SECTION_START ? 'section' : 'invokeTag';
            continue;
          }
          if (eof) {
            // A DSML tag cut short by the end of generation is dropped; a bare '<' or '</' is prose.
            const tagLen = partialMarkerSuffixLength(this.buffer, [...OPENERS, ...STRAY_CLOSERS]);
            const tail = this.buffer.slice(this.buffer.length - tagLen);
            const cut = tail.startsWith('<｜') || tail.startsWith('</｜') ? tagLen : 0;
            this.emitProse(out, this.buffer.slice(0, this.buffer.length - cut), cut > 0);
            this.buffer = '';
            return;
          }
          const hold = partialMarkerSuffixLength(this.buffer, [...OPENERS, ...STRAY_CLOSERS]);
          this.emitProseHoldingWhitespace(out, this.buffer.length - hold);
          return;
        }
        case 'section': {
          const m = findFirstMarker(this.buffer, [INVOKE_START, SECTION_END]);
          if (m === null) {
            const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [INVOKE_START, SECTION_END]);
            this.consume(this.buffer.length - hold);
            return;
          }
          this.consume(m.index + m.marker.length);
          this.state = m.marker === SECTION_END ? 'text' : 'invokeTag';
          continue;
        }
        case 'invokeTag': {
          const i = this.buffer.indexOf('>');
          const lt = this.buffer.indexOf('<');
          if (lt !== -1 && (i === -1 || lt < i)) {
            // The invoke tag lacks its '>' (a DSML tag follows): the invoke is malformed and dropped; the tags after
            // it are parsed as usual, so later valid invokes are kept (upstream SGLang's deepseekv32 detector).
            this.consume(lt);
            this.call = { toolIndex: null, numParams: 0, bodyText: '' };
            this.state = 'invokeBody';
            continue;
          }
          if (i === -1) {
            if (eof) this.buffer = '';
            return;
          }
          const attrs = this.buffer.slice(0, i);
          this.consume(i + 1);
          const nameMatch = /^\s+name="([^"]*)"\s*(\/?)\s*$/.exec(attrs);
          const name = nameMatch ? nameMatch[1].trim() : null;
          const toolIndex = name !== null && this.acceptsTool(name) ? this.startCall(out, name) : null;
          this.call = { toolIndex, numParams: 0, bodyText: '' };
          if (nameMatch && nameMatch[2] === '/') {
            this.closeCall(out);
            this.state = 'section';
          } else {
            this.state = 'invokeBody';
          }
          continue;
        }
        case 'invokeBody': {
          const m = this.findWaiting([PARAM_START, INVOKE_END, SECTION_END, INVOKE_START]);
          if (m === null) {
            if (eof) {
              this.buffer = '';
              this.closeCall(out); // open invoke: completed parameters only
            }
            return;
          }
          const between = this.buffer.slice(0, m.index);
          this.consume(m.index + m.marker.length);
          if (m.marker === PARAM_START) {
            this.state = 'paramTag';
            continue;
          }
          if (m.marker === INVOKE_START) {
            // the next invoke opens before this one closed: this one ends here
            this.closeCall(out);
            this.state = 'invokeTag';
            continue;
          }
          if (this.call !== null) this.call.bodyText = between;
          this.closeCall(out);
          this.state = m.marker === INVOKE_END ? 'section' : 'text';
          continue;
        }
        case 'paramTag': {
          const i = this.buffer.indexOf('>');
          if (i === -1) {
            if (eof) {
              this.buffer = '';
              this.closeCall(out);
            }
            return;
          }
          const attrs = this.buffer.slice(0, i);
          this.consume(i + 1);
          const pm = /^\s+name="([^"]*)"(?:\s+string="([^"]*)")?\s*$/.exec(attrs);
          this.param = pm ? { name: pm[1], isString: pm[2] === 'true' } : null;
          this.state = 'paramValue';
          continue;
        }
        case 'paramValue': {
          const end = this.findWaiting([PARAM_END, INVOKE_END, INVOKE_START, SECTION_END]);
          if (end !== null && end.marker !== PARAM_END) {
            // Unclosed parameter: its value ends at the invoke's end (or the next invoke / section end) and is
            // discarded; the invoke keeps its completed parameters and later invokes are parsed as usual.
            this.consume(end.index);
            this.param = null;
            this.state = 'invokeBody';
            continue;
          }
          const i = end?.index ?? -1;
          if (i === -1) {
            if (eof) {
              this.buffer = ''; // half-written value: discarded
              this.closeCall(out);
            }
            return;
          }
          const trimmed = this.buffer.slice(0, i).trim();
          this.consume(i + PARAM_END.length);
          if (this.param !== null) this.emitParameter(out, this.param.name, this.param.isString ? trimmed : decodeNonString(trimmed));
          this.param = null;
          this.state = 'invokeBody';
          continue;
        }
      }
    }
  }

  private consume(n: number): void {
    this.buffer = this.buffer.slice(n);
  }

  /** Emits prose; before a section (`beforeSection`) its trailing whitespace is dropped. */
  private emitProse(out: DetectorResult, text: string, beforeSection: boolean): void {
    let t = text;
    if (beforeSection || this.afterSection) t = t.slice(0, t.length - trailingWhitespaceLength(t));
    this.writeContent(out, t);
  }

  /** Streams prose up to `end`, holding a trailing whitespace run (it may turn out to precede a section). */
  private emitProseHoldingWhitespace(out: DetectorResult, end: number): void {
    const head = this.buffer.slice(0, end);
    const keep = head.length - trailingWhitespaceLength(head);
    this.writeContent(out, head.slice(0, keep));
    this.consume(keep);
  }

  private writeContent(out: DetectorResult, text: string): void {
    let t = text;
    if (this.joinPending) {
      // First prose after a section: leading layout whitespace dropped, one line break to earlier content.
      t = t.replace(/^\s+/, '');
      if (!t) return;
      this.joinPending = false;
      if (this.emittedContent) t = '\n' + t;
    }
    if (!t) return;
    out.normalText += t;
    this.emittedContent = true;
  }

  private emitParameter(out: DetectorResult, name: string, value: PyJson): void {
    const call = this.call;
    if (call === null || call.toolIndex === null) return;
    const pair = `${pyJsonDumps(name, { ensureAscii: false })}: ${pyJsonDumps(value, { ensureAscii: false })}`;
    this.appendArguments(out, call.toolIndex, (call.numParams === 0 ? '{' : ', ') + pair);
    call.numParams++;
  }

  private closeCall(out: DetectorResult): void {
    const call = this.call;
    this.call = null;
    if (call === null || call.toolIndex === null) return;
    if (call.numParams > 0) {
      this.appendArguments(out, call.toolIndex, '}');
      return;
    }
    const body = call.bodyText.trim();
    if (body.startsWith('{') && body.endsWith('}')) {
      try {
        const v = pyJsonLoads(body);
        if (v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof PyFloat)) {
          this.appendArguments(out, call.toolIndex, pyJsonDumps(v, { ensureAscii: false }));
          return;
        }
      } catch {
        // not JSON: no arguments
      }
    }
    this.appendArguments(out, call.toolIndex, '{}');
  }
}

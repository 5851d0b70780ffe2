// `deepseekv31` and `deepseekv3` tool-call detectors: DeepSeek's special-token call sections
// (parsers-spec §4.4, §4.5). `｜` is U+FF5C, `▁` is U+2581.
//
//   deepseekv31:  CONTENT<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//   deepseekv3:   …<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{JSON}\n```<｜tool▁call▁end｜>…
//
// A call counts only once its `<｜tool▁call▁end｜>` has arrived (a truncated call is not reported); its JSON must be
// an object (else the call is dropped). Content = text before the section, trailing whitespace removed; text
// after `<｜tool▁calls▁end｜>` is not content; lone end tokens outside a section are removed.
// Sources: python/sglang/srt/function_call/deepseekv31_detector.py, deepseekv3_detector.py.

import { PyFloat, pyJsonDumps, pyJsonLoads } from '../common/index.js';
import type { PyJson } from '../common/index.js';
import { BaseToolCallDetector } from './base_format_detector.js';
import { findFirstMarker, partialMarkerSuffixLength, trailingWhitespaceLength } from './text_hold.js';
import type { DetectorOptions } from './base_format_detector.js';
import type { DetectorResult, ParserTool } from './types.js';

const CALLS_BEGIN = '<｜tool▁calls▁begin｜>';
const CALLS_END = '<｜tool▁calls▁end｜>';
const CALL_BEGIN = '<｜tool▁call▁begin｜>';
const CALL_END = '<｜tool▁call▁end｜>';
const SEP = '<｜tool▁sep｜>';

type State = 'text' | 'section' | 'call' | 'done';

/** Decodes a JSON object text, or null if it is not one. */
function jsonObject(text: string): PyJson | null {
  try {
    const v = pyJsonLoads(text.trim());
    return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof PyFloat) ? v : null;
  } catch {
    return null;
  }
}

/** Shared state machine of the V3-family special-token formats; subclasses parse one call's text. */
abstract class DeepSeekSpecialTokenDetector extends BaseToolCallDetector {
  private state: State = 'text';

  /** Parses the text between `<｜tool▁call▁begin｜>` and `<｜tool▁call▁end｜>`; null if malformed. */
  protected abstract parseCall(segment: string): { name: string; args: PyJson } | null;

  protected step(out: DetectorResult, eof: boolean): void {
    for (;;) {
      switch (this.state) {
        case 'text': {
          const m = findFirstMarker(this.buffer, [CALLS_BEGIN, CALLS_END, CALL_END]);
          if (m !== null) {
            const before = this.buffer.slice(0, m.index);
            if (m.marker === CALLS_BEGIN) {
              out.normalText += before.slice(0, before.length - trailingWhitespaceLength(before));
              this.state = 'section';
            } else {
              out.normalText += before; // a lone end token is dropped
            }
            this.buffer = this.buffer.slice(m.index + m.marker.length);
            continue;
          }
          if (eof) {
            out.normalText += this.buffer;
            this.buffer = '';
            return;
          }
          const end = this.buffer.length - partialMarkerSuffixLength(this.buffer, [CALLS_BEGIN, CALLS_END, CALL_END]);
          const head = this.buffer.slice(0, end);
          const keep = head.length - trailingWhitespaceLength(head); // may precede the section: held
          out.normalText += head.slice(0, keep);
          this.buffer = this.buffer.slice(keep);
          return;
        }
        case 'section': {
          const m = findFirstMarker(this.buffer, [CALL_BEGIN, CALLS_END]);
          if (m === null) {
            const hold = eof ? 0 : partialMarkerSuffixLength(this.buffer, [CALL_BEGIN, CALLS_END]);
            this.buffer = this.buffer.slice(this.buffer.length - hold);
            return;
          }
          this.buffer = this.buffer.slice(m.index + m.marker.length);
          this.state = m.marker === CALL_BEGIN ? 'call' : 'done';
          continue;
        }
        case 'call': {
          const m = this.findWaiting([CALL_END, CALLS_END]);
          if (m === null) {
            if (eof) this.buffer = ''; // truncated call: not reported
            return;
          }
          if (m.marker === CALL_END) {
            const parsed = this.parseCall(this.buffer.slice(0, m.index));
            if (parsed !== null && this.acceptsTool(parsed.name)) {
              const toolIndex = this.startCall(out, parsed.name);
              this.appendArguments(out, toolIndex, pyJsonDumps(parsed.args, { ensureAscii: false }));
            }
          }
          this.buffer = this.buffer.slice(m.index + m.marker.length);
          this.state = m.marker === CALL_END ? 'section' : 'done';
          continue;
        }
        case 'done':
          this.buffer = '';
          return;
      }
    }
  }
}

/** `deepseekv31`: `NAME<｜tool▁sep｜>{JSON}` per call (DeepSeek-V3.1, V3.2-Exp). */
export class DeepSeekV31Detector extends DeepSeekSpecialTokenDetector {
  constructor(tools: readonly ParserTool[], options: DetectorOptions = {}) {
    super(tools, options);
  }

  protected parseCall(segment: string): { name: string; args: PyJson } | null {
    const sep = segment.indexOf(SEP);
    if (sep === -1) return null;
    const args = jsonObject(segment.slice(sep + SEP.length));
    return args === null ? null : { name: segment.slice(0, sep).trim(), args };
  }
}

/** `deepseekv3`: `function<｜tool▁sep｜>NAME\n```json\n{JSON}\n```` per call (DeepSeek-V3, R1). */
export class DeepSeekV3Detector extends DeepSeekSpecialTokenDetector {
  constructor(tools: readonly ParserTool[], options: DetectorOptions = {}) {
    super(tools, options);
  }

  protected parseCall(segment: string): { name: string; args: PyJson } | null {
    const sep = segment.indexOf(SEP);
    if (sep === -1) return null;
    const m = /^([^\n]*)\n\s*```(?:json)?\s*\n([\s\S]*?)\s*```\s*$/.exec(segment.slice(sep + SEP.length));
    if (m === null) return null;
    const args = jsonObject(m[2]);
    return args === null ? null : { name: m[1].trim(), args };
  }
}

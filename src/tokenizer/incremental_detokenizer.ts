// Per-request incremental detokenization: token ids in, text increments out, through the tokenizer's
// id → bytes table and a streaming TextDecoder (O(1) per token, never a partial UTF-8 character), with
// stop strings matched on the decoded text and their possible beginnings held back while streaming.
// Knows nothing of requests beyond one id stream. Follows SGLang's DetokenizerManager semantics
// (python/sglang/srt/managers/detokenizer_manager.py): text is emitted only once it is valid UTF-8, and output
// stops before the matched stop string unless no_stop_trim.
import type { Tokenizer } from './tokenizer.js';

/** Options of one request's detokenizer. */
export interface IncrementalDetokenizerOptions {
  /** Drop special added tokens from the text (SGLang default true). */
  skipSpecialTokens?: boolean;
  /** Stop strings (sampling param `stop`); the first one found in the text ends the stream. */
  stop?: readonly string[];
  /** Keep the matched stop string in the text (sampling param `no_stop_trim`, default false). */
  noStopTrim?: boolean;
}

/** Result of feeding ids to {@link IncrementalDetokenizer.push}. */
export interface DetokenizeStep {
  /** Text that became final with these ids (may be ''; never a partial character or a possible stop prefix). */
  delta: string;
  /** The stop string that matched in this step, or null. Once set, later pushes return '' and this value. */
  matchedStop: string | null;
}

/**
 * Incremental detokenizer of one request's output ids.
 * Invariant: `text` (everything emitted) + the held-back tail = decode(all ids pushed) (minus what follows a stop).
 */
export class IncrementalDetokenizer {
  private readonly decoder = new TextDecoder('utf-8', { fatal: false });
  private readonly skipSpecial: boolean;
  private readonly stops: readonly string[];
  private readonly noStopTrim: boolean;
  private pending = '';
  private emitted = '';
  private matched: string | null = null;

  /**
   * @param tokenizer supplies `tokenBytes` and `isSpecialToken`
   * @param options stop strings and decode options (empty stop strings are ignored)
   */
  constructor(private readonly tokenizer: Tokenizer, options: IncrementalDetokenizerOptions = {}) {
    this.skipSpecial = options.skipSpecialTokens ?? true;
    this.stops = (options.stop ?? []).filter((s) => s.length > 0);
    this.noStopTrim = options.noStopTrim ?? false;
  }

  /** All text emitted so far (the cumulative output text). */
  get text(): string {
    return this.emitted;
  }

  /** The stop string that ended the stream, or null. */
  get matchedStop(): string | null {
    return this.matched;
  }

  /**
   * Feeds the next output id(s).
   * @param ids one id or several, in generation order
   * @returns the newly final text and whether a stop string matched
   */
  push(ids: number | readonly number[]): DetokenizeStep {
    if (this.matched !== null) return { delta: '', matchedStop: this.matched };
    const list = typeof ids === 'number' ? [ids] : ids;
    for (const id of list) {
      if (this.skipSpecial && this.tokenizer.isSpecialToken(id)) continue;
      this.pending += this.decoder.decode(this.tokenizer.tokenBytes(id), { stream: true });
    }
    return this.release(false);
  }

  /**
   * Ends the stream (request finished): releases the held-back tail, including an incomplete UTF-8 sequence
   * as U+FFFD (as a whole-sequence decode would).
   * @returns the remaining text ('' after a stop match)
   */
  flush(): string {
    if (this.matched !== null) return '';
    this.pending += this.decoder.decode();
    return this.release(true).delta;
  }

  private release(final: boolean): DetokenizeStep {
    // 1. a full stop-string match: cut there
    let best = -1;
    let bestStop = '';
    for (const s of this.stops) {
      const at = this.pending.indexOf(s);
      if (at >= 0 && (best < 0 || at < best)) { best = at; bestStop = s; }
    }
    if (best >= 0) {
      const delta = this.pending.slice(0, this.noStopTrim ? best + bestStop.length : best);
      this.emitted += delta;
      this.pending = '';
      this.matched = bestStop;
      return { delta, matchedStop: bestStop };
    }
    // 2. hold back the longest tail that could still grow into a stop string
    let hold = 0;
    if (!final) {
      for (const s of this.stops) {
        const maxLen = Math.min(s.length - 1, this.pending.length);
        for (let len = maxLen; len > hold; len--) {
          if (this.pending.endsWith(s.slice(0, len))) { hold = len; break; }
        }
      }
    }
    const delta = this.pending.slice(0, this.pending.length - hold);
    this.pending = this.pending.slice(this.pending.length - hold);
    this.emitted += delta;
    return { delta, matchedStop: null };
  }
}

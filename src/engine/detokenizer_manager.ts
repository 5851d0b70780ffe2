// DetokenizerManager: token ids → text per request (SGLang managers/detokenizer_manager.py), on the scheduler's
// thread right after each step so a matched stop string finishes the request before the next step. Uses the
// tokenizer's IncrementalDetokenizer (never broken UTF-8, partial stop strings held back).
import { IncrementalDetokenizer, type Tokenizer } from '../tokenizer/index.js';
import type { ReqTokenOutput } from '../scheduler/index.js';
import type { CoreOutput, DetokOptions } from './messages.js';
import type { FinishReason } from './types.js';

interface DetokState {
  readonly detok: IncrementalDetokenizer | null;
  readonly opts: DetokOptions;
  readonly stream: boolean;
  text: string;
  ids: number[];
  outLp: [number, number][];
  outTop: [number, number][][];
  inLp: ReqTokenOutput['inputTokenLogprobs'];
  inTop: ReqTokenOutput['inputTopLogprobs'];
  hasLogprobs: boolean;
}

/** Result of processing one step's token outputs. */
export interface DetokResult {
  readonly outputs: CoreOutput[];
  /** Requests whose stop string matched: the scheduler must finish them. */
  readonly stopMatches: { rid: string; matched: string }[];
}

/** Per-request incremental detokenization and emission policy (streaming: every `streamInterval` tokens). */
export class DetokenizerManager {
  private readonly tokenizer: Tokenizer | null;
  private readonly streamInterval: number;
  private readonly states = new Map<string, DetokState>();

  /** @param tokenizer null with --skip-tokenizer-init (outputs carry ids only) */
  constructor(tokenizer: Tokenizer | null, streamInterval = 1) {
    this.tokenizer = tokenizer;
    this.streamInterval = Math.max(1, streamInterval);
  }

  /** Registers a request. */
  add(rid: string, opts: DetokOptions, stream: boolean): void {
    const detok = this.tokenizer ? new IncrementalDetokenizer(this.tokenizer, { skipSpecialTokens: opts.skipSpecialTokens, stop: opts.stop, noStopTrim: opts.noStopTrim }) : null;
    this.states.set(rid, { detok, opts, stream, text: '', ids: [], outLp: [], outTop: [], inLp: undefined, inTop: undefined, hasLogprobs: false });
  }

  /** Number of live requests. */
  get size(): number {
    return this.states.size;
  }

  /** Forgets a request (after an error). */
  remove(rid: string): void {
    this.states.delete(rid);
  }

  /**
   * Turns one step's token outputs into emissions. A finished request emits once (everything not yet emitted) and is
   * forgotten; a streaming request emits on every `streamInterval`-th token (and the first); a non-streaming one only
   * at the end.
   */
  process(tokenOutputs: readonly ReqTokenOutput[]): DetokResult {
    const outputs: CoreOutput[] = [];
    const stopMatches: { rid: string; matched: string }[] = [];
    for (const raw of tokenOutputs) {
      const st = this.states.get(raw.rid);
      if (!st) continue;
      let o = raw;
      let finish: FinishReason | null = o.finishReason;
      if (st.detok) {
        let textIds = o.newIds;
        // A matched stop token is not part of the text unless no_stop_trim (SGLang trims it from the decode ids).
        if (finish?.type === 'stop' && typeof finish.matched === 'number' && !st.opts.noStopTrim && textIds.length > 0) textIds = textIds.slice(0, -1);
        let step;
        if (st.opts.stop.length > 0 && textIds.length > 1) {
          // Several tokens at once (a speculative verify): a stop string matched by one of them drops the later ones,
          // as SGLang's per-token check_finished does.
          let delta = '';
          let k = 0;
          let matchedStop: string | null = null;
          while (k < textIds.length && matchedStop === null) {
            const s1 = st.detok.push(textIds[k++]);
            delta += s1.delta;
            matchedStop = s1.matchedStop;
          }
          step = { delta, matchedStop };
          if (matchedStop !== null && finish === null && k < o.newIds.length) o = truncateOutput(o, k);
        } else step = st.detok.push(textIds);
        st.text += step.delta;
        if (step.matchedStop !== null && finish === null) {
          finish = { type: 'stop', matched: step.matchedStop };
          stopMatches.push({ rid: o.rid, matched: step.matchedStop });
        }
        if (finish !== null && step.matchedStop === null) st.text += st.detok.flush();
      }
      st.ids.push(...o.newIds);
      if (o.outputTokenLogprobs) {
        st.hasLogprobs = true;
        st.outLp.push(...o.outputTokenLogprobs);
        st.outTop.push(...(o.outputTopLogprobs ?? []));
      }
      if (o.inputTokenLogprobs) {
        st.hasLogprobs = true;
        st.inLp = o.inputTokenLogprobs;
        st.inTop = o.inputTopLogprobs;
      }
      const n = o.completionTokens;
      // While text is held back because it may start a stop string, the tokens wait for the next emission (SGLang
      // check_match_stop_str_prefix suppresses the update).
      const heldForStop = st.detok !== null && st.opts.stop.length > 0 && st.text.length === 0;
      const due = finish !== null || (st.stream && (n === 1 || n % this.streamInterval === 0) && st.ids.length > 0 && !heldForStop);
      if (!due) continue;
      const out: CoreOutput = {
        rid: o.rid,
        text: st.text,
        outputIds: st.ids,
        finishReason: finish,
        promptTokens: o.promptTokens,
        completionTokens: n,
        cachedTokens: o.cachedTokens,
        numRetractions: o.numRetractions,
        ...(o.spec ? { spec: o.spec } : {}),
        ...(st.hasLogprobs
          ? {
              outputTokenLogprobs: st.outLp,
              outputTopLogprobs: st.outTop,
              ...(st.inLp ? { inputTokenLogprobs: st.inLp, inputTopLogprobs: st.inTop } : {}),
            }
          : {}),
      };
      outputs.push(out);
      st.text = '';
      st.ids = [];
      st.outLp = [];
      st.outTop = [];
      st.inLp = undefined;
      st.inTop = undefined;
      if (finish !== null) this.states.delete(o.rid);
    }
    return { outputs, stopMatches };
  }
}

/** The first `k` new tokens of a step's output (and their logprobs); completion_tokens counts only those. */
function truncateOutput(o: ReqTokenOutput, k: number): ReqTokenOutput {
  const drop = o.newIds.length - k;
  return {
    ...o,
    newIds: o.newIds.slice(0, k),
    completionTokens: o.completionTokens - drop,
    ...(o.outputTokenLogprobs ? { outputTokenLogprobs: o.outputTokenLogprobs.slice(0, k) } : {}),
    ...(o.outputTopLogprobs ? { outputTopLogprobs: o.outputTopLogprobs.slice(0, k) } : {}),
  };
}

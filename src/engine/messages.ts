// Messages between the Engine (main thread) and the EngineCore (worker thread or in-process), and between the
// Engine and its tokenizer worker. Plain, structured-clonable data discriminated by `type`; no class instances
// cross the boundary.
import type { ReqTokenOutput, TokenizedReq } from '../scheduler/index.js';
import type { EngineInfo, EngineLoad, ProfileReply, ProfileRequest } from './types.js';

/** Detokenizer options of one request (from its sampling params). */
export interface DetokOptions {
  readonly skipSpecialTokens: boolean;
  readonly stop: readonly string[];
  readonly noStopTrim: boolean;
}

/** Main → core. */
export type ToCoreMsg =
  | { readonly type: 'generate'; readonly req: TokenizedReq; readonly detok: DetokOptions }
  | { readonly type: 'abort'; readonly rid: string }
  | { readonly type: 'abort_all' }
  | { readonly type: 'flush'; readonly id: number }
  | { readonly type: 'load'; readonly id: number }
  | { readonly type: 'start_profile'; readonly id: number; readonly req: ProfileRequest }
  | { readonly type: 'stop_profile'; readonly id: number }
  | { readonly type: 'shutdown' }
  /** DP controller → attention-DP group cores: a message (seq) reached another group; step with them. */
  | { readonly type: 'kick'; readonly seq: number };

/**
 * One emission of one internal request (deltas since its previous emission): the scheduler's ReqTokenOutput
 * (counts, finish reason, logprobs) with its new ids as `outputIds` and their detokenized `text`.
 */
export interface CoreOutput extends Omit<ReqTokenOutput, 'newIds'> {
  readonly text: string;
  readonly outputIds: number[];
}

/** Core → main. */
export type FromCoreMsg =
  | { readonly type: 'ready'; readonly info: EngineInfo }
  | { readonly type: 'init_error'; readonly message: string; readonly kind: string }
  | { readonly type: 'outputs'; readonly outputs: CoreOutput[] }
  | { readonly type: 'req_error'; readonly rid: string; readonly message: string; readonly kind: string; readonly param: string | null }
  | { readonly type: 'reply'; readonly id: number; readonly value: boolean | EngineLoad | ProfileReply }
  /** The core can never run again (TP ranks broken): every request was failed; the server must exit. */
  | { readonly type: 'fatal'; readonly message: string }
  /**
   * An attention-DP group core has work that did not come through the controller (a PD transfer event, a PD timer):
   * every group must step with it, so the controller kicks them all (a group stepping alone would wait in the step
   * exchange for the others).
   */
  | { readonly type: 'lockstep_wake' };

/** What the tokenizer worker (engine/tokenizer_worker_main.ts) starts from. */
export interface TokenizerWorkerData {
  /** Directory holding tokenizer.json (and tokenizer_config.json, generation_config.json). */
  readonly tokenizerPath: string;
}

/** Main → tokenizer worker: encode each text with the same options (one reply per request, in order). */
export type ToTokenizerMsg = { readonly type: 'encode'; readonly id: number; readonly texts: readonly string[]; readonly addSpecialTokens: boolean };

/**
 * Tokenizer worker → main. `encoded.ids[i]` holds the ids of `texts[i]` (an Int32Array whose buffer is transferred,
 * not copied); `encode_error` carries the message of an exception the tokenizer threw on that input.
 */
export type FromTokenizerMsg =
  | { readonly type: 'ready' }
  | { readonly type: 'init_error'; readonly message: string }
  | { readonly type: 'encoded'; readonly id: number; readonly ids: Int32Array[] }
  | { readonly type: 'encode_error'; readonly id: number; readonly message: string };

// Messages between the Engine (main thread) and the EngineCore (worker thread or in-process). Plain,
// structured-clonable data discriminated by `type`; no class instances cross the boundary.
import type { ReqTokenOutput, TokenizedReq } from '../scheduler/index.js';
import type { EngineInfo, EngineLoad } from './types.js';

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
  | { readonly type: 'shutdown' };

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
  | { readonly type: 'reply'; readonly id: number; readonly value: boolean | EngineLoad };

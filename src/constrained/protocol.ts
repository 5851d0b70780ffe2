// Messages between the GrammarClient (engine core thread) and the grammar worker (grammar_worker_main.ts). Plain,
// structured-clonable data; masks travel as transferred Int32Arrays.
import type { GrammarKey } from './grammar_engine.js';

/** workerData of the grammar worker. */
export interface GrammarWorkerData {
  /** Directory of tokenizer.json. */
  readonly tokenizerPath: string;
  /** Logits row width (config vocab_size). */
  readonly vocabSize: number;
  /** EOS ids: the matchers' stop tokens. */
  readonly stopIds: readonly number[];
  readonly maxCompiled: number;
  readonly maxErrors: number;
  /** JSON grammars allow any whitespace (else compact separators `, ` and `: `, no indent). */
  readonly anyWhitespace: boolean;
  /** Control words (Int32Array over a SharedArrayBuffer): [SEQ] bumped after every reply, [BUSY] 1 while compiling. */
  readonly control: SharedArrayBuffer;
}

/** Index of the reply counter in the control words. */
export const CTL_SEQ = 0;
/** Index of the "compiling now" flag in the control words. */
export const CTL_BUSY = 1;

/** Client → worker. */
export type ToGrammarMsg =
  | { readonly t: 'open'; readonly rid: string; readonly key: GrammarKey }
  | { readonly t: 'accept'; readonly rid: string; readonly token: number }
  | { readonly t: 'close'; readonly rid: string }
  | { readonly t: 'stats'; readonly id: number };

/** Worker → client. */
export type FromGrammarMsg =
  | { readonly t: 'ready'; readonly initMs: number }
  | { readonly t: 'init_error'; readonly message: string }
  /** The grammar of `rid` compiled (mask = its first mask) or failed (error = the compiler's reason). */
  | { readonly t: 'opened'; readonly rid: string; readonly mask: Int32Array | null; readonly error: string | null; readonly compileMs: number }
  /** After an accept: the next mask (null when the grammar terminated), or error when the token was refused. */
  | { readonly t: 'mask'; readonly rid: string; readonly mask: Int32Array | null; readonly error: string | null }
  | { readonly t: 'stats'; readonly id: number; readonly stats: Record<string, number> };

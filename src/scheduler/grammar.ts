// The scheduler's view of the grammar backend (SGLang's GrammarManager seam in scheduler.py): what a request with a
// constraint needs between admission and finish. constrained/GrammarClient implements it; tests may fake it.
import type { GrammarSpec } from '../sampling/index.js';

/** Grammar backend as the scheduler drives it (see constrained/grammar_client.ts for the semantics). */
export interface GrammarScheduling {
  /** Starts compiling a request's grammar; the request waits in the grammar queue meanwhile. */
  open(rid: string, key: GrammarSpec, requireReasoning: boolean): void;
  /** compiling | ready | failed; null for an unknown rid. Never blocks. */
  phase(rid: string): 'compiling' | 'ready' | 'failed' | null;
  /** Why a request failed: the compiler's reason (atCompile) or a matcher error. */
  error(rid: string): { message: string; atCompile: boolean } | null;
  /** False while this row's next mask is not back and the backend is busy compiling (the row skips the step). */
  canSampleNow(rid: string): boolean;
  /** The row's next-token mask (waits for one in flight); null = unconstrained this step. */
  mask(rid: string): Int32Array | null;
  /** Advances the grammar by the sampled token. @returns true when the grammar terminated with it */
  accept(rid: string, token: number): boolean;
  /** Frees the request's matcher. */
  close(rid: string): void;
}

/** SGLang's refusal when a constraint arrives at a server started with --grammar-backend none. */
export const GRAMMAR_BACKEND_NONE_MESSAGE =
  'Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the server is launched with --grammar-backend none';

/** Default limit on the time a request may wait for its grammar to compile, ms (SGLang SGLANG_GRAMMAR_TIMEOUT, 300 s). */
export const GRAMMAR_TIMEOUT_MS = 300_000;

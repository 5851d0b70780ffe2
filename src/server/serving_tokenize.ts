// POST /v1/tokenize and /v1/detokenize (also /tokenize, /detokenize): SGLang's
// python/sglang/srt/entrypoints/openai/serving_tokenize.py. Tokenizing goes through the engine (its tokenizer
// worker when serving: never the BPE on this thread); detokenizing uses the server's tokenizer. No model work.
import { InvalidRequestError } from '../common/index.js';
import type { Exchange, ServerDeps } from './context.js';
import { errorResponse, parseOrReply, toHttpError } from './http_errors.js';
import { TokenizeRequestSchema, parseWire } from '../protocol/index.js';

function sendError(ex: Exchange, err: unknown): void {
  const e = toHttpError(err);
  ex.sendJson(e.status, e.body);
}

/**
 * Tokenizes `prompt` (a string or a list of strings): `{tokens, count, max_model_len}`. A prompt whose token lower
 * bound (Tokenizer.minTokenCount) reaches the context length is refused with the engine's over-length error
 * instead of being tokenized (SGLang tokenizes it; here a multi-megabyte word would keep the tokenizer busy for
 * minutes). A client that disconnects drops its tokenization.
 */
export async function handleTokenize(deps: ServerDeps, ex: Exchange, body: unknown): Promise<void> {
  const { engine } = deps;
  // SGLang's TokenizeRequest: `prompt` (str | list[str]) is required, there is no `messages` (README: /v1/tokenize)
  const b = parseOrReply(ex, () => parseWire(TokenizeRequestSchema, body));
  if (b === null) return;
  const single = typeof b.prompt === 'string';
  const prompts = single ? [b.prompt as string] : (b.prompt as string[]);
  let toks: number[][];
  try {
    toks = await engine.tokenize(prompts, b.add_special_tokens !== false, ex.signal);
  } catch (err) {
    sendError(ex, err);
    return;
  }
  ex.sendJson(200, { tokens: single ? toks[0] : toks, count: single ? toks[0].length : toks.map((t) => t.length), max_model_len: engine.info.contextLength });
}

/**
 * Decodes `tokens` (a list of ids, or a list of such lists → a list of texts). Ids must lie in the model's
 * vocabulary [0, vocabSize); others get SGLang's decode error (400, type "DecodeError") rather than an empty text.
 */
export async function handleDetokenize(deps: ServerDeps, ex: Exchange, body: unknown): Promise<void> {
  const { tokenizer, engine } = deps;
  const b = (body ?? {}) as { tokens?: unknown; skip_special_tokens?: unknown };
  if (!tokenizer) { sendError(ex, new InvalidRequestError('the tokenizer is not initialized (--skip-tokenizer-init)', 'tokens')); return; }
  const t = b.tokens;
  const isIds = (x: unknown): x is number[] => Array.isArray(x) && x.every((v) => Number.isInteger(v));
  const batch = Array.isArray(t) && t.length > 0 && Array.isArray(t[0]);
  const lists = isIds(t) ? [t] : batch && (t as unknown[]).every(isIds) ? (t as number[][]) : null;
  if (!lists) { sendError(ex, new InvalidRequestError("Invalid input: 'tokens' must be a list of integers or a list of lists of integers.", 'tokens')); return; }
  const vocabSize = engine.info.vocabSize;
  for (const ids of lists) {
    const bad = ids.find((id) => id < 0 || id >= vocabSize);
    if (bad !== undefined) {
      const msg = `Error decoding tokens: token id ${bad} is outside the vocabulary [0, ${vocabSize - 1}]. Input tokens might be invalid for the model.`;
      ex.sendJson(400, errorResponse(msg, 400, 'DecodeError'));
      return;
    }
  }
  const skipSpecialTokens = b.skip_special_tokens !== false;
  const texts = lists.map((ids) => tokenizer.decode(ids, { skipSpecialTokens }));
  ex.sendJson(200, { text: batch ? texts : texts[0] });
}

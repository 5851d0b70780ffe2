// A lower bound on a text's token count without tokenizing it: the most input bytes one token can stand for,
// read once from tokenizer.json. It lets the engine refuse a prompt that provably cannot fit the context before
// running @huggingface/tokenizers' BPE, which is superlinear in a pre-token's length (one 1 MB word: ~30 s and
// ~1 GB of heap; 30 MB runs the heap out). Pure: parsed JSON in, numbers out; knows nothing of requests.
//
// Why the bound holds (for the library's encode path, tokenizers.mjs `encode_text`): the text is split into added
// tokens (matched as written) and other sections; a section is normalized, split again by `normalized` added
// tokens, pre-tokenized, and each pre-token is cut into model tokens. If no step drops or shrinks text, every input
// byte is covered by exactly one token, so numTokens ≥ ceil(inputBytes / maxTokenBytes). Steps that may drop or
// shrink text make the bound unknown (null), except whitespace trimming (added tokens with lstrip/rstrip,
// whitespace-splitting pre-tokenizers), which is handled by counting non-whitespace bytes only.
import { byteLevelDecodeTable } from './byte_level.js';

/** What {@link tokenBoundOf} finds. */
export interface TokenBound {
  /** The most UTF-8 bytes of input text one token can cover (≥ 1). */
  readonly maxTokenBytes: number;
  /** True when whitespace may be dropped without a token: then only non-whitespace bytes are counted. */
  readonly whitespaceMayVanish: boolean;
}

type Json = Record<string, unknown>;

function asObject(v: unknown): Json | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : null;
}

function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** A `Replace` (normalizer or pre-tokenizer) of a fixed string by one at least as long in bytes and characters. */
function isGrowingReplace(o: Json): boolean {
  const pattern = asObject(o.pattern)?.String;
  const content = typeof o.content === 'string' ? o.content : '';
  return typeof pattern === 'string' && utf8Bytes(content) >= utf8Bytes(pattern) && codePoints(content) >= codePoints(pattern);
}

/** Normalizers that never drop or shorten text: none, Prepend, growing Replace, and Sequences of these. */
function isNonShrinkingNormalizer(n: unknown): boolean {
  if (n === null || n === undefined) return true;
  const o = asObject(n);
  if (!o) return false;
  switch (o.type) {
    case 'Sequence':
      return Array.isArray(o.normalizers) && o.normalizers.every(isNonShrinkingNormalizer);
    case 'Prepend':
      return true;
    case 'Replace':
      return isGrowingReplace(o);
    default:
      return false;
  }
}

/** How a pre-tokenizer treats text: null when it may drop non-whitespace text. */
interface PreTokenizerEffect {
  readonly byteLevel: boolean;
  readonly dropsWhitespace: boolean;
}

function preTokenizerEffect(p: unknown): PreTokenizerEffect | null {
  if (p === null || p === undefined) return { byteLevel: false, dropsWhitespace: false };
  const o = asObject(p);
  if (!o) return null;
  switch (o.type) {
    case 'Sequence': {
      if (!Array.isArray(o.pretokenizers)) return null;
      let byteLevel = false;
      let dropsWhitespace = false;
      for (const child of o.pretokenizers) {
        const e = preTokenizerEffect(child);
        if (e === null) return null;
        byteLevel ||= e.byteLevel;
        dropsWhitespace ||= e.dropsWhitespace;
      }
      return { byteLevel, dropsWhitespace };
    }
    case 'ByteLevel':
      return { byteLevel: true, dropsWhitespace: false };
    case 'Metaspace':
    case 'Punctuation':
    case 'Digits':
      return { byteLevel: false, dropsWhitespace: false };
    case 'Whitespace':
    case 'WhitespaceSplit':
    case 'BertPreTokenizer':
      return { byteLevel: false, dropsWhitespace: true };
    case 'Split': {
      // the library keeps only the matches when `invert` is true or absent, and drops the delimiters when `removed`
      const pattern = asObject(o.pattern);
      const hasPattern = pattern !== null && (typeof pattern.Regex === 'string' || typeof pattern.String === 'string');
      const removes = String(o.behavior ?? '').toLowerCase() === 'removed';
      return o.invert === false && !removes && hasPattern ? { byteLevel: false, dropsWhitespace: false } : null;
    }
    case 'Replace':
      return isGrowingReplace(o) ? { byteLevel: false, dropsWhitespace: false } : null;
    default:
      return null;
  }
}

function byteFallbackTokens(): string[] {
  return Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
}

/**
 * The most input bytes one token of this tokenizer can stand for, when such a bound provably holds.
 *
 * Supported: BPE models (byte-level or not, byte fallback, unk token) behind normalizers that never shrink text
 * and pre-tokenizers that never drop it. A token covers: for a byte-level model, one input byte per character of
 * its vocabulary string; otherwise at most its string's UTF-8 bytes (suffixes and `<0xNN>` spellings only make
 * that larger); an added token, its content (its normalized content when `normalized`); an unk token, one character
 * (plus the end-of-word suffix). O(vocabulary size), ~0.1 s for DeepSeek-V3's 128K entries.
 * @param tokenizerJson parsed tokenizer.json
 * @param tokenizerConfig parsed tokenizer_config.json (`remove_space` / `do_lowercase_and_remove_accent` shrink text)
 * @param normalize the tokenizer's normalizer (applied to `normalized` added tokens); identity when none
 * @returns the bound, or null when none holds (another model type, a normalizer that may shrink text, a
 *   pre-tokenizer that may drop text, characters the model may drop without a token)
 */
export function tokenBoundOf(tokenizerJson: unknown, tokenizerConfig: Readonly<Record<string, unknown>>, normalize: (s: string) => string = (s) => s): TokenBound | null {
  const json = asObject(tokenizerJson);
  const model = asObject(json?.model);
  const vocab = asObject(model?.vocab);
  if (!json || !model || model.type !== 'BPE' || !vocab) return null;
  // with a continuing-subword prefix the library's merge results need not be vocabulary entries (step 1)
  if (typeof model.continuing_subword_prefix === 'string' && model.continuing_subword_prefix !== '') return null;
  if (tokenizerConfig.remove_space === true || tokenizerConfig.do_lowercase_and_remove_accent === true) return null;
  if (!isNonShrinkingNormalizer(json.normalizer)) return null;
  const pre = preTokenizerEffect(json.pre_tokenizer);
  if (pre === null) return null;
  const measure = pre.byteLevel ? codePoints : utf8Bytes;
  let maxTokenBytes = 1;
  for (const tok of Object.keys(vocab)) maxTokenBytes = Math.max(maxTokenBytes, measure(tok));

  // 1. every piece the model can produce must become at least one token (the library drops it otherwise). Merge
  //    results are vocabulary entries (Hugging Face refuses a tokenizer.json whose merges leave the vocabulary), so
  //    the only pieces that can miss are single characters (+ end-of-word suffix): byte-level alphabets cover them
  //    all, else byte fallback or the unk token must.
  const unk = typeof model.unk_token === 'string' ? model.unk_token : null;
  const suffix = typeof model.end_of_word_suffix === 'string' ? model.end_of_word_suffix : '';
  const inVocab = (t: string) => Object.prototype.hasOwnProperty.call(vocab, t);
  const fallbackComplete = model.byte_fallback === true && byteFallbackTokens().every(inVocab);
  const alphabetInVocab = pre.byteLevel && suffix === '' && [...byteLevelDecodeTable().keys()].every((cp) => inVocab(String.fromCodePoint(cp)));
  if (unk === null && !fallbackComplete && !alphabetInVocab) return null;
  // 2. an unk token stands for one unknown character (+ suffix)
  if (unk !== null) maxTokenBytes = Math.max(maxTokenBytes, (pre.byteLevel ? 1 : 4) + utf8Bytes(suffix));
  // 3. added tokens, matched as written (or after normalization)
  let whitespaceMayVanish = pre.dropsWhitespace;
  const added = Array.isArray(json.added_tokens) ? json.added_tokens : [];
  for (const a of added) {
    const t = asObject(a);
    if (!t || typeof t.content !== 'string') continue;
    maxTokenBytes = Math.max(maxTokenBytes, utf8Bytes(t.content));
    if (t.normalized === true) maxTokenBytes = Math.max(maxTokenBytes, utf8Bytes(normalize(t.content)));
    if (t.lstrip === true || t.rstrip === true) whitespaceMayVanish = true;
  }
  return { maxTokenBytes, whitespaceMayVanish };
}

/**
 * Lower bound on the number of tokens of `text` (special tokens not counted): ceil(countedBytes / maxTokenBytes).
 * O(text length), no tokenization.
 * @param bound from {@link tokenBoundOf}; null → 0 (no bound known)
 */
export function minTokenCountOf(bound: TokenBound | null, text: string): number {
  if (bound === null) return 0;
  const bytes = utf8Bytes(text) - (bound.whitespaceMayVanish ? whitespaceUtf8Bytes(text) : 0);
  return Math.ceil(bytes / bound.maxTokenBytes);
}

/**
 * UTF-8 bytes of the characters of `text` that the regex `\s` matches (ECMAScript WhiteSpace and LineTerminator, all
 * in the BMP), counted in one pass without copying the text (it may be a prompt of hundreds of MB).
 */
function whitespaceUtf8Bytes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) n += 1;
    else if (c < 0xa0) continue;
    else if (c === 0xa0) n += 2;
    else if (c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff) n += 3;
  }
  return n;
}

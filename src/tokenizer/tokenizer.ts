// Owns the Tokenizer interface and its Hugging Face implementation (tokenizer.json + tokenizer_config.json +
// generation_config.json of a model directory). Knows nothing of requests, chat templates or HTTP.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer as HfTokenizerCore } from '@huggingface/tokenizers';
import { ModelLoadError } from '../common/index.js';
import { byteLevelDecodeTable } from './byte_level.js';
import { minTokenCountOf, tokenBoundOf, type TokenBound } from './token_bound.js';

/** Options of {@link Tokenizer.encode}. */
export interface EncodeOptions {
  /**
   * Add the special tokens the tokenizer adds around a text (BOS when tokenizer_config says `add_bos_token`,
   * EOS when `add_eos_token`). Default true, as `tokenizer.encode` in transformers. Chat prompts rendered from a
   * template already contain BOS as text and are encoded with `false` (as `apply_chat_template` does).
   */
  addSpecialTokens?: boolean;
}

/** Options of {@link Tokenizer.decode}. */
export interface DecodeOptions {
  /** Drop added tokens marked `special: true` (SGLang's default for outputs). Default true. */
  skipSpecialTokens?: boolean;
}

/**
 * A text tokenizer. Ids are vocabulary indices (0 ≤ id < vocabSize). All methods are synchronous and pure
 * apart from caches; one instance may be shared by many requests (not across threads: load one per thread).
 */
export interface Tokenizer {
  /** Number of ids the tokenizer can produce (max id + 1, added tokens included). */
  readonly vocabSize: number;
  /** BOS id (tokenizer_config `bos_token`), or null when the tokenizer has none. */
  readonly bosTokenId: number | null;
  /** BOS text, e.g. `<｜begin▁of▁sentence｜>` or `]~!b[`; null when none. */
  readonly bosToken: string | null;
  /** Whether `encode(text)` prepends BOS (tokenizer_config `add_bos_token`, default false). */
  readonly addBosToken: boolean;
  /** Whether `encode(text)` appends EOS (tokenizer_config `add_eos_token`, default false). */
  readonly addEosToken: boolean;
  /** EOS text (tokenizer_config `eos_token`), or null. */
  readonly eosToken: string | null;
  /**
   * Ids that end generation: generation_config.json `eos_token_id` (int or list) when present, else the
   * tokenizer_config `eos_token`. Sorted ascending, no duplicates.
   */
  readonly eosTokenIds: readonly number[];
  /** PAD id (tokenizer_config `pad_token`), or null. */
  readonly padTokenId: number | null;
  /** The Jinja chat template of tokenizer_config.json or chat_template.jinja beside it; null if none. */
  readonly chatTemplate: string | null;
  /**
   * Text → ids.
   * @param text any string (added/special tokens in it are matched as single ids)
   * @returns ids [numTokens] as plain numbers
   */
  encode(text: string, options?: EncodeOptions): number[];
  /**
   * A lower bound on `encode(text, {addSpecialTokens: false}).length`, computed without tokenizing (O(text length)):
   * ceil(UTF-8 bytes / the most bytes one token can stand for). 0 when the tokenizer admits no such bound.
   * Lets a caller refuse a text that cannot fit a context before paying for its tokenization.
   */
  minTokenCount(text: string): number;
  /**
   * Ids → text (whole-sequence decode; for streaming use IncrementalDetokenizer).
   * @throws InvalidRequestError never; unknown ids decode to the empty string
   */
  decode(ids: readonly number[], options?: DecodeOptions): string;
  /** The vocabulary string of a token (byte-level form, e.g. `Ġhello`), or undefined for an unknown id. */
  idToToken(id: number): string | undefined;
  /** The id of a vocabulary string or added token, or undefined. */
  tokenToId(token: string): number | undefined;
  /** True for added tokens marked `special: true` (skipped by `skipSpecialTokens`). */
  isSpecialToken(id: number): boolean;
  /**
   * The UTF-8 bytes a token stands for (id → bytes table): byte-level tokens map back through the GPT-2 byte
   * alphabet, added tokens are their content. Concatenating these bytes and decoding UTF-8 equals `decode`.
   * @returns a shared view: do not modify. Empty for unknown ids.
   */
  tokenBytes(id: number): Uint8Array;
}

interface AddedTokenJson {
  id: number;
  content: string;
  special?: boolean;
}

interface TokenizerJson {
  added_tokens?: AddedTokenJson[];
  decoder?: { type?: string; decoders?: { type?: string }[] } | null;
  pre_tokenizer?: unknown;
  model?: { type?: string; vocab?: Record<string, number> | [string, number][]; byte_fallback?: boolean };
}

/** A token text as tokenizer_config.json stores it: a string or `{content: ...}` (AddedToken form). */
type ConfigToken = string | { content?: string } | null | undefined;

function tokenText(t: ConfigToken): string | null {
  if (t === null || t === undefined) return null;
  if (typeof t === 'string') return t;
  return typeof t.content === 'string' ? t.content : null;
}

const UTF8 = new TextEncoder();

/**
 * Tokenizer over `@huggingface/tokenizers` for a model directory, with BOS/EOS added as tokenizer_config says
 * (the JS library applies only tokenizer.json's post-processor, while transformers' Llama-style fast tokenizers
 * rebuild it from `add_bos_token`/`add_eos_token`) and our own id → bytes table for decoding.
 */
export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly bosToken: string | null;
  readonly addBosToken: boolean;
  readonly addEosToken: boolean;
  readonly eosToken: string | null;
  readonly eosTokenIds: readonly number[];
  readonly padTokenId: number | null;
  readonly chatTemplate: string | null;
  /**
   * The most UTF-8 bytes of input one token can stand for (token_bound.ts: longest vocabulary entry, added token or
   * unk piece, in input bytes), or null when this tokenizer's normalizer / pre-tokenizer may shrink or drop text.
   * Computed on first use (see {@link tokenBound}).
   */
  get maxTokenBytes(): number | null {
    return this.tokenBound?.maxTokenBytes ?? null;
  }
  /** tokenizer.json and tokenizer_config.json until the token bound is computed (the core keeps them anyway). */
  private tokenBoundInputs: { json: TokenizerJson; config: Record<string, unknown> } | null;
  /** The token bound once computed (null: none holds); undefined until first use. */
  private tokenBoundCache: TokenBound | null | undefined = undefined;
  private readonly core: HfTokenizerCore;
  private readonly special: Set<number>;
  private readonly bytesById: Uint8Array[];
  private readonly idByToken: Map<string, number>;
  private readonly tokenById: string[];

  /**
   * @param tokenizerJson parsed tokenizer.json
   * @param tokenizerConfig parsed tokenizer_config.json ({} if absent)
   * @param generationConfig parsed generation_config.json, or null if absent
   * @param chatTemplateFile contents of chat_template.jinja beside the tokenizer (used when tokenizer_config has none)
   * @throws ModelLoadError when tokenizer.json has no vocabulary or a BOS/EOS token is not in it
   */
  constructor(
    tokenizerJson: TokenizerJson,
    tokenizerConfig: Record<string, unknown>,
    generationConfig: Record<string, unknown> | null = null,
    chatTemplateFile: string | null = null,
  ) {
    this.core = new HfTokenizerCore(tokenizerJson, tokenizerConfig);
    // 1. vocabulary (model vocab + added tokens) as id → token string
    this.idByToken = new Map();
    const vocab = tokenizerJson.model?.vocab;
    if (!vocab) throw new ModelLoadError('tokenizer.json has no model.vocab', { file: 'tokenizer.json' });
    const entries: [string, number][] = Array.isArray(vocab) ? vocab.map(([t], i) => [t, i]) : Object.entries(vocab);
    for (const [tok, id] of entries) this.idByToken.set(tok, id);
    this.special = new Set();
    const added = tokenizerJson.added_tokens ?? [];
    const addedIds = new Set<number>();
    for (const a of added) {
      this.idByToken.set(a.content, a.id);
      addedIds.add(a.id);
      if (a.special) this.special.add(a.id);
    }
    let maxId = -1;
    for (const id of this.idByToken.values()) if (id > maxId) maxId = id;
    this.vocabSize = maxId + 1;
    this.tokenById = new Array<string>(this.vocabSize);
    for (const [tok, id] of this.idByToken) this.tokenById[id] = tok;

    // 2. id → bytes table
    const isByteLevel = JSON.stringify(tokenizerJson.decoder ?? {}).includes('"ByteLevel"');
    const byteFallback = tokenizerJson.model?.byte_fallback === true;
    const byteTable = byteLevelDecodeTable();
    this.bytesById = new Array<Uint8Array>(this.vocabSize);
    const empty = new Uint8Array(0);
    for (let id = 0; id < this.vocabSize; id++) {
      const tok = this.tokenById[id];
      if (tok === undefined) { this.bytesById[id] = empty; continue; }
      if (addedIds.has(id)) { this.bytesById[id] = UTF8.encode(tok); continue; }
      if (isByteLevel) {
        const out: number[] = [];
        let ok = true;
        for (const ch of tok) {
          const b = byteTable.get(ch.codePointAt(0) as number);
          if (b === undefined) { ok = false; break; }
          out.push(b);
        }
        this.bytesById[id] = ok ? Uint8Array.from(out) : UTF8.encode(tok);
      } else if (byteFallback && /^<0x[0-9A-Fa-f]{2}>$/.test(tok)) {
        this.bytesById[id] = Uint8Array.of(parseInt(tok.slice(3, 5), 16));
      } else {
        // Metaspace / SentencePiece style: ▁ stands for a space.
        this.bytesById[id] = UTF8.encode(tok.replace(/\u2581/g, ' '));
      }
    }

    // 3. BOS / EOS / PAD from tokenizer_config, EOS ids from generation_config
    this.bosToken = tokenText(tokenizerConfig.bos_token as ConfigToken);
    this.eosToken = tokenText(tokenizerConfig.eos_token as ConfigToken);
    this.bosTokenId = this.lookupConfigToken(this.bosToken, 'bos_token');
    const eosId = this.lookupConfigToken(this.eosToken, 'eos_token');
    this.padTokenId = this.lookupConfigToken(tokenText(tokenizerConfig.pad_token as ConfigToken), 'pad_token');
    this.addBosToken = tokenizerConfig.add_bos_token === true && this.bosTokenId !== null;
    this.addEosToken = tokenizerConfig.add_eos_token === true && eosId !== null;
    const genEos = generationConfig?.eos_token_id;
    const eosIds = new Set<number>();
    if (typeof genEos === 'number') eosIds.add(genEos);
    else if (Array.isArray(genEos)) for (const e of genEos) if (typeof e === 'number') eosIds.add(e);
    if (eosIds.size === 0 && eosId !== null) eosIds.add(eosId);
    this.eosTokenIds = [...eosIds].sort((a, b) => a - b);
    const tpl = tokenizerConfig.chat_template;
    this.chatTemplate = typeof tpl === 'string' ? tpl : chatTemplateFile;

    // 4. token-count lower bound (refusing over-long prompts before tokenizing them): computed on first use
    this.tokenBoundInputs = { json: tokenizerJson, config: tokenizerConfig };
  }

  /**
   * The token-count lower bound (token_bound.ts), computed on the first call and kept: ~0.1 s over a 128K
   * vocabulary, which only the thread that pre-checks prompts (the engine's TokenizerManager, /v1/tokenize) pays;
   * the tokenizer worker and the engine core's detokenizer never do. Reads tokenizer.json as parsed at
   * construction (it must not be changed since; the library's core holds the same object).
   */
  private get tokenBound(): TokenBound | null {
    if (this.tokenBoundCache === undefined) {
      const { json, config } = this.tokenBoundInputs!;
      const normalizer = this.core.normalizer;
      this.tokenBoundCache = tokenBoundOf(json, config, (s) => (normalizer ? normalizer.normalize(s) : s));
      this.tokenBoundInputs = null;
    }
    return this.tokenBoundCache;
  }

  private lookupConfigToken(text: string | null, field: string): number | null {
    if (text === null) return null;
    const id = this.idByToken.get(text);
    if (id === undefined) {
      throw new ModelLoadError(`tokenizer_config.json ${field} '${text}' is not in the vocabulary of tokenizer.json`, {
        file: 'tokenizer_config.json',
      });
    }
    return id;
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const addSpecial = options.addSpecialTokens ?? true;
    const ids = this.core.encode(text, { add_special_tokens: addSpecial }).ids.slice();
    if (addSpecial) {
      if (this.addBosToken && ids[0] !== this.bosTokenId) ids.unshift(this.bosTokenId as number);
      const eos = this.eosToken === null ? undefined : this.idByToken.get(this.eosToken);
      if (this.addEosToken && eos !== undefined && ids[ids.length - 1] !== eos) ids.push(eos);
    }
    return ids;
  }

  minTokenCount(text: string): number {
    return minTokenCountOf(this.tokenBound, text);
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    const skip = options.skipSpecialTokens ?? true;
    const parts: Uint8Array[] = [];
    let total = 0;
    for (const id of ids) {
      if (skip && this.special.has(id)) continue;
      const b = this.tokenBytes(id);
      parts.push(b);
      total += b.length;
    }
    const buf = new Uint8Array(total);
    let off = 0;
    for (const p of parts) { buf.set(p, off); off += p.length; }
    return new TextDecoder('utf-8').decode(buf);
  }

  idToToken(id: number): string | undefined {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize ? this.tokenById[id] : undefined;
  }

  tokenToId(token: string): number | undefined {
    return this.idByToken.get(token);
  }

  isSpecialToken(id: number): boolean {
    return this.special.has(id);
  }

  tokenBytes(id: number): Uint8Array {
    return (Number.isInteger(id) && id >= 0 && id < this.vocabSize ? this.bytesById[id] : undefined) ?? new Uint8Array(0);
  }
}

function readJson(path: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new ModelLoadError(`cannot read ${path}: ${(err as Error).message}`, { file: path }, { cause: err });
  }
}

/**
 * Loads the tokenizer of a model directory: tokenizer.json (required), tokenizer_config.json,
 * generation_config.json (for eos ids) and chat_template.jinja (optional).
 * @param dir model (or `--tokenizer-path`) directory
 * @throws ModelLoadError naming the missing or unreadable file
 */
export function loadTokenizer(dir: string): HfTokenizer {
  const tokPath = join(dir, 'tokenizer.json');
  if (!existsSync(tokPath)) {
    throw new ModelLoadError(`no tokenizer.json in ${dir} (tsglang loads tokenizers from the model directory only)`, {
      file: tokPath,
    });
  }
  const tokenizerJson = readJson(tokPath) as TokenizerJson;
  const cfgPath = join(dir, 'tokenizer_config.json');
  const tokenizerConfig = existsSync(cfgPath) ? readJson(cfgPath) : {};
  const genPath = join(dir, 'generation_config.json');
  const generationConfig = existsSync(genPath) ? readJson(genPath) : null;
  const tplPath = join(dir, 'chat_template.jinja');
  const chatTemplate = existsSync(tplPath) ? readFileSync(tplPath, 'utf8') : null;
  return new HfTokenizer(tokenizerJson, tokenizerConfig, generationConfig, chatTemplate);
}

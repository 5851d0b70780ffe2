// GrammarEngine: xgrammar's compiler and matchers for one model (runs inside the grammar worker thread). It follows
// SGLang's xgrammar backend (python/sglang/srt/constrained/xgrammar_backend.py): one TokenizerInfo per model, grammars
// compiled by key (json / regex / ebnf / structural_tag), one GrammarMatcher per request with the model's EOS ids as
// stop tokens. Three defects of the published WASM build are worked around (shared/design/structured-output.md):
//  - an invalid grammar aborts the C++ side and, repeated, corrupts the instance: every new key is first compiled in a
//    throw-away validator instance (tiny vocab), which is rebuilt after each error; the main instance only ever
//    compiles grammars the validator accepted (and is rebuilt, losing its matchers, if it throws anyway);
//  - the package's compile cache is unbounded and hangs on a repeated invalid schema: it is off, and a bounded LRU of
//    CompiledGrammars (disposed on eviction) plus a bounded LRU of error messages are kept here;
//  - WASM memory is manual: matchers and grammars are dispose()d when closed or evicted.
import { loadXGrammar, cxxExceptionMessage, type XGrammarModule } from './xgrammar_loader.js';
import type { GrammarVocab } from './vocab.js';

/** What to compile: SGLang's grammar key (`json` covers json_schema and json_object). */
export interface GrammarKey {
  readonly kind: 'json' | 'regex' | 'ebnf' | 'structural_tag';
  readonly source: string;
}

type Compiled = Awaited<ReturnType<XGrammarModule['GrammarCompiler']['prototype']['compileJSONSchema']>>;
type Matcher = Awaited<ReturnType<XGrammarModule['GrammarMatcher']['createGrammarMatcher']>>;
type Compiler = Awaited<ReturnType<XGrammarModule['GrammarCompiler']['createGrammarCompiler']>>;

/** Sizes of the engine's caches. */
export interface GrammarEngineLimits {
  /** Compiled grammars kept (LRU; ~235 KB of WASM heap each for a schema of the weather-tool size). */
  readonly maxCompiled: number;
  /** Error messages of invalid keys kept (LRU), so a repeated invalid grammar is refused without recompiling. */
  readonly maxErrors: number;
  /** JSON-schema grammars allow any whitespace (SGLang's default; false = compact `, ` / `: ` separators). */
  readonly anyWhitespace?: boolean;
}

/** The canonical string of a key (cache key). */
export function grammarKeyString(k: GrammarKey): string {
  return `${k.kind}\u0000${k.source}`;
}

interface Instance {
  x: XGrammarModule;
  compiler: Compiler;
  /** The last `[FATAL]` line this instance logged (the reason of its last abort). */
  lastFatal: string;
}

async function makeInstance(vocab: GrammarVocab | null, vocabSize: number, stopIds: readonly number[]): Promise<Instance> {
  const inst = { lastFatal: '' } as Instance;
  inst.x = loadXGrammar((_stream, line) => {
    if (line.startsWith('[FATAL]')) inst.lastFatal = line;
  });
  const ti = vocab
    ? await inst.x.TokenizerInfo.createTokenizerInfo(vocab.encodedVocab, vocab.vocabType, false, vocabSize, [...stopIds])
    : await inst.x.TokenizerInfo.createTokenizerInfo(['a', '</s>'], 'raw', false, undefined, [1]);
  inst.compiler = await inst.x.GrammarCompiler.createGrammarCompiler(ti, false);
  return inst;
}

/** The compiler's reason for an exception: the `[FATAL]` line (without its source position), or the C++ exception text. */
function reasonOf(inst: Instance, e: unknown): string {
  const fatal = inst.lastFatal.replace(/^\[FATAL\]\s*\S+:\d+:\s*/, '').trim();
  if (fatal) return fatal;
  const cxx = cxxExceptionMessage(inst.x, e);
  if (cxx) return cxx;
  return e instanceof Error ? e.message : String(e);
}

async function compileIn(inst: Instance, k: GrammarKey, anyWhitespace: boolean): Promise<Compiled> {
  const c = inst.compiler;
  switch (k.kind) {
    case 'json':
      return c.compileGrammar(await jsonSchemaGrammar(inst, k.source, anyWhitespace));
    case 'regex':
      return c.compileStructuralTag({ type: 'regex', pattern: k.source });
    case 'ebnf':
      return c.compileGrammar(k.source);
    case 'structural_tag': {
      let obj: unknown;
      try {
        obj = JSON.parse(k.source);
      } catch (e) {
        throw new Error(`Invalid structural tag: ${(e as Error).message}`);
      }
      const o = obj as { structures?: { begin: string; schema: unknown; end: string }[]; triggers?: string[]; at_least_one?: boolean; format?: unknown };
      let tag: Record<string, unknown>;
      if (o && typeof o === 'object' && Array.isArray(o.structures)) {
        // SGLang's legacy body {"type": "structural_tag", "structures": [{begin, schema, end}], "triggers": [...]}, as
        // xgrammar's StructuralTag.from_legacy_structural_tag reads it: triggered tags with JSON-schema contents.
        if (!Array.isArray(o.triggers)) throw new Error('Invalid structural tag: "triggers" must be a list of strings');
        const tags = o.structures.map((st) => ({ type: 'tag', begin: String(st.begin), content: { type: 'json_schema', json_schema: st.schema ?? {} }, end: String(st.end) }));
        tag = { type: 'structural_tag', format: { type: 'triggered_tags', triggers: o.triggers.map(String), tags, at_least_one: o.at_least_one === true, stop_after_first: false } };
      } else if (o && typeof o === 'object' && !Array.isArray(o)) tag = o as Record<string, unknown>;
      else throw new Error('Invalid structural tag: expected a JSON object');
      // JSON-schema contents become the grammar of their schema (jsonSchemaGrammar): the string-length fix, and
      // --constrained-json-disable-any-whitespace holds inside structural tags too (their json_schema format has no
      // whitespace option in this build).
      if (tag.format !== undefined) tag = { ...tag, format: await compactJsonFormats(inst, tag.format, anyWhitespace) };
      return c.compileStructuralTag(JSON.stringify(tag));
    }
  }
}

/**
 * The EBNF of a JSON schema (xgrammar's own converter), with one defect of this build fixed: the rule it writes for a
 * string with minLength / maxLength, `[^"\\\r\n]{m,n}`, lets control characters U+0000–U+001F through (invalid
 * JSON; found by the ajv validation of sampled outputs); they are excluded as in its unbounded string rule.
 * @param anyWhitespace false: compact separators `, ` / `: `, no indent
 */
async function jsonSchemaGrammar(inst: Instance, schema: string, anyWhitespace: boolean): Promise<string> {
  const ebnf = anyWhitespace ? await inst.x.Testings._jsonSchemaToEBNF(schema, true) : await inst.x.Testings._jsonSchemaToEBNF(schema, false, -1);
  return ebnf.replace(/\[\^"\\\\\\r\\n\]\{/g, '[^\\0-\\x1f"\\\\\\r\\n]{');
}

/** Replaces every `json_schema` format in a structural-tag format tree by the grammar of its schema (jsonSchemaGrammar). */
async function compactJsonFormats(inst: Instance, f: unknown, anyWhitespace: boolean): Promise<unknown> {
  if (Array.isArray(f)) return Promise.all(f.map((x) => compactJsonFormats(inst, x, anyWhitespace)));
  if (!f || typeof f !== 'object') return f;
  const o = f as Record<string, unknown>;
  if (o.type === 'json_schema' && 'json_schema' in o) {
    return { type: 'grammar', grammar: await jsonSchemaGrammar(inst, JSON.stringify(o.json_schema), anyWhitespace) };
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) out[k] = k === 'json_schema' ? v : await compactJsonFormats(inst, v, anyWhitespace);
  return out;
}

/** Compiler + matchers of one model. Not thread-safe: one caller (the grammar worker's loop). */
export class GrammarEngine {
  private main: Instance;
  private validator: Instance;
  private readonly compiled = new Map<string, Compiled>();
  private readonly errors = new Map<string, string>();
  private readonly matchers = new Map<string, { m: Matcher; accepted: number }>();
  /** Requests whose matchers were lost when the main instance had to be rebuilt. */
  readonly lost = new Set<string>();
  /** Compiles done in the main instance (statistics). */
  numCompiles = 0;
  numMainRebuilds = 0;

  private constructor(
    main: Instance,
    validator: Instance,
    private readonly vocab: GrammarVocab,
    private readonly vocabSize: number,
    private readonly stopIds: readonly number[],
    private readonly limits: GrammarEngineLimits,
  ) {
    this.main = main;
    this.validator = validator;
  }

  /**
   * Builds the TokenizerInfo (250–500 ms for a 129K vocab) and compiles the builtin JSON grammar once so that V8
   * tiers the WASM up (the first compile in a process is 2–5× slower).
   * @param vocabSize the logits row width (config vocab_size; ids ≥ the vocab list are padding, never allowed)
   * @param stopIds the model's EOS ids (allowed only where the grammar may end)
   */
  static async create(vocab: GrammarVocab, vocabSize: number, stopIds: readonly number[], limits: GrammarEngineLimits): Promise<GrammarEngine> {
    const main = await makeInstance(vocab, vocabSize, stopIds);
    const validator = await makeInstance(null, 0, []);
    (await main.compiler.compileBuiltinJSONGrammar()).dispose();
    return new GrammarEngine(main, validator, vocab, vocabSize, stopIds, limits);
  }

  /** True when the key is compiled (cache hit) or known to be invalid. */
  isKnown(k: GrammarKey): boolean {
    const s = grammarKeyString(k);
    return this.compiled.has(s) || this.errors.has(s);
  }

  /**
   * Compiles a key unless cached. The validator sees it first; only a grammar it accepts reaches the main instance.
   * @returns null when compiled (or cached), else the compiler's reason (e.g. `Unsupported type "foo"`)
   */
  async compile(k: GrammarKey): Promise<string | null> {
    const s = grammarKeyString(k);
    const hit = this.compiled.get(s);
    if (hit) {
      this.compiled.delete(s);
      this.compiled.set(s, hit); // LRU touch
      return null;
    }
    const known = this.errors.get(s);
    if (known !== undefined) return known;
    // 1. throw-away validator
    this.validator.lastFatal = '';
    try {
      (await compileIn(this.validator, k, this.limits.anyWhitespace ?? true)).dispose();
    } catch (e) {
      const reason = reasonOf(this.validator, e);
      this.validator = await makeInstance(null, 0, []); // its shadow stack may be corrupt: replace it
      this.remember(this.errors, s, reason, this.limits.maxErrors, () => {});
      return reason;
    }
    // 2. the main instance
    this.main.lastFatal = '';
    let cg: Compiled;
    try {
      cg = await compileIn(this.main, k, this.limits.anyWhitespace ?? true);
      this.numCompiles++;
    } catch (e) {
      const reason = reasonOf(this.main, e);
      await this.rebuildMain();
      this.remember(this.errors, s, reason, this.limits.maxErrors, () => {});
      return reason;
    }
    this.remember(this.compiled, s, cg, this.limits.maxCompiled, (old) => old.dispose());
    return null;
  }

  private remember<V>(map: Map<string, V>, key: string, v: V, limit: number, evict: (v: V) => void): void {
    map.set(key, v);
    while (map.size > Math.max(1, limit)) {
      const [oldKey, old] = map.entries().next().value as [string, V];
      map.delete(oldKey);
      evict(old);
    }
  }

  private async rebuildMain(): Promise<void> {
    for (const [rid, e] of this.matchers) {
      this.lost.add(rid);
      try { e.m.dispose(); } catch { /* the instance is being replaced */ }
    }
    this.matchers.clear();
    this.compiled.clear();
    this.numMainRebuilds++;
    this.main = await makeInstance(this.vocab, this.vocabSize, this.stopIds);
  }

  /**
   * A matcher for request `rid` over a compiled key, and its first mask.
   * @returns the mask [ceil(vocabSize / 32)] i32, bit i of word i>>5 = token i allowed
   * @throws Error when the key is not compiled
   */
  async open(rid: string, k: GrammarKey): Promise<Int32Array> {
    const cg = this.compiled.get(grammarKeyString(k));
    if (!cg) throw new Error(`grammar not compiled: ${k.kind}`);
    this.close(rid);
    const m = await this.main.x.GrammarMatcher.createGrammarMatcher(cg, [...this.stopIds], false);
    this.matchers.set(rid, { m, accepted: 0 });
    return m.getNextTokenBitmask();
  }

  /**
   * Accepts one sampled token.
   * @returns 'terminated' when the grammar has ended (a stop token was accepted), 'ok', or 'rejected' (the token was
   *   not allowed: the state is unchanged), or 'unknown' for a request without a matcher
   */
  accept(rid: string, token: number): 'ok' | 'terminated' | 'rejected' | 'unknown' {
    const e = this.matchers.get(rid);
    if (!e) return 'unknown';
    if (e.m.isTerminated()) return 'rejected';
    if (!e.m.acceptToken(token)) return 'rejected';
    e.accepted++;
    return e.m.isTerminated() ? 'terminated' : 'ok';
  }

  /** The next-token mask of `rid` (null when it has none or has terminated). */
  async mask(rid: string): Promise<Int32Array | null> {
    const e = this.matchers.get(rid);
    if (!e || e.m.isTerminated()) return null;
    return e.m.getNextTokenBitmask();
  }

  /** Rolls `rid` back by n accepted tokens (never past its history). @returns false when n exceeds the history */
  rollback(rid: string, n: number): boolean {
    const e = this.matchers.get(rid);
    if (!e || n > e.accepted || n < 0) return false;
    if (n > 0) e.m.rollBack(n);
    e.accepted -= n;
    return true;
  }

  /** Disposes the matcher of `rid` (no-op when none). */
  close(rid: string): void {
    const e = this.matchers.get(rid);
    if (!e) return;
    this.matchers.delete(rid);
    e.m.dispose();
  }

  /** Live counts and the main instance's WASM heap size, bytes. */
  stats(): { compiled: number; errors: number; matchers: number; heapBytes: number; compiles: number; mainRebuilds: number } {
    return { compiled: this.compiled.size, errors: this.errors.size, matchers: this.matchers.size, heapBytes: this.main.x.__binding().HEAP8.length, compiles: this.numCompiles, mainRebuilds: this.numMainRebuilds };
  }
}

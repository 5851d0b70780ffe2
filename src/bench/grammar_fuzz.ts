// Invalid and hostile grammars for the structured-output fuzz (test/structured/robustness.test.ts runs a subset,
// `npm run bench:grammar -- fuzz` the full 1,000): malformed JSON schemas, regexes, EBNFs and structural tags that
// must be refused with a 400, and valid-but-hostile ones (deep nesting, huge enums, catastrophic-backtracking
// patterns, long alternations) that must compile or be refused without hurting the engine. Deterministic per seed.

/** One fuzz case: the /generate sampling-params field and its value. */
export interface FuzzCase {
  readonly field: 'json_schema' | 'regex' | 'ebnf' | 'structural_tag';
  readonly value: string;
  /** true: must be refused (400); false: valid, must run; null: either, but never a 5xx, a crash or a hang. */
  readonly invalid: boolean | null;
  readonly label: string;
}

/** mulberry32: a small seeded PRNG (uniform in [0, 1)). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WEATHER = JSON.stringify({ type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['location'] });

function nest(depth: number, leaf: unknown): unknown {
  let s: unknown = leaf;
  for (let i = 0; i < depth; i++) s = { type: 'array', items: s };
  return s;
}

/** The generators, each producing one case from a uniform draw source. */
const GENERATORS: ((r: () => number, i: number) => FuzzCase)[] = [
  (_r, i) => ({ field: 'json_schema', value: JSON.stringify({ type: `foo${i}` }), invalid: true, label: 'unknown type' }),
  (r) => ({ field: 'json_schema', value: WEATHER.slice(0, 1 + Math.floor(r() * (WEATHER.length - 2))), invalid: true, label: 'truncated schema JSON' }),
  (_r, i) => ({ field: 'json_schema', value: JSON.stringify({ $ref: `#/$defs/missing${i}` }), invalid: true, label: 'dangling $ref' }),
  (r) => { const lo = 10 + Math.floor(r() * 100); return { field: 'json_schema', value: JSON.stringify({ type: 'integer', minimum: lo, maximum: lo - 1 }), invalid: true, label: 'minimum > maximum' }; },
  (r) => ({ field: 'json_schema', value: JSON.stringify(nest(2 + Math.floor(r() * 40), { type: 'nope' })), invalid: true, label: 'deep nesting, invalid leaf' }),
  (r) => ({ field: 'json_schema', value: JSON.stringify(nest(100 + Math.floor(r() * 400), { type: 'integer' })), invalid: null, label: 'very deep nesting' }),
  (r) => ({ field: 'json_schema', value: JSON.stringify({ type: 'string', enum: Array.from({ length: 500 + Math.floor(r() * 2000) }, (_, k) => `value-${k}`) }), invalid: false, label: 'huge enum' }),
  (r) => ({ field: 'regex', value: '(abc'.repeat(1 + Math.floor(r() * 3)), invalid: true, label: 'unclosed group' }),
  () => ({ field: 'regex', value: 'a(?=b)', invalid: true, label: 'lookahead' }),
  () => ({ field: 'regex', value: '(a)\\1', invalid: true, label: 'backreference' }),
  () => ({ field: 'regex', value: '[z-a]', invalid: true, label: 'reversed class' }),
  () => ({ field: 'regex', value: '', invalid: true, label: 'empty pattern' }),
  (r) => ({ field: 'regex', value: `${'(a+)+'.repeat(1 + Math.floor(r() * 4))}b`, invalid: false, label: 'catastrophic backtracking pattern' }),
  (r) => ({ field: 'regex', value: Array.from({ length: 100 + Math.floor(r() * 400) }, (_, k) => `w${k}`).join('|'), invalid: false, label: 'long alternation' }),
  (r) => ({ field: 'ebnf', value: `root ::= "a${'b'.repeat(Math.floor(r() * 5))}`, invalid: true, label: 'unclosed string literal' }),
  (_r, i) => ({ field: 'ebnf', value: `root ::= undefined_rule_${i}`, invalid: true, label: 'undefined rule' }),
  () => ({ field: 'ebnf', value: 'start ::= "a"', invalid: true, label: 'no root rule' }),
  (r) => { const n = 20 + Math.floor(r() * 200); return { field: 'ebnf', value: ['root ::= r0', ...Array.from({ length: n }, (_, k) => `r${k} ::= "x" ${k + 1 < n ? `r${k + 1}` : '"y"'} | "z"`)].join('\n'), invalid: false, label: 'long rule chain' }; },
  (r) => ({ field: 'structural_tag', value: '{"type":"structural_tag","format":'.slice(0, 5 + Math.floor(r() * 20)), invalid: true, label: 'structural tag not JSON' }),
  (_r, i) => ({ field: 'structural_tag', value: JSON.stringify({ type: 'structural_tag', format: { type: `nope${i}` } }), invalid: true, label: 'unknown format type' }),
  () => ({ field: 'structural_tag', value: JSON.stringify({ type: 'structural_tag', structures: [{ begin: '<a>', schema: { type: 'foo' }, end: '</a>' }], triggers: ['<a>'] }), invalid: true, label: 'legacy tag, invalid schema' }),
];

/**
 * `n` fuzz cases, cycling through every generator (so any n ≥ 21 covers them all), deterministic in `seed`.
 */
export function hostileGrammars(seed: number, n: number): FuzzCase[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => GENERATORS[i % GENERATORS.length](r, i));
}

// Structured output with the rest of the engine, on the embedded default model: a batch of 16 mixed constrained and
// free requests (free outputs identical to running them alone, constrained ones valid), abort while compiling, KV
// retraction of constrained requests, a representative subset of the invalid / hostile grammar fuzz (each a 400,
// the engine healthy, the next valid request still correct; the full 1,000 run is `npm run bench:grammar -- fuzz`),
// grammar memory flat over many requests, --grammar-backend none and the refused backend names.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseServerArgs, validateServerArgs } from '../../src/config/index.js';
import { CASES, EMAIL_REGEX } from './so_cases.js';
import { embeddedModelDir, fullMatch, post, serve, type Served } from './so_helpers.js';
import { hostileGrammars } from '../../src/bench/grammar_fuzz.js';

let s: Served;

before(async () => {
  // a small KV pool and a low conservativeness (admission reserves few tokens): decodes run out and retract
  s = await serve(embeddedModelDir(), ['--constrained-json-disable-any-whitespace', '--max-total-tokens', '600', '--schedule-conservativeness', '0.2']);
});
after(async () => {
  await s?.close();
});

const gen = (text: string, sp: Record<string, unknown>, extra: Record<string, unknown> = {}) => post(s.base, '/generate', { text, sampling_params: sp, ...extra });

test('batch of 16 mixed constrained and free requests: free outputs identical to running alone, constrained valid', async () => {
  const free = (i: number) => gen(`Free ${i}:`, { temperature: i % 2 ? 0 : 1, sampling_seed: 40 + i, max_new_tokens: 24, ignore_eos: true });
  const cons = (i: number) => gen(`Constrained ${i}:`, { temperature: 1, sampling_seed: 60 + i, max_new_tokens: 120, ...CASES[i % CASES.length].params });
  const alone = [];
  for (let i = 0; i < 8; i++) alone.push((await free(i)).json.text);
  const mixed = await Promise.all(Array.from({ length: 16 }, (_, k) => (k % 2 === 0 ? free(k / 2) : cons((k - 1) / 2))));
  for (let i = 0; i < 8; i++) assert.equal(mixed[2 * i].json.text, alone[i], `free request ${i} changed in the mixed batch`);
  for (let i = 0; i < 8; i++) assert.equal(CASES[i % CASES.length].validate(mixed[2 * i + 1].json.text), null);
});

test('retraction (tiny KV pool) keeps the matcher state: retracted constrained requests still validate', async () => {
  const LONG = '([a-z] ){40}[a-z]';
  const outs = await Promise.all(Array.from({ length: 24 }, (_, i) => gen(`Retract ${i}`, { temperature: 1, sampling_seed: 500 + i, max_new_tokens: 120, regex: LONG })));
  const retracted = outs.reduce((a, o) => a + o.json.meta_info.total_retractions, 0);
  for (const o of outs) assert.ok(fullMatch(LONG, o.json.text), o.json.text);
  assert.ok(retracted > 0, 'the pool is small enough to retract');
});

test('abort: a request aborted while its grammar compiles or decodes ends with finish_reason abort', async () => {
  const rid = 'abort-me';
  const p = gen('Abort:', { temperature: 1, max_new_tokens: 100, json_schema: JSON.stringify({ type: 'object', properties: { k: { type: 'string', enum: Array.from({ length: 300 }, (_, i) => `v${i}`) } } }) }, { rid });
  await post(s.base, '/abort_request', { rid });
  const r = await p;
  assert.equal(r.json.meta_info.finish_reason.type, 'abort', r.text);
});

test('fuzz subset: invalid and hostile grammars → 400 each (or valid output when they are valid), engine healthy after', async () => {
  const cases = hostileGrammars(7, 40);
  for (const c of cases) {
    const r = await gen('Fuzz:', { temperature: 1, sampling_seed: 1, max_new_tokens: 16, [c.field]: c.value });
    if (c.invalid) {
      assert.equal(r.status, 400, `${c.label}: ${r.text.slice(0, 300)}`);
      assert.match(r.json.error.message, /^Failed to compile (json|regex|ebnf|structural_tag) grammar: ./, c.label);
    } else if (c.invalid === false) assert.equal(r.status, 200, `${c.label}: ${r.text.slice(0, 300)}`);
    else assert.ok(r.status === 200 || r.status === 400, `${c.label}: ${r.status} ${r.text.slice(0, 300)}`);
  }
  const ok = await gen('After:', { temperature: 1, sampling_seed: 2, max_new_tokens: 30, regex: EMAIL_REGEX });
  assert.ok(fullMatch(EMAIL_REGEX, ok.json.text), ok.json.text);
});

test('grammar memory stays flat: matchers freed, compiled-grammar cache bounded, WASM heap constant over 300 requests', async () => {
  const grammar = s.engine.inProcessCore!.grammar!;
  const run = (i: number) => gen('Mem:', { temperature: 1, sampling_seed: i, max_new_tokens: 12, regex: `(a|b){1,3}x${i}` });
  for (let i = 0; i < 40; i++) await run(i);
  const before_ = await grammar.stats();
  for (let b = 0; b < 13; b++) await Promise.all(Array.from({ length: 20 }, (_, k) => run(40 + b * 20 + k)));
  // A finished request's matcher is freed by a message to the grammar worker that may trail the HTTP answer: wait
  // (bounded) for it to arrive; a leaked matcher still fails.
  let after_ = await grammar.stats();
  for (let t = 0; t < 40 && after_.matchers > before_.matchers; t++) {
    await new Promise((r) => setTimeout(r, 50));
    after_ = await grammar.stats();
  }
  // None left: every matcher of this file's earlier requests (aborted while compiling, retracted, failed) is freed too.
  assert.equal(after_.matchers, 0, `every matcher disposed (${before_.matchers} live before the 300)`);
  assert.ok(after_.compiled <= 128, `cache bounded: ${after_.compiled}`);
  assert.equal(after_.heapBytes, before_.heapBytes, `WASM heap grew ${before_.heapBytes} → ${after_.heapBytes}`);
});

test('--grammar-backend none refuses constraints with SGLang message; other SGLang backend names are refused at start-up', async () => {
  const none = await serve(embeddedModelDir(), ['--grammar-backend', 'none']);
  try {
    const r = await post(none.base, '/generate', { text: 'x', sampling_params: { regex: 'a' } });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.message, 'Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the server is launched with --grammar-backend none');
    const free = await post(none.base, '/generate', { text: 'x', sampling_params: { max_new_tokens: 3 } });
    assert.equal(free.status, 200);
  } finally {
    await none.close();
  }
  for (const b of ['outlines', 'llguidance']) {
    const { args, given } = parseServerArgs(['--grammar-backend', b]);
    assert.throws(() => validateServerArgs(args, given), new RegExp(`grammar backend '${b}' .*xgrammar and none are built`));
  }
  assert.throws(() => parseServerArgs(['--grammar-backend', 'foo']), /invalid choice: 'foo' \(choose from 'xgrammar', 'outlines', 'llguidance', 'none'\)/);
});

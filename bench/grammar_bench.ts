// `npm run bench:grammar [-- overhead|compile|queue|fuzz|soak ...]` (default: overhead compile queue): figures for
// structured output on the embedded default model (tiny MiniMax-M2, DeepSeek-V3 BPE, 128,832 logits). Nothing is
// asserted; every reading is printed (the machine is shared: compare ratios, not absolute times).
//  - overhead: per-token cost of constrained rows vs free rows at batch 1 and 32 (same prompts, 64 tokens each,
//    ignore_eos; constrained = regex `[a-z ]{1000}`, so no row ends early): wall ms per generated token, and the
//    part outside the model forward (scheduling, mask wait, mask application, sampling, detokenization).
//  - compile: the seed's get_weather tool schema (DeepSeek-V3.2 / MiniMax-M2 deployment pages), compiled in a fresh
//    GrammarEngine (validator instance + main instance), first and warm (cache off: each variant differs by a
//    $comment), and as SGLang's tool_choice "required" array schema.
//  - queue: 50 requests with 50 distinct schemas arrive at once next to 8 free streaming requests: the time each
//    waits in the grammar queue (p50 / p99 / max) and the free requests' largest gap between two tokens vs median.
//  - fuzz [N=1000]: N invalid / hostile grammars through /generate, each must answer 400 (or 200 when valid);
//    then a valid request; grammar-worker heap before and after.
//  - soak [N=10000]: N constrained requests (8 kinds, cached grammars), WASM heap and matcher count every N/10.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { SILENT_LOGGER } from '../src/common/index.js';
import { ensureEmbeddedModel } from '../src/cli/embedded_model.js';
import { GrammarEngine, readGrammarVocab } from '../src/constrained/index.js';
import { Engine, type GenerateOutput } from '../src/engine/index.js';
import { hostileGrammars } from '../src/bench/grammar_fuzz.js';
import { jsonArrayToolSchema } from '../src/parsers/index.js';

const SEED_WEATHER = {
  type: 'object',
  properties: {
    location: { type: 'string', description: 'The city name' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' },
  },
  required: ['location'],
};

const dir = ensureEmbeddedModel(join(homedir(), '.cache', 'tsglang'), SILENT_LOGGER);
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN;
};
const f = (x: number, d = 2): string => x.toFixed(d);

async function drain(it: AsyncIterable<GenerateOutput>, onOut?: (o: GenerateOutput) => void): Promise<GenerateOutput> {
  let last: GenerateOutput | null = null;
  for await (const o of it) {
    last = o;
    onOut?.(o);
  }
  return last!;
}

async function engine(extra: Record<string, unknown> = {}): Promise<Engine> {
  return Engine.create({ modelPath: dir, useWorkerThread: false, numThreads: 1, logLevel: 'error', maxTotalTokens: 16384, contextLength: 2048, constrainedJsonDisableAnyWhitespace: true, ...extra });
}

async function overhead(): Promise<void> {
  const e = await engine();
  const core = e.inProcessCore!;
  console.log('## per-token cost, constrained vs free (64 tokens per request, ignore_eos)');
  console.log('| batch | rows | wall ms/token | forward ms/token | outside forward ms/token | sampling ms/token |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  const run = async (batch: number, constrained: boolean, tag: string): Promise<void> => {
    const r = core.scheduler.runner;
    const f0 = r.forwardTimeMs;
    const s0 = r.sampleTimeMs;
    const t0 = performance.now();
    const outs = await Promise.all(Array.from({ length: batch }, (_, i) => drain(e.generate({
      rid: `${tag}-${batch}-${constrained}-${i}`, text: `Row ${i} of the batch:`,
      samplingParams: { temperature: 1, seed: i, maxNewTokens: 64, ignoreEos: true, ...(constrained ? { regex: '[a-z ]{1000}' } : {}) },
    }))));
    const wall = performance.now() - t0;
    const tokens = outs.reduce((a, o) => a + o.completionTokens, 0);
    const fwd = r.forwardTimeMs - f0;
    const smp = r.sampleTimeMs - s0;
    if (tag === 'warm') return;
    console.log(`| ${batch} | ${constrained ? 'constrained' : 'free'} | ${f(wall / tokens, 3)} | ${f(fwd / tokens, 3)} | ${f((wall - fwd) / tokens, 3)} | ${f(smp / tokens, 3)} |`);
  };
  await run(4, true, 'warm');
  await run(4, false, 'warm');
  for (const b of [1, 32]) for (let rep = 0; rep < 2; rep++) for (const c of [false, true]) await run(b, c, `r${rep}`);
  await e.shutdown();
}

async function compile(): Promise<void> {
  const t0 = performance.now();
  const ge = await GrammarEngine.create(readGrammarVocab(dir), 128832, [128817], { maxCompiled: 64, maxErrors: 64 });
  console.log(`## compile (GrammarEngine: TokenizerInfo + warm-up ${f(performance.now() - t0, 0)} ms)`);
  const time = async (label: string, schema: object, n: number): Promise<void> => {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      const err = await ge.compile({ kind: 'json', source: JSON.stringify({ ...schema, $comment: `${label}-${i}` }) });
      ms.push(performance.now() - t);
      if (err) throw new Error(err);
    }
    const t = performance.now();
    await ge.compile({ kind: 'json', source: JSON.stringify({ ...schema, $comment: `${label}-0` }) });
    const hit = performance.now() - t;
    console.log(`${label}: first ${f(ms[0], 1)} ms; next ${n - 1}: median ${f(pct(ms.slice(1), 0.5), 1)} ms, min ${f(Math.min(...ms.slice(1)), 1)}, max ${f(Math.max(...ms.slice(1)), 1)} (validator + main instance); cache hit ${f(hit, 3)} ms; all: ${ms.map((x) => f(x, 1)).join(' ')}`);
  };
  await time('seed get_weather parameters', SEED_WEATHER, 6);
  await time('tool_choice required array (get_weather)', jsonArrayToolSchema([{ type: 'function', function: { name: 'get_weather', parameters: SEED_WEATHER } }], 'required')!, 6);
}

async function queue(): Promise<void> {
  const e = await engine();
  const g = e.inProcessCore!.grammar!;
  // start the worker and warm it (TokenizerInfo) before the burst
  await drain(e.generate({ rid: 'warm', text: 'x', samplingParams: { maxNewTokens: 2, regex: '(a|b)' } }));
  const gaps: number[][] = [];
  const free = Array.from({ length: 8 }, (_, i) => {
    const times: number[] = [];
    gaps.push(times);
    return drain(e.generate({ rid: `free-${i}`, text: `Free ${i}`, stream: true, samplingParams: { temperature: 1, seed: i, maxNewTokens: 200, ignoreEos: true } }), () => times.push(performance.now()));
  });
  await new Promise((r) => setTimeout(r, 300));
  const w0 = g.queueWaitsMs.length;
  const t0 = performance.now();
  const cons = Array.from({ length: 50 }, (_, i) => drain(e.generate({
    rid: `so-${i}`, text: `Weather ${i}`,
    samplingParams: { temperature: 1, seed: i, maxNewTokens: 60, jsonSchema: JSON.stringify({ ...SEED_WEATHER, properties: { ...SEED_WEATHER.properties, location: { type: 'string', maxLength: 10 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit', `kelvin${i}`] } } }) },
  })));
  await Promise.all(cons);
  const burst = performance.now() - t0;
  await Promise.all(free);
  const waits = g.queueWaitsMs.slice(w0);
  console.log(`## grammar queue: 50 distinct schemas at once (+ 8 free streaming requests); burst ${f(burst, 0)} ms`);
  console.log(`wait in grammar queue: n=${waits.length} p50 ${f(pct(waits, 0.5), 1)} ms, p99 ${f(pct(waits, 0.99), 1)} ms, max ${f(Math.max(...waits), 1)} ms`);
  const allGaps = gaps.flatMap((ts) => ts.slice(1).map((t, i) => t - ts[i]));
  console.log(`free requests' gap between tokens: median ${f(pct(allGaps, 0.5), 1)} ms, p99 ${f(pct(allGaps, 0.99), 1)} ms, max ${f(Math.max(...allGaps), 1)} ms (a compile is 30–150 ms)`);
  await e.shutdown();
}

async function fuzz(n: number): Promise<void> {
  const e = await engine();
  const g = e.inProcessCore!.grammar!;
  await drain(e.generate({ rid: 'warm', text: 'x', samplingParams: { maxNewTokens: 2, regex: '(a|b)' } }));
  const s0 = await g.stats();
  const counts = { refused: 0, ran: 0, wrong: 0 };
  const t0 = performance.now();
  for (const [i, c] of hostileGrammars(11, n).entries()) {
    const key = c.field === 'json_schema' ? 'jsonSchema' : c.field === 'structural_tag' ? 'structuralTag' : c.field;
    let refused = false;
    try {
      const o = await drain(e.generate({ rid: `fz-${i}`, text: 'Fuzz', samplingParams: { temperature: 1, seed: i, maxNewTokens: 8, [key]: c.value } }));
      refused = o.finishReason?.type === 'abort' && (o.finishReason as { statusCode?: number }).statusCode === 400;
    } catch {
      refused = true;
    }
    if (refused) counts.refused++;
    else counts.ran++;
    if ((c.invalid === true && !refused) || (c.invalid === false && refused)) counts.wrong++;
  }
  const ok = await drain(e.generate({ rid: 'after', text: 'After', samplingParams: { temperature: 1, seed: 1, maxNewTokens: 20, regex: '(yes|no)' } }));
  const s1 = await g.stats();
  console.log(`## fuzz: ${n} cases in ${f((performance.now() - t0) / 1000, 1)} s: refused ${counts.refused}, ran ${counts.ran}, wrong verdicts ${counts.wrong}; next valid request: ${JSON.stringify(ok.text)}`);
  console.log(`grammar worker before ${JSON.stringify(s0)} after ${JSON.stringify(s1)}`);
  await e.shutdown();
}

async function soak(n: number): Promise<void> {
  const e = await engine();
  const g = e.inProcessCore!.grammar!;
  const kinds = [{ regex: '(yes|no|maybe)' }, { regex: '[a-z]{1,6}@[a-z]{1,5}\\.com' }, { ebnf: 'root ::= "(" [0-9] ")"' }, { jsonSchema: JSON.stringify({ type: 'object', properties: { u: { type: 'string', enum: ['a', 'b'] } }, required: ['u'], additionalProperties: false }) }];
  const t0 = performance.now();
  for (let done = 0; done < n; done += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, k) => drain(e.generate({ rid: `soak-${done + k}`, text: 'S', samplingParams: { temperature: 1, seed: done + k, maxNewTokens: 24, ...kinds[(done + k) % kinds.length] } }))));
    if ((done + 50) % Math.max(50, Math.floor(n / 10 / 50) * 50) === 0) console.log(`soak ${done + 50}: ${JSON.stringify(await g.stats())} rss ${f(process.memoryUsage().rss / 2 ** 20, 0)} MB, ${f((performance.now() - t0) / (done + 50), 1)} ms/request`);
  }
  await e.shutdown();
}

const argv = process.argv.slice(2);
const what = argv.filter((a) => !/^\d+$/.test(a));
const num = Number(argv.find((a) => /^\d+$/.test(a)) ?? 0);
for (const w of what.length ? what : ['overhead', 'compile', 'queue']) {
  if (w === 'overhead') await overhead();
  else if (w === 'compile') await compile();
  else if (w === 'queue') await queue();
  else if (w === 'fuzz') await fuzz(num || 1000);
  else if (w === 'soak') await soak(num || 10000);
  else throw new Error(`unknown bench part ${w}`);
}

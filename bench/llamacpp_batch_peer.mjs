// llama.cpp's batched decode (node-llama-cpp 3.21.1, CPU), the peer side of `npm run bench:llamacpp`'s batch table:
// B sequences in one context; each prefills the same --prompt-len ids (untimed, one sequence after the other), then
// --decode-len greedy steps in which every sequence feeds its previous pick; the B one-token evaluations of a step are
// issued together, and node-llama-cpp's batching puts them into one llama_decode (n_batch ≥ B). tok/s = B · steps /
// wall time of the decode phase, median of --runs after one warmup run; tok per CPU-second = B · steps / CPU time of
// this process (user + system, every thread) over the same phase. Prints ONE JSON line on stdout.
//
//   NODE_PATH=<dir>/node_modules node bench/llamacpp_batch_peer.mjs MODEL.gguf --batch 8 [--threads 1]
//       [--prompt-len 16] [--decode-len 16] [--runs 3] [--prompt-file tokens.json]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opt, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    batch: { type: 'string', default: '1' },
    threads: { type: 'string', default: '1' },
    'prompt-len': { type: 'string', default: '16' },
    'decode-len': { type: 'string', default: '16' },
    runs: { type: 'string', default: '3' },
    'prompt-file': { type: 'string' },
  },
});
if (positionals.length !== 1) {
  console.error('usage: llamacpp_batch_peer.mjs MODEL.gguf --batch B [--threads T] [--prompt-len N] [--decode-len N] [--runs N] [--prompt-file F]');
  process.exit(2);
}
const B = +opt.batch, threads = +opt.threads, promptLen = +opt['prompt-len'], decodeLen = +opt['decode-len'], runs = +opt.runs;

const entry = createRequire(pathToFileURL(path.join(process.cwd(), 'x.js')).href).resolve('node-llama-cpp');
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, maxThreads: 0 });
const model = await llama.loadModel({ modelPath: positionals[0], gpuLayers: 0 });
const md = model.fileInfo.metadata;
const nVocab = md[md.general.architecture]?.vocab_size ?? md.tokenizer.ggml.tokens.length;
const prompt = opt['prompt-file']
  ? JSON.parse(fs.readFileSync(opt['prompt-file'], 'utf8')).prompt.slice(0, promptLen)
  : Array.from({ length: promptLen }, (_, i) => 2 + ((i * 7919) % (nVocab - 2)));
const context = await model.createContext({
  contextSize: B * (promptLen + decodeLen + 16),
  batchSize: Math.max(B, promptLen),
  sequences: B,
  threads: { ideal: threads, min: threads },
  flashAttention: false,
  experimentalKvCacheKeyType: 'F16',
  experimentalKvCacheValueType: 'F16',
});
const seqs = Array.from({ length: B }, () => context.getSequence());
const greedy = { generateNext: { token: true, options: { temperature: 0 } } };

async function oneRun(steps) {
  const toks = [];
  for (const s of seqs) {
    await s.clearHistory();
    const r = await s.controlledEvaluate(prompt.map((t, i) => (i === prompt.length - 1 ? [t, greedy] : t)));
    toks.push(r[prompt.length - 1].next.token);
  }
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  for (let i = 0; i < steps; i++) {
    const outs = await Promise.all(seqs.map((s, j) => s.controlledEvaluate([[toks[j], greedy]])));
    outs.forEach((o, j) => { toks[j] = o[0].next.token; });
  }
  const c = process.cpuUsage(c0);
  return { wall: (B * steps) / ((performance.now() - t0) / 1000), cpu: (B * steps) / ((c.user + c.system) / 1e6) };
}

await oneRun(2);
const res = [];
for (let i = 0; i < runs; i++) res.push(await oneRun(decodeLen));
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const r2 = (x) => Math.round(x * 100) / 100;
console.log(JSON.stringify({ batch: B, threads: context.currentThreads, decode_tok_s: r2(med(res.map((r) => r.wall))), runs: res.map((r) => r2(r.wall)),
  decode_tok_cpu_s: r2(med(res.map((r) => r.cpu))), cpu_runs: res.map((r) => r2(r.cpu)) }));
await context.dispose();
await model.dispose();
await llama.dispose();

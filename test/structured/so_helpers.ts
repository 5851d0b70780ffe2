// Helpers of the structured-output tests: an in-process HTTP server over a real tiny checkpoint (random weights,
// real byte-level BPE tokenizer), and validators independent of xgrammar (ajv for JSON Schema, a full-match RegExp,
// a recursive-descent checker for the test EBNF).
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { SILENT_LOGGER } from '../../src/common/index.js';
import { ensureEmbeddedModel, writeTinyModelWithTokenizer } from '../../src/cli/embedded_model.js';
import { engineSlice, httpServerSlice, parseServerArgs } from '../../src/config/index.js';
import { Engine } from '../../src/engine/index.js';
import { BuilderChatPrompt, HttpServer, ParserChatOutput, PLAIN_CHAT_OUTPUT, ServerMetrics } from '../../src/server/index.js';
import { ChatPromptBuilder } from '../../src/tokenizer/index.js';
import { tempDir } from '../helpers/tmp.js';

/** The embedded default model (generated once into ~/.cache/tsglang). */
export function embeddedModelDir(): string {
  return ensureEmbeddedModel(join(homedir(), '.cache', 'tsglang'), SILENT_LOGGER);
}

let dsDir: string | null = null;
/** A tiny DeepSeek-V3.2 checkpoint with the DeepSeek tokenizer (random weights), written once per process. */
export function deepseekV32Dir(): string {
  if (dsDir) return dsDir;
  dsDir = tempDir('tsglang-so-dsv32-');
  writeTinyModelWithTokenizer('deepseek-v32', dsDir, { configOverrides: { max_position_embeddings: 4096 } });
  return dsDir;
}

/** A served model. */
export interface Served {
  readonly base: string;
  readonly client: OpenAI;
  readonly engine: Engine;
  close(): Promise<void>;
}

/**
 * Serves `modelDir` in-process (engine core on this thread unless `worker`), with `tsglang serve` flags.
 */
export async function serve(modelDir: string, argv: string[] = [], worker = false): Promise<Served> {
  const { args } = parseServerArgs(['--model-path', modelDir, '--skip-server-warmup', ...argv]);
  const engine = await Engine.create({ ...engineSlice(args, modelDir), useWorkerThread: worker, numThreads: 1, logLevel: 'error' }, SILENT_LOGGER);
  const builder = ChatPromptBuilder.fromModelDir(modelDir, { chatTemplate: args.chatTemplate, toolCallParser: args.toolCallParser });
  const server = new HttpServer({
    engine,
    tokenizer: engine.tokenizer,
    config: httpServerSlice(args, 'default'),
    chatPrompt: new BuilderChatPrompt(builder),
    chatOutput: args.reasoningParser || args.toolCallParser ? new ParserChatOutput(args.reasoningParser, args.toolCallParser) : PLAIN_CHAT_OUTPUT,
    modelFacts: { modelType: null, architectures: [] },
    serverArgs: {},
    metrics: args.enableMetrics ? new ServerMetrics('default', engine) : null,
    logger: SILENT_LOGGER,
    version: 'test',
  });
  const port = await server.listen('127.0.0.1', 0);
  server.setReady(true);
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    engine,
    client: new OpenAI({ baseURL: `${base}/v1`, apiKey: 'EMPTY', maxRetries: 0 }),
    close: async () => {
      await server.close();
      await engine.shutdown();
    },
  };
}

/** POST JSON; returns status and parsed body (or raw text for event streams). */
export async function post(base: string, path: string, body: unknown): Promise<{ status: number; json: any; text: string }> {
  const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.text();
  let json: any = null;
  try { json = JSON.parse(text); } catch { /* event stream */ }
  return { status: r.status, json, text };
}

/** The `data:` payloads of an SSE body, [DONE] excluded. */
export function sseEvents(text: string): any[] {
  return text.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)));
}

const ajv = new Ajv({ strict: false, allErrors: true });
/** ajv verdict of `value` against `schema`: null when valid, else the errors as text. */
export function schemaErrors(schema: object, value: unknown): string | null {
  const v = ajv.compile(schema);
  return v(value) ? null : ajv.errorsText(v.errors);
}

/** Parses `text` as JSON and validates it: null when valid, else why. */
export function jsonTextErrors(schema: object, text: string): string | null {
  let v: unknown;
  try { v = JSON.parse(text); } catch (e) { return `not JSON (${(e as Error).message}): ${JSON.stringify(text.slice(0, 200))}`; }
  return schemaErrors(schema, v);
}

/**
 * The test EBNF (xgrammar's GBNF dialect): a finite language of small arithmetic expressions (bounded, so a
 * random-weight model always finishes): up to two operators, one level of parentheses, numbers 0–99.
 */
export const ARITH_EBNF = 'root ::= expr\nexpr ::= term | term op term | "(" term op term ")" op term\nterm ::= num | "(" num op num ")"\nop ::= "+" | "-" | "*" | "/"\nnum ::= [0-9] | [1-9] [0-9]';

/** Independent recursive-descent recognizer of arithmetic expressions (+ − * /, parentheses, integers; whole string). */
export function matchesArith(s: string): boolean {
  let i = 0;
  const num = (): boolean => { const st = i; while (i < s.length && s[i] >= '0' && s[i] <= '9') i++; return i > st; };
  const factor = (): boolean => {
    if (s[i] === '(') { i++; if (!expr()) return false; if (s[i] !== ')') return false; i++; return true; }
    return num();
  };
  const term = (): boolean => { if (!factor()) return false; while (s[i] === '*' || s[i] === '/') { i++; if (!factor()) return false; } return true; };
  const expr = (): boolean => { if (!term()) return false; while (s[i] === '+' || s[i] === '-') { i++; if (!term()) return false; } return true; };
  return expr() && i === s.length;
}

/** True when `re` matches the whole of `s` (JavaScript RegExp, not xgrammar). */
export function fullMatch(re: string, s: string): boolean {
  return new RegExp(`^(?:${re})$`, 'u').test(s);
}

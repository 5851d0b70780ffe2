// `tsglang parse`: runs the reasoning and tool-call parsers over a model output read from stdin (byte for byte)
// and prints {"content", "reasoning_content", "tool_calls": [{"name", "arguments"}]} on stdout. With --chunks the
// output is fed as those streamed pieces and the deltas are aggregated; otherwise it is parsed in one piece.
import { readFileSync } from 'node:fs';
import { InvalidRequestError } from '../common/index.js';
import {
  ChatOutputProcessor,
  aggregateChatDeltas,
  assertReasoningParserName,
  assertToolCallParserName,
  parseChatOutput,
} from '../parsers/index.js';
import type { ChatParseOptions, ParsedChatOutput } from '../parsers/index.js';
import { HELP_REQUESTED, parseStrictFlags, runStdioCommand } from './cli_common.js';

const USAGE = `usage: tsglang parse [--reasoning-parser R] [--tool-call-parser P] [--request request.json]
                     [--chunks chunks.json] < model_output.txt

  --reasoning-parser R   deepseek-v3 | deepseek-r1 | qwen3 | minimax | minimax-append-think
  --tool-call-parser P   minimax-m2 | deepseekv32 | deepseekv31 | deepseekv3
  --request FILE         chat request body (tools, tool_choice, chat_template_kwargs, separate_reasoning,
                         stream_reasoning); absent fields take SGLang's defaults
  --chunks FILE          JSON array of strings whose concatenation is the output: parse as a stream
Prints {"content", "reasoning_content", "tool_calls": [{"name", "arguments"}]} (empty text as null).
`;

/** Parsed flags of `tsglang parse`. */
export interface ParseArgs {
  reasoningParser: string | null;
  toolCallParser: string | null;
  requestPath: string | null;
  chunksPath: string | null;
}

/**
 * Parses argv of `tsglang parse`.
 * @throws InvalidRequestError naming the flag for an unknown parser or flag
 */
export function parseParseArgs(argv: string[]): ParseArgs {
  const values = parseStrictFlags(argv, {
    'reasoning-parser': { type: 'string' },
    'tool-call-parser': { type: 'string' },
    request: { type: 'string' },
    chunks: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) throw new InvalidRequestError(HELP_REQUESTED);
  const str = (k: string): string | null => (typeof values[k] === 'string' ? (values[k] as string) : null);
  const args = { reasoningParser: str('reasoning-parser'), toolCallParser: str('tool-call-parser'), requestPath: str('request'), chunksPath: str('chunks') };
  if (args.reasoningParser !== null) assertReasoningParserName(args.reasoningParser);
  if (args.toolCallParser !== null) assertToolCallParserName(args.toolCallParser);
  return args;
}

function readJsonFile(path: string, flag: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new InvalidRequestError(`${flag} ${path}: ${(err as Error).message}`, flag.replace(/^--/, ''));
  }
}

/**
 * Parses a model output as the server would for a request.
 * @param args parsed flags
 * @param output the model output text
 * @param request the chat request body (or null: SGLang defaults, no tools)
 * @param chunks streamed pieces (their concatenation must equal `output`), or null for one-shot parsing
 * @throws InvalidRequestError for malformed inputs
 */
export function parseModelOutput(args: ParseArgs, output: string, request: Record<string, unknown> | null, chunks: string[] | null): ParsedChatOutput {
  const r = request ?? {};
  const kwargs = r.chat_template_kwargs;
  const options: ChatParseOptions = {
    reasoningParser: args.reasoningParser,
    toolCallParser: args.toolCallParser,
    tools: r.tools,
    toolChoice: r.tool_choice,
    separateReasoning: typeof r.separate_reasoning === 'boolean' ? r.separate_reasoning : true,
    streamReasoning: typeof r.stream_reasoning === 'boolean' ? r.stream_reasoning : true,
    chatTemplateKwargs: kwargs !== null && typeof kwargs === 'object' && !Array.isArray(kwargs) ? (kwargs as Record<string, unknown>) : null,
  };
  if (chunks === null) return parseChatOutput(output, options);
  if (chunks.join('') !== output) throw new InvalidRequestError('--chunks: the chunks do not concatenate to the model output on stdin', 'chunks');
  const p = new ChatOutputProcessor(options);
  const deltas = chunks.flatMap((c) => p.push(c));
  deltas.push(...p.finish());
  return aggregateChatDeltas(deltas);
}

/** CLI entry: exit 0 on success, 1 on an input error, 2 on a usage error. */
export async function run(argv: string[]): Promise<number> {
  return runStdioCommand({ name: 'parse', usage: USAGE, parse: parseParseArgs, execute: parseStdin }, argv);
}

/** Reads the model output from stdin and the --request / --chunks files, parses, prints the JSON line. */
function parseStdin(args: ParseArgs): void {
  const output = new TextDecoder('utf-8', { ignoreBOM: true }).decode(readFileSync(0));
  let request: Record<string, unknown> | null = null;
  if (args.requestPath !== null) {
    const r = readJsonFile(args.requestPath, '--request');
    if (r === null || typeof r !== 'object' || Array.isArray(r)) throw new InvalidRequestError('--request: the file must hold a JSON object', 'request');
    request = r as Record<string, unknown>;
  }
  let chunks: string[] | null = null;
  if (args.chunksPath !== null) {
    const c = readJsonFile(args.chunksPath, '--chunks');
    if (!Array.isArray(c) || !c.every((x) => typeof x === 'string')) throw new InvalidRequestError('--chunks: the file must hold a JSON array of strings', 'chunks');
    chunks = c as string[];
  }
  const result = parseModelOutput(args, output, request, chunks);
  const printed = {
    content: result.content,
    reasoning_content: result.reasoningContent,
    tool_calls: result.toolCalls.map((t) => ({ name: t.name, arguments: t.arguments })),
  };
  process.stdout.write(JSON.stringify(printed) + '\n');
}

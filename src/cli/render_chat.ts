// `tsglang render-chat`: prints, as one JSON string on stdout, the prompt text an OpenAI chat request renders to
// for a model directory (the model's chat template, `--chat-template FILE`, or the DeepSeek-V3.2 encoder).
// Reads the request body from stdin. Errors go to stderr.
import { readFileSync } from 'node:fs';
import { InvalidRequestError } from '../common/index.js';
import { assertToolCallParserName } from '../parsers/index.js';
import { ChatPromptBuilder } from '../tokenizer/index.js';
import { HELP_REQUESTED, parseStrictFlags, runStdioCommand } from './cli_common.js';

const USAGE = `usage: tsglang render-chat --model-path DIR [--chat-template FILE] [--tool-call-parser P] < request.json

  --model-path DIR          checkpoint directory (config.json; chat_template.jinja or tokenizer_config.json)
  --chat-template FILE      Jinja chat template file, read as SGLang reads --chat-template
  --tool-call-parser P      as for serve: deepseekv32 selects the DeepSeek-V3.2 encoder
  --reasoning-parser R      accepted for symmetry with serve; does not change the prompt
Prints the prompt text (BOS included where the template puts it) as one JSON string.
`;

/** Parsed flags of `tsglang render-chat`. */
export interface RenderChatArgs {
  modelPath: string;
  chatTemplate: string | null;
  toolCallParser: string | null;
}

/**
 * Parses argv of `tsglang render-chat`.
 * @throws InvalidRequestError naming the flag for a missing or malformed value
 */
export function parseRenderChatArgs(argv: string[]): RenderChatArgs {
  const values = parseStrictFlags(argv, {
    'model-path': { type: 'string' },
    'chat-template': { type: 'string' },
    'tool-call-parser': { type: 'string' },
    'reasoning-parser': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) throw new InvalidRequestError(HELP_REQUESTED);
  const modelPath = values['model-path'];
  if (typeof modelPath !== 'string') throw new InvalidRequestError('--model-path is required', 'model-path');
  const toolCallParser = typeof values['tool-call-parser'] === 'string' ? values['tool-call-parser'] : null;
  if (toolCallParser !== null) assertToolCallParserName(toolCallParser);
  return { modelPath, chatTemplate: typeof values['chat-template'] === 'string' ? values['chat-template'] : null, toolCallParser };
}

/**
 * Renders the prompt of a chat request body.
 * @param args parsed flags
 * @param body the request JSON text
 * @returns the prompt text
 * @throws InvalidRequestError for a malformed body or a request SGLang would answer with 400
 */
export function renderChat(args: RenderChatArgs, body: string): string {
  let request: unknown;
  try {
    request = JSON.parse(body);
  } catch (err) {
    throw new InvalidRequestError(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) throw new InvalidRequestError('request body must be a JSON object');
  const builder = ChatPromptBuilder.fromModelDir(args.modelPath, { chatTemplate: args.chatTemplate, toolCallParser: args.toolCallParser });
  return builder.build(request as Record<string, unknown>, { rawBody: body }).text;
}

/** CLI entry: exit 0 on success, 1 on a request/model error, 2 on a usage error. */
export async function run(argv: string[]): Promise<number> {
  return runStdioCommand(
    {
      name: 'render-chat',
      usage: USAGE,
      parse: parseRenderChatArgs,
      execute: (args) => process.stdout.write(JSON.stringify(renderChat(args, readFileSync(0, 'utf8'))) + '\n'),
    },
    argv,
  );
}

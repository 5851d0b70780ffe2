// DeepSeek-V3.2 prompt encoder (V3.2 ships a Python encoder instead of a Jinja chat template; parsers-spec §2.3).
// Input: messages already preprocessed as SGLang does (string contents, decoded tool-call arguments, tools on the
// first system message). Output: the prompt text, BOS included. `｜` is U+FF5C, `▁` is U+2581.
//
//   BOS {system}[\n\n{tools block}] <｜User｜>{user}<｜Assistant｜>(<think>|</think>)
//   [{reasoning}</think>]{content}[\n\n<｜DSML｜function_calls>…</｜DSML｜function_calls>]<｜end▁of▁sentence｜>
//   \n\n<function_results>\n<result>{tool}</result>…\n</function_results>\n\n(<think>|</think>)
//
// Source: python/sglang/srt/entrypoints/openai/encoding_dsv32.py (vendored from the DeepSeek-V3.2 HF repo).

import { InvalidRequestError, pyJsonDumps, pyJsonLoads } from '../common/index.js';

/** Special strings of the DeepSeek-V3.2 prompt format. */
export const DSV32_TOKENS = {
  bos: '<｜begin▁of▁sentence｜>',
  eos: '<｜end▁of▁sentence｜>',
  user: '<｜User｜>',
  assistant: '<｜Assistant｜>',
  thinkStart: '<think>',
  thinkEnd: '</think>',
  dsml: '｜DSML｜',
} as const;

/** `chat` (answers directly; turns end with `</think>`) or `thinking` (the model reasons first). */
export type Dsv32ThinkingMode = 'chat' | 'thinking';

/** A message as the encoder reads it (plain JSON; extra keys are ignored). */
export interface Dsv32Message {
  role: string;
  content?: unknown;
  reasoning_content?: unknown;
  tool_calls?: unknown;
  /** Tools in OpenAI form (`{type, function}`), only on a system or developer message. */
  tools?: unknown;
  [key: string]: unknown;
}

const { bos, eos, user: USER, assistant: ASSISTANT, thinkStart, thinkEnd, dsml } = DSV32_TOKENS;

/** Fixed instruction text around the tool schemas (substituted with the DSML marker and think tags). */
function toolsBlock(schemas: string[]): string {
  return [
    '## Tools',
    "You have access to a set of tools you can use to answer the user's question.",
    `You can invoke functions by writing a "<${dsml}function_calls>" block like the following as part of your reply to the user:`,
    `<${dsml}function_calls>`,
    `<${dsml}invoke name="$FUNCTION_NAME">`,
    `<${dsml}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</${dsml}parameter>`,
    '...',
    `</${dsml}invoke>`,
    `<${dsml}invoke name="$FUNCTION_NAME2">`,
    '...',
    `</${dsml}invoke>`,
    `</${dsml}function_calls>`,
    'String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).',
    'If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:',
    `<${dsml}function_calls>`,
    '...',
    `</${dsml}function_calls>`,
    '<function_results>',
    '...',
    '</function_results>',
    `${thinkStart}...thinking about results${thinkEnd}`,
    'Here are the functions available in JSONSchema format:',
    '<functions>',
    schemas.join('\n'),
    '</functions>',
    '',
  ].join('\n');
}

/** Python `json.dumps(value, ensure_ascii=False)`. */
function toJson(value: unknown): string {
  return pyJsonDumps(value, { ensureAscii: false });
}

/** Python `str(x)` for the values a message field can hold here (strings verbatim). */
function pyStr(x: unknown): string {
  if (typeof x === 'string') return x;
  if (x === null || x === undefined) return 'None';
  if (x === true) return 'True';
  if (x === false) return 'False';
  return toJson(x);
}

function fail(message: string): never {
  throw new InvalidRequestError(`DeepSeek-V3.2 encoding: ${message}`, 'messages');
}

function renderToolsOf(tools: unknown): string {
  if (!Array.isArray(tools)) fail('tools must be a list');
  return toolsBlock((tools as unknown[]).map((t) => toJson((t as { function?: unknown }).function)));
}

/** One call as DSML: each argument a parameter tag, strings raw, other values as JSON. */
function encodeCall(call: unknown): string {
  const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function ?? {};
  let args = fn.arguments;
  if (typeof args === 'string') args = pyJsonLoads(args);
  if (args === null || typeof args !== 'object' || Array.isArray(args)) fail('Assistant tool call function.arguments must be a JSON object.');
  const params = Object.entries(args as Record<string, unknown>).map(([k, v]) => {
    const isStr = typeof v === 'string';
    return `<${dsml}parameter name="${k}" string="${isStr ? 'true' : 'false'}">${isStr ? v : toJson(v)}</${dsml}parameter>`;
  });
  return `<${dsml}invoke name="${pyStr(fn.name)}">\n${params.join('\n')}\n</${dsml}invoke>`;
}

function lastUserIndex(messages: readonly Dsv32Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === 'user' || messages[i].role === 'developer') return i;
  return -1;
}

function renderMessage(index: number, messages: readonly Dsv32Message[], mode: Dsv32ThinkingMode): string {
  const msg = messages[index];
  const last = lastUserIndex(messages);
  const { role, content } = msg;
  const hasTools = Array.isArray(msg.tools) ? msg.tools.length > 0 : Boolean(msg.tools);
  const toolCalls = Array.isArray(msg.tool_calls) ? msg.tool_calls : [];
  const turnEnd = (i: number): string => (i === last && mode === 'thinking' ? thinkStart : thinkEnd);

  switch (role) {
    case 'system': {
      let out = content ? pyStr(content) : '';
      if (hasTools) out += '\n\n' + renderToolsOf(msg.tools);
      return out;
    }
    case 'developer': {
      if (!content) fail(`invalid message for role 'developer' at index ${index}`);
      let inner = '';
      if (hasTools) inner += '\n\n' + renderToolsOf(msg.tools);
      inner += `\n\n# The user's message is: ${pyStr(content)}`;
      return `${USER}${inner}${ASSISTANT}${turnEnd(index)}`;
    }
    case 'user':
      return `${USER}${pyStr(content)}${ASSISTANT}${turnEnd(index)}`;
    case 'tool': {
      // Tool results answer the calls of the nearest preceding assistant message, by position.
      let prev = index - 1;
      while (prev >= 0 && messages[prev].role === 'tool') prev--;
      if (!(index === 0 || (prev >= 0 && messages[prev].role === 'assistant'))) fail(`tool message at index ${index} does not follow an assistant message`);
      const order = index - prev;
      const calls = prev >= 0 && Array.isArray(messages[prev].tool_calls) ? (messages[prev].tool_calls as unknown[]) : [];
      if (calls.length < order) fail('No tool calls but found tool output');
      let out = order === 1 ? '\n\n<function_results>' : '';
      out += `\n<result>${pyStr(content)}</result>`;
      if (order === calls.length) {
        out += '\n</function_results>';
        out += '\n\n' + (index >= last && mode === 'thinking' ? thinkStart : thinkEnd);
      }
      return out;
    }
    case 'assistant': {
      let callsText = '';
      if (toolCalls.length > 0) {
        callsText = `\n\n<${dsml}function_calls>\n${toolCalls.map(encodeCall).join('\n')}\n</${dsml}function_calls>`;
      }
      let reasoning = '';
      if (mode === 'thinking' && index > last) {
        if (!msg.reasoning_content && toolCalls.length === 0) {
          fail(`thinking mode: assistant message at index ${index} after the last user message has neither reasoning_content nor tool_calls`);
        }
        reasoning = (msg.reasoning_content ? pyStr(msg.reasoning_content) : '') + thinkEnd;
      }
      return `${reasoning}${content ? pyStr(content) : ''}${callsText}${eos}`;
    }
    default:
      return fail(`unknown role '${String(role)}' at index ${index}`);
  }
}

/**
 * Encodes a conversation into a DeepSeek-V3.2 prompt (`encode_messages` with a fresh context).
 * @param messages preprocessed messages (see file header); not modified
 * @param mode `thinking` or `chat`
 * @param options `dropThinking` (default true): remove reasoning of assistant turns before the last user turn in
 *   thinking mode; `addBos` (default true): start with BOS
 * @returns the prompt text (tokenize without adding special tokens)
 * @throws InvalidRequestError for conversations the format cannot express (orphan tool results, a thinking-mode
 *   assistant turn without reasoning or calls, tool-call arguments that are not a JSON object, unknown roles)
 */
export function encodeMessagesDsv32(
  messages: readonly Dsv32Message[],
  mode: Dsv32ThinkingMode,
  options: { dropThinking?: boolean; addBos?: boolean } = {},
): string {
  let msgs = messages;
  if (mode === 'thinking' && (options.dropThinking ?? true)) {
    const last = lastUserIndex(messages);
    msgs = messages.map((m, i) => {
      if (m.role !== 'assistant' || i >= last) return m;
      const { reasoning_content: _dropped, ...rest } = m;
      return rest as Dsv32Message;
    });
  }
  let prompt = (options.addBos ?? true) ? bos : '';
  for (let i = 0; i < msgs.length; i++) prompt += renderMessage(i, msgs, mode);
  return prompt;
}

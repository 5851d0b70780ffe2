// Prompt construction for /v1/chat/completions (parsers-spec §2): SGLang's request preprocessing, then either the
// model's HF Jinja chat template (rendered with @huggingface/jinja) or the DeepSeek-V3.2 encoder.
// Knows request JSON (snake_case, as on the wire) but no HTTP and no protocol types; returns prompt text whose
// BOS, if any, is already in place (tokenize it without adding special tokens).
// Sources: python/sglang/srt/entrypoints/openai/serving_chat.py (`_process_messages`, `_apply_jinja_template`,
// `_validate_request`), python/sglang/srt/parser/jinja_template_utils.py, managers/template_manager.py.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { InvalidRequestError, ModelLoadError, PyFloat, pyFloatRepr, pyJsonLoads } from '../common/index.js';
import type { PyJson } from '../common/index.js';
import { encodeMessagesDsv32, DSV32_TOKENS } from './encoding_dsv32.js';
import type { Dsv32Message } from './encoding_dsv32.js';

/** The request fields prompt construction reads (snake_case, as sent by the client). */
export interface ChatRequestLike {
  messages?: unknown;
  tools?: unknown;
  tool_choice?: unknown;
  chat_template_kwargs?: Record<string, unknown> | null;
  reasoning_effort?: string | null;
  continue_final_message?: boolean | null;
}

/** A built prompt. */
export interface BuiltPrompt {
  /** The whole prompt text. */
  text: string;
  /**
   * Pieces to tokenize separately (each without adding special tokens) and concatenate: one piece, or two with
   * `continue_final_message` on the DeepSeek-V3.2 encoder path (SGLang appends the prefix's token ids).
   */
  segments: string[];
}

/** SGLang's preprocessing result: template variables (Jinja) or encoder input (DeepSeek-V3.2). */
export type PreparedChat =
  | { kind: 'jinja'; context: Record<string, unknown>; prefix: string | null }
  | { kind: 'dsv32'; messages: Record<string, unknown>[]; thinking: boolean; prefix: string | null };

/** How message content reaches the template: flattened to a string, or kept as OpenAI parts. */
export type TemplateContentFormat = 'string' | 'openai';

/**
 * SGLang's guess of a template's content format: `openai` if the template mentions image/audio/video/vision
 * or loops over `message.content` (also `msg.content`, `m.content`), else `string`.
 * @param source the template text
 */
export function detectTemplateContentFormat(source: string): TemplateContentFormat {
  if (['image', 'audio', 'video', 'vision'].some((k) => source.includes(k))) return 'openai';
  const loop = /\{%[-+]?\s*for\s+[\w\s,()]+?\s+in\s+\(?\s*(?:message|msg|m)\s*(?:\.\s*content\b|\[\s*['"]content['"]\s*\])/;
  return loop.test(source) ? 'openai' : 'string';
}

/** Where the template came from, for messages and `render-chat`. */
export type PromptBuilderKind = 'jinja' | 'dsv32';

/** Options of {@link ChatPromptBuilder.fromModelDir}. */
export interface PromptBuilderOptions {
  /** `--chat-template FILE` (a Jinja file; read as SGLang does: outer newlines stripped, literal `\n` → newline). */
  chatTemplate?: string | null;
  /** `--tool-call-parser` (`deepseekv32` selects the DeepSeek-V3.2 encoder). */
  toolCallParser?: string | null;
  /** `architectures` of config.json (read from the directory when omitted). */
  architectures?: string[];
}

function readJson(path: string): Record<string, unknown> | null {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new ModelLoadError(`cannot parse ${path}: ${(err as Error).message}`, { file: path }, { cause: err });
  }
}

/** A special token entry of tokenizer_config.json: a string or an AddedToken dict. */
function tokenText(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (v !== null && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return null;
}

const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

/** Fallback BOS/EOS by architecture when a checkpoint directory carries no tokenizer_config.json. */
function familyTokens(architectures: string[]): Record<string, string> {
  const arch = architectures[0] ?? '';
  if (arch.includes('Deepseek')) return { bos_token: DSV32_TOKENS.bos, eos_token: DSV32_TOKENS.eos };
  if (arch.includes('MiniMax')) return { bos_token: ']~!b[', eos_token: '[e~[' };
  return {};
}

/** HF's template choice from tokenizer_config.json `chat_template` (a string or a list of named templates). */
function templateFromConfig(value: unknown, wantTools: boolean): string | null {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const named = new Map<string, string>();
    for (const t of value) {
      const e = t as { name?: unknown; template?: unknown };
      if (typeof e.name === 'string' && typeof e.template === 'string') named.set(e.name, e.template);
    }
    return (wantTools ? named.get('tool_use') : undefined) ?? named.get('default') ?? null;
  }
  return null;
}

/** Private-use brackets of placeholders standing in for numbers JS would print unlike Python. */
const PH_OPEN = '\uE000';
const PH_CLOSE = '\uE001';

/**
 * Replaces values @huggingface/jinja would print unlike Python (floats such as `1.0` or `1e-05`, big ints) by
 * placeholder strings, remembered in `table`. After rendering, {@link restorePythonNumbers} writes Python's
 * spelling back, whether the template printed the value, `tojson`-ed it, or `tojson(ensure_ascii=True)`-ed it.
 * NOTE: a template that compares or does arithmetic on such a number sees a string (no chat template we serve does).
 */
function withPythonNumbers(v: unknown, table: string[]): unknown {
  const placeholder = (repr: string): string => {
    table.push(repr);
    return `${PH_OPEN}${table.length - 1}${PH_CLOSE}`;
  };
  if (v instanceof PyFloat) {
    const repr = pyFloatRepr(v.value);
    return repr === String(v.value) ? v.value : placeholder(repr);
  }
  if (typeof v === 'bigint') return placeholder(v.toString());
  if (typeof v === 'number' && !Number.isInteger(v)) {
    const repr = pyFloatRepr(v);
    return repr === String(v) ? v : placeholder(repr);
  }
  if (Array.isArray(v)) return v.map((x) => withPythonNumbers(x, table));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = withPythonNumbers(x, table);
    return out;
  }
  return v;
}

function restorePythonNumbers(text: string, table: string[]): string {
  if (table.length === 0) return text;
  return text
    .replace(/"\uE000(\d+)\uE001"/g, (_m, i: string) => table[Number(i)])
    .replace(/"\\ue000(\d+)\\ue001"/g, (_m, i: string) => table[Number(i)])
    .replace(/\uE000(\d+)\uE001/g, (_m, i: string) => table[Number(i)]);
}

/**
 * Renders a chat template the way HF `apply_chat_template(tokenize=False)` does (trim_blocks, lstrip_blocks,
 * `tojson` without HTML escaping, `raise_exception`), through @huggingface/jinja plus the number fix-up above.
 * @param template a compiled template
 * @param context variables (messages, tools, add_generation_prompt, special tokens, kwargs); PyJson allowed
 * @throws InvalidRequestError when the template raises (e.g. `raise_exception`) or fails
 */
export function renderJinjaChatTemplate(template: Template, context: Record<string, unknown>): string {
  const table: string[] = [];
  const ctx = withPythonNumbers(context, table) as Record<string, unknown>;
  return restorePythonNumbers(template.render(ctx), table);
}

function asObject(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

/**
 * SGLang's `Tool.model_dump()`: `{type, function: {description, name, parameters, strict}}` in that key order
 * (absent description / parameters → null, strict → false), as the chat template receives `tools`.
 * @param tool one entry of the request's `tools`
 * @param index its position (for the error's field path)
 * @throws InvalidRequestError (param `tools[index]`) when it is not an object with `function.name` a string
 */
export function dumpTool(tool: unknown, index: number): { type: string; function: Record<string, unknown> } {
  const t = asObject(tool);
  const fn = t ? asObject(t.function) : null;
  if (!t || !fn || typeof fn.name !== 'string') {
    throw new InvalidRequestError(`tools[${index}] must be {"type": "function", "function": {"name": …}}`, `tools[${index}]`);
  }
  return {
    type: typeof t.type === 'string' ? t.type : 'function',
    function: { description: fn.description ?? null, name: fn.name, parameters: fn.parameters ?? null, strict: fn.strict ?? false },
  };
}

const MESSAGE_FIELDS = ['role', 'content', 'reasoning_content', 'name', 'tool_call_id', 'tool_calls'];

/** Parses one assistant history call's arguments string into an object (SGLang 400s otherwise). */
function decodeArguments(args: unknown, where: string): unknown {
  if (typeof args !== 'string') return args;
  let v: PyJson;
  try {
    v = pyJsonLoads(args);
  } catch {
    throw new InvalidRequestError('Assistant tool call function.arguments must be valid JSON.', where);
  }
  if (asObject(v) === null || v instanceof PyFloat) throw new InvalidRequestError('Assistant tool call function.arguments must be a JSON object.', where);
  return v;
}

/** `model_dump()` of one message: known fields only, tool-call arguments decoded, nested nulls kept. */
function dumpMessage(m: unknown, i: number): Record<string, unknown> {
  const msg = asObject(m);
  if (!msg || typeof msg.role !== 'string') throw new InvalidRequestError(`messages[${i}] must be an object with a string 'role'`, `messages[${i}]`);
  const out: Record<string, unknown> = {};
  for (const k of MESSAGE_FIELDS) if (k in msg) out[k] = msg[k];
  if (msg.role === 'assistant' && Array.isArray(msg.tool_calls)) {
    out.tool_calls = msg.tool_calls.map((c, j) => {
      const call = asObject(c) ?? {};
      const fn = asObject(call.function) ?? {};
      return {
        id: call.id ?? null,
        index: call.index ?? null,
        type: call.type ?? 'function',
        function: { name: fn.name ?? null, arguments: decodeArguments(fn.arguments, `messages[${i}].tool_calls[${j}].function.arguments`) },
      };
    });
  }
  return out;
}

/** Text parts of a content list (`type` text / input_text), as SGLang collects them. */
function textParts(content: unknown[]): string[] {
  const out: string[] = [];
  for (const part of content) {
    const p = asObject(part);
    if (p && (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string') out.push(p.text);
  }
  return out;
}

/**
 * `process_content_for_template_format`: null-valued keys removed, content parts flattened (`string` format) or
 * reduced to text parts (`openai` format). NOTE: SGLang's later flattening of tool-message parts
 * (`normalize_tool_content`, April 2026) postdates v0.5.10 and is not applied.
 */
function prepareContent(msg: Record<string, unknown>, format: TemplateContentFormat): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(msg)) if (v !== null && v !== undefined) out[k] = v;
  if (Array.isArray(out.content)) {
    if (format === 'string') out.content = textParts(out.content).join(' ');
    else out.content = textParts(out.content).map((text) => ({ type: 'text', text }));
  }
  return out;
}

/**
 * Builds chat prompts for one served model. Construct once at startup ({@link ChatPromptBuilder.fromModelDir});
 * `build` is pure per request.
 */
export class ChatPromptBuilder {
  private readonly template: Template | null;
  private readonly contentFormat: TemplateContentFormat;

  /**
   * @param kind `jinja` (HF template) or `dsv32` (DeepSeek-V3.2 encoder)
   * @param templateSource the Jinja source (jinja only; null = none available, `build` then throws)
   * @param specialTokens bos_token, eos_token, … passed to the template
   */
  constructor(
    readonly kind: PromptBuilderKind,
    readonly templateSource: string | null,
    private readonly specialTokens: Record<string, unknown> = {},
  ) {
    this.template = kind === 'jinja' && templateSource !== null ? new Template(templateSource) : null;
    this.contentFormat = templateSource !== null ? detectTemplateContentFormat(templateSource) : 'string';
  }

  /**
   * The prompt builder SGLang would use for a checkpoint directory: the DeepSeek-V3.2 encoder when the tool-call
   * parser is `deepseekv32`, or when the architecture is DeepSeek-V3.x and there is no chat template; otherwise
   * `--chat-template FILE`, else `chat_template.jinja`, else tokenizer_config.json `chat_template`.
   * @param modelDir checkpoint directory (config.json, optional tokenizer_config.json / chat_template.jinja)
   * @throws ModelLoadError when a named or present template file cannot be read
   */
  static fromModelDir(modelDir: string, options: PromptBuilderOptions = {}): ChatPromptBuilder {
    const config = readJson(join(modelDir, 'config.json')) ?? {};
    const architectures = options.architectures ?? (Array.isArray(config.architectures) ? (config.architectures as string[]) : []);
    const tokConfig = readJson(join(modelDir, 'tokenizer_config.json')) ?? {};
    const special: Record<string, unknown> = { ...familyTokens(architectures) };
    for (const k of SPECIAL_TOKEN_KEYS) {
      const t = tokenText(tokConfig[k]);
      if (t !== null) special[k] = t;
    }
    if (Array.isArray(tokConfig.additional_special_tokens)) {
      special.additional_special_tokens = tokConfig.additional_special_tokens.map(tokenText).filter((t) => t !== null);
    }

    let source: string | null = null;
    if (options.chatTemplate) {
      if (!existsSync(options.chatTemplate)) throw new ModelLoadError(`--chat-template: file not found: ${options.chatTemplate}`, { file: options.chatTemplate });
      source = readFileSync(options.chatTemplate, 'utf8').replace(/^\n+|\n+$/g, '').replaceAll('\\n', '\n');
    } else if (existsSync(join(modelDir, 'chat_template.jinja'))) {
      source = readFileSync(join(modelDir, 'chat_template.jinja'), 'utf8');
    } else {
      source = templateFromConfig(tokConfig.chat_template, false);
    }

    const arch = architectures[0] ?? '';
    if (options.toolCallParser === 'deepseekv32' || (arch.includes('DeepseekV3') && source === null)) {
      return new ChatPromptBuilder('dsv32', null, special);
    }
    return new ChatPromptBuilder('jinja', source, special);
  }

  /**
   * The prompt for one chat request.
   * @param request the request JSON (fields of {@link ChatRequestLike}; others ignored)
   * @param options `rawBody`: the request's raw JSON text, re-read losslessly (only when the request has tools or
   *   chat_template_kwargs) so tool schemas keep Python's float spelling (`1.0`); without it numbers are as
   *   JSON.parse left them
   * @throws InvalidRequestError for SGLang's 400 cases (empty messages, tool_choice without tools or naming an
   *   unknown tool, tool-call arguments that are not a JSON object, template errors, encoder errors)
   */
  build(request: ChatRequestLike, options: { rawBody?: string } = {}): BuiltPrompt {
    const prep = this.prepare(request, options);
    if (prep.kind === 'dsv32') {
      const encoded = encodeMessagesDsv32(prep.messages as Dsv32Message[], prep.thinking ? 'thinking' : 'chat');
      return prep.prefix !== null ? { text: encoded + prep.prefix, segments: [encoded, prep.prefix] } : { text: encoded, segments: [encoded] };
    }
    if (this.template === null) throw new InvalidRequestError('This model has no chat template; use /generate or pass --chat-template.', 'messages');
    let rendered: string;
    try {
      rendered = renderJinjaChatTemplate(this.template, prep.context);
    } catch {
      // Some templates want bare function objects instead of the OpenAI wrapper (SGLang retries once).
      const tools = prep.context.tools as unknown[] | null;
      const flat = tools ? tools.map((t) => asObject(t)?.function ?? t) : null;
      try {
        rendered = renderJinjaChatTemplate(this.template, { ...prep.context, tools: flat });
      } catch (err) {
        throw new InvalidRequestError((err as Error).message, 'messages', { cause: err });
      }
    }
    const text = rendered + (prep.prefix ?? '');
    return { text, segments: [text] };
  }

  /**
   * SGLang's preprocessing of a request, without rendering: for the Jinja path the template variables, for the
   * DeepSeek-V3.2 path the encoder's messages. Exposed for debugging and for cross-checks against Python jinja2.
   * @throws InvalidRequestError as {@link build}
   */
  prepare(request: ChatRequestLike, options: { rawBody?: string } = {}): PreparedChat {
    let tools = request.tools;
    let kwargs = request.chat_template_kwargs ?? null;
    // the lossless re-read only when there is something to keep (it builds strings a character at a time: a 30 MB
    // message body would hold the caller's thread for seconds)
    if (options.rawBody !== undefined && (tools != null || kwargs != null)) {
      try {
        const raw = asObject(pyJsonLoads(options.rawBody));
        if (raw) {
          if ('tools' in raw) tools = raw.tools;
          if ('chat_template_kwargs' in raw) kwargs = asObject(raw.chat_template_kwargs);
        }
      } catch {
        // keep the parsed values
      }
    }
    const toolList = Array.isArray(tools) ? tools : [];
    const choice = request.tool_choice ?? (toolList.length > 0 ? 'auto' : 'none');
    validateRequest(request.messages, toolList, choice);
    const dumpedTools = toolList.map(dumpTool);
    const dumped = (request.messages as unknown[]).map(dumpMessage);
    for (const m of dumped) if (m.content === null || m.content === undefined) m.content = '';
    const continueFinal = request.continue_final_message === true;

    if (this.kind === 'dsv32') {
      const { rest, prefix } = splitFinalAssistant(dumped.map((m) => prepareContent(m, 'string')), continueFinal);
      const messages = rest;
      if (messages.length === 0 || messages[0].role !== 'system') messages.unshift({ role: 'system', content: '' });
      // tool_choice "none": no tools in the prompt (the official DeepSeek API's behaviour, so no DSML reaches content;
      // SGLang v0.5.10 still renders them — a deliberate difference, README "Differences from SGLang").
      if (dumpedTools.length > 0 && choice !== 'none') messages[0] = { ...messages[0], tools: dumpedTools };
      return { kind: 'dsv32', messages, thinking: Boolean(kwargs?.thinking), prefix };
    }

    const { rest, prefix } = splitFinalAssistant(dumped.map((m) => prepareContent(m, this.contentFormat)), continueFinal);
    let renderTools: unknown[] | null = null;
    if (dumpedTools.length > 0 && choice !== 'none') {
      const named = asObject(asObject(choice)?.function)?.name;
      renderTools = typeof named === 'string' ? dumpedTools.filter((t) => t.function.name === named) : dumpedTools;
    }
    const extra: Record<string, unknown> = {};
    if (request.reasoning_effort !== undefined && request.reasoning_effort !== null) extra.reasoning_effort = request.reasoning_effort;
    Object.assign(extra, kwargs ?? {});
    const context = { ...this.specialTokens, messages: rest, tools: renderTools, documents: null, add_generation_prompt: true, ...extra };
    return { kind: 'jinja', context, prefix };
  }
}

/** `continue_final_message`: a final assistant message with string content becomes a raw prompt suffix. */
function splitFinalAssistant(
  messages: Record<string, unknown>[],
  continueFinal: boolean,
): { rest: Record<string, unknown>[]; prefix: string | null } {
  const last = messages[messages.length - 1];
  if (continueFinal && last !== undefined && last.role === 'assistant' && typeof last.content === 'string') {
    return { rest: messages.slice(0, -1), prefix: last.content };
  }
  return { rest: messages, prefix: null };
}

/**
 * SGLang's `_validate_request` checks that concern prompts.
 * @throws InvalidRequestError with SGLang's messages
 */
function validateRequest(messages: unknown, tools: unknown[], toolChoice: unknown): void {
  if (!Array.isArray(messages)) throw new InvalidRequestError(`messages: Input should be a valid list (a list of message objects), got ${messages === null ? 'null' : typeof messages}`, 'messages');
  if (messages.length === 0) throw new InvalidRequestError('Messages cannot be empty.', 'messages');
  if (typeof toolChoice === 'string' && toolChoice.toLowerCase() === 'required' && tools.length === 0) {
    throw new InvalidRequestError('Tools cannot be empty if tool choice is set to required.', 'tool_choice');
  }
  if (toolChoice !== null && typeof toolChoice === 'object') {
    if (tools.length === 0) throw new InvalidRequestError('Tools cannot be empty if tool choice is set to a specific tool.', 'tool_choice');
    const name = asObject(asObject(toolChoice)?.function)?.name;
    const exists = tools.some((t) => asObject(asObject(t)?.function)?.name === name);
    if (!exists) throw new InvalidRequestError(`Tool '${String(name)}' not found in tools list.`, 'tool_choice');
  }
  tools.forEach((t, i) => {
    const params = asObject(asObject(t)?.function)?.parameters;
    if (params !== undefined && params !== null && asObject(params) === null && params !== true && params !== false) {
      throw new InvalidRequestError(`Tool ${i} function has invalid 'parameters' schema: not an object`, `tools[${i}].function.parameters`);
    }
  });
}

// Chat prompt construction for serving_chat: a small interface the chat handler calls, with a plain Jinja
// implementation (the model directory's template through @huggingface/jinja, generation prompt on, BOS as
// text) used until/unless the tokenizer/ ChatPromptBuilder (templates + DeepSeek-V3.2 encoder) is wired in.
import { readFileSync } from 'node:fs';
import { Template } from '@huggingface/jinja';
import { InvalidRequestError, ModelLoadError } from '../common/index.js';
import type { ChatPromptBuilder, ChatRequestLike } from '../tokenizer/index.js';

/** A rendered chat prompt: text segments to tokenize without added special tokens, then concatenate. */
export interface ChatPrompt {
  readonly text: string;
  readonly segments: readonly string[];
}

/** Builds the prompt of a chat request (the request as parsed from the wire, snake_case). */
export interface ChatPromptSource {
  /**
   * @param request the chat request body (messages, tools, tool_choice, chat_template_kwargs, ...)
   * @param rawBody the HTTP body text (lets an implementation recover number spellings)
   * @throws InvalidRequestError when the template rejects the conversation
   */
  build(request: Record<string, unknown>, rawBody?: string): ChatPrompt;
}

/**
 * Jinja chat template renderer (transformers `apply_chat_template` semantics: `messages`, `tools`,
 * `add_generation_prompt=true`, `bos_token`/`eos_token`, plus `chat_template_kwargs`).
 */
export class JinjaChatPrompt implements ChatPromptSource {
  private readonly template: Template;

  /**
   * @param source template text
   * @param specialTokens bos/eos token strings the template may print
   * @throws ModelLoadError when the template does not parse
   */
  constructor(source: string, private readonly specialTokens: { bosToken: string | null; eosToken: string | null }) {
    try {
      this.template = new Template(source);
    } catch (err) {
      throw new ModelLoadError(`chat template does not parse: ${(err as Error).message}`, {}, { cause: err });
    }
  }

  /**
   * Reads a template file (--chat-template).
   * @throws ModelLoadError when unreadable or unparsable
   */
  static fromFile(path: string, specialTokens: { bosToken: string | null; eosToken: string | null }): JinjaChatPrompt {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ModelLoadError(`cannot read chat template ${path}: ${(err as Error).message}`, { file: path }, { cause: err });
    }
    return new JinjaChatPrompt(text, specialTokens);
  }

  build(request: Record<string, unknown>): ChatPrompt {
    const messages = request.messages;
    if (!Array.isArray(messages)) throw new InvalidRequestError(`messages: Input should be a valid list (a list of message objects), got ${messages === null ? 'null' : typeof messages}`, 'messages');
    if (messages.length === 0) throw new InvalidRequestError('Messages cannot be empty.');
    const kwargs = (request.chat_template_kwargs as Record<string, unknown> | null | undefined) ?? {};
    const toolChoice = request.tool_choice;
    const tools = toolChoice === 'none' ? undefined : (request.tools as unknown[] | null | undefined) ?? undefined;
    let text: string;
    try {
      text = this.template.render({
        ...kwargs,
        messages,
        ...(tools && tools.length ? { tools } : {}),
        add_generation_prompt: true,
        bos_token: this.specialTokens.bosToken ?? '',
        eos_token: this.specialTokens.eosToken ?? '',
      });
    } catch (err) {
      if (err instanceof InvalidRequestError) throw err;
      throw new InvalidRequestError(`chat template error: ${(err as Error).message}`, 'messages', { cause: err });
    }
    return { text, segments: [text] };
  }
}

/** Prompt construction by tokenizer/'s ChatPromptBuilder (SGLang preprocessing, HF template or DeepSeek-V3.2 encoder). */
export class BuilderChatPrompt implements ChatPromptSource {
  /** @param builder built once at start-up (ChatPromptBuilder.fromModelDir) */
  constructor(private readonly builder: ChatPromptBuilder) {}

  build(request: Record<string, unknown>, rawBody?: string): ChatPrompt {
    const r = this.builder.build(request as ChatRequestLike, rawBody !== undefined ? { rawBody } : {});
    return { text: r.text, segments: r.segments };
  }
}

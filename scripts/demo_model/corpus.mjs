// Writes the demo models' synthetic training corpus as token ids (dev-time only; run by train.py, never needed to
// install, run or test tsglang).
//
//   node scripts/demo_model/corpus.mjs --family minimax-m2|deepseek-v32 --n N --seed S --out FILE.jsonl
//
// Each line is {"kind", "prompt": [ids], "completion": [ids]}. The prompt is rendered by tsglang's own serving code
// (ChatPromptBuilder: the MiniMax-M2 chat template of the embedded model, or the DeepSeek-V3.2 encoder) and
// tokenized by tsglang's tokenizer (the DeepSeek-V3 BPE plus the family's special tokens), exactly as the server
// does for a chat request; the completion is the assistant turn in the family's output format (thinking section,
// content, MiniMax XML or DeepSeek-V3.2 DSML tool calls, end-of-sequence token) that the family's reasoning and tool
// parsers read back. Deterministic given --seed. Needs a built tree (npx tsc -p .).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ChatPromptBuilder, loadTokenizer, tinyTokenizerSpec, writeTinyTokenizer } from '../../dist/src/tokenizer/index.js';
import { makeRng, makeSample } from './corpus_data.mjs';

const ARCHITECTURES = { 'minimax-m2': 'MiniMaxM2ForCausalLM', 'deepseek-v32': 'DeepseekV32ForCausalLM' };

/** The assistant turn in MiniMax-M2's output format (after the prompt's `]~b]ai\n<think>\n`). */
function miniMaxCompletion(s) {
  let text = `${s.thought}\n</think>\n\n${s.content}`;
  if (s.toolCalls) {
    text += '<minimax:tool_call>\n';
    for (const c of s.toolCalls) {
      text += `<invoke name="${c.name}">\n`;
      for (const [k, v] of Object.entries(c.arguments)) text += `<parameter name="${k}">${v}</parameter>\n`;
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
      text += `<｜DSML｜invoke name="${c.name}">\n`;
      for (const [k, v] of Object.entries(c.arguments)) text += `<｜DSML｜parameter name="${k}" string="true">${v}</｜DSML｜parameter>\n`;
      text += '</｜DSML｜invoke>\n';
    }
    text += '</｜DSML｜function_calls>';
  }
  return text + '<｜end▁of▁sentence｜>';
}

function main() {
  const { values } = parseArgs({ options: { family: { type: 'string' }, n: { type: 'string', default: '20000' }, seed: { type: 'string', default: '0' }, out: { type: 'string' } } });
  const family = values.family;
  if (!(family in ARCHITECTURES) || !values.out) throw new Error('usage: corpus.mjs --family minimax-m2|deepseek-v32 --n N --seed S --out FILE');
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-corpus-'));
  try {
    writeTinyTokenizer(dir, family);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: [ARCHITECTURES[family]], ...tinyTokenizerSpec(family).configOverrides }));
    const builder = ChatPromptBuilder.fromModelDir(dir);
    const tok = loadTokenizer(dir);
    const rng = makeRng(Number(values.seed));
    const lines = [];
    for (let i = 0; i < Number(values.n); i++) {
      const s = makeSample(rng);
      const thinking = family === 'minimax-m2' || rng.next() < 0.5;
      const request = { messages: s.messages, ...(s.tools ? { tools: s.tools } : {}), ...(family === 'deepseek-v32' ? { chat_template_kwargs: { thinking } } : {}) };
      const built = builder.build(request, { rawBody: JSON.stringify(request) });
      const prompt = built.segments.flatMap((seg) => tok.encode(seg, { addSpecialTokens: false }));
      const completionText = family === 'minimax-m2' ? miniMaxCompletion(s) : deepseekCompletion(s, thinking);
      const completion = tok.encode(completionText, { addSpecialTokens: false });
      lines.push(JSON.stringify({ kind: s.kind, prompt, completion }));
    }
    writeFileSync(values.out, lines.join('\n') + '\n');
    process.stderr.write(`corpus: ${lines.length} samples of ${family} -> ${values.out}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main();

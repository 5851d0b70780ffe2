// The accuracy evals against a fake server with scripted answers: GSM8K on the real test set (answer
// extraction edge cases with known correct / invalid counts), MMLU and GPQA on small files in the published
// formats, GPQA's shuffling against python3's random.Random.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  INVALID_ANSWER,
  gsm8kAnswerValue,
  loadGsm8k,
  runGsm8k,
  runMmlu,
  loadGpqa,
  gpqaExamples,
  gpqaChoices,
  runGpqa,
  extractGpqaAnswer,
  parseCsv,
  pandasCellTexts,
  type Clock,
} from '../src/bench/index.js';
import { DATA_DIR, NEEDS_SHARED } from './helpers/paths.js';
import { startFakeServer, type SeenRequest } from './bench_fake_server.js';

const TMP = mkdtempSync(join(tmpdir(), 'tsglang-evals-'));
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));
const HAS_PY = spawnSync('python3', ['-c', 'import sys']).status === 0;

/** A clock returning the given readings in turn (then the last one). */
function ticking(readings: number[]): Clock {
  let i = 0;
  return { now: () => readings[Math.min(i++, readings.length - 1)], sleep: async () => {} };
}

function reply(path: string, text: string, tokens: number): { at: number; line: string }[] {
  const body =
    path === '/generate'
      ? { text, meta_info: { completion_tokens: tokens } }
      : path === '/v1/completions'
        ? { choices: [{ text }], usage: { completion_tokens: tokens } }
        : { choices: [{ message: { role: 'assistant', content: text } }], usage: { completion_tokens: tokens } };
  return [{ at: 0, line: JSON.stringify(body) }];
}

test('GSM8K answer extraction: last integer literal, commas, leading zeros, decimals, signs', () => {
  assert.equal(gsm8kAnswerValue('The answer is 18.'), '18');
  assert.equal(gsm8kAnswerValue('She makes $1,234,567 a year'), '1234567');
  assert.equal(gsm8kAnswerValue('12 apples and 34 pears'), '34');
  assert.equal(gsm8kAnswerValue('#### 72'), '72');
  assert.equal(gsm8kAnswerValue('-5 degrees'), '5');
  assert.equal(gsm8kAnswerValue('costs 18.00 dollars'), '0');
  assert.equal(gsm8kAnswerValue('3.5'), '5');
  assert.equal(gsm8kAnswerValue('00'), '0');
  assert.equal(gsm8kAnswerValue('0'), '0');
  assert.equal(gsm8kAnswerValue('answer 007'), INVALID_ANSWER);
  assert.equal(gsm8kAnswerValue('no idea'), INVALID_ANSWER);
  assert.equal(gsm8kAnswerValue(''), INVALID_ANSWER);
  assert.equal(gsm8kAnswerValue('12345678901234567890'), '12345678901234567890');
  assert.equal(gsm8kAnswerValue('١٢'), INVALID_ANSWER); // Arabic-Indic digits: matched by \d, not a Python literal
});

test('GSM8K extraction agrees with SGLang get_answer_value in python3', { skip: HAS_PY ? false : 'python3 not available' }, () => {
  const cases = ['The answer is 18.', '1,000,000', '007', '00', '18.00', '-5', 'x', '١٢', '12٣', '٣', '5 then 0012', '0.5', '9,99'];
  const r = spawnSync('python3', ['-c', `
import re, ast, json, sys
def get_answer_value(s):
    s = s.replace(",", "")
    numbers = re.findall(r"\\d+", s)
    if len(numbers) < 1:
        return -9999999
    try:
        return ast.literal_eval(numbers[-1])
    except SyntaxError:
        return -9999999
print(json.dumps([str(get_answer_value(c)) for c in json.loads(sys.stdin.read())]))`], { input: JSON.stringify(cases), encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(cases.map(gsm8kAnswerValue), JSON.parse(r.stdout));
});

test('GSM8K on the real test set: prompts, scoring with known correct / invalid counts, printed lines', NEEDS_SHARED, async () => {
  const items = loadGsm8k(join(DATA_DIR, 'gsm8k', 'test.jsonl'));
  assert.equal(items.length, 1319);
  const labelOf = (i: number): string => items[i].answer.split('####').pop()!.trim().replace(/,/g, '');
  const index = new Map(items.map((it, i) => [it.question, i]));
  const withCommas = (s: string): string => s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  // category i % 8 → scripted answer; correct: 0, 1, 6, 7; invalid: 3, 4; wrong but valid: 2, 5
  const answerFor = (i: number): string => {
    const l = labelOf(i);
    switch (i % 8) {
      case 0: return ` Let me think. The answer is ${l}.`;
      case 1: return ` So she makes $${withCommas(l)} in total.`;
      case 2: return ` ${l} and then 3 more`;
      case 3: return ' I cannot tell.';
      case 4: return ` The answer is 0${l}.`;
      case 5: return ` That costs ${l}.00 dollars.`;
      case 6: return ` It is -${l}`;
      default: return ` Step one: 2 + 2.\n#### ${l}`;
    }
  };
  const server = await startFakeServer({
    script: (req: SeenRequest) => {
      const text = req.body.text as string;
      const q = text.slice(text.lastIndexOf('Question: ') + 'Question: '.length, -'\nAnswer:'.length);
      return reply(req.path, answerFor(index.get(q)!), 7);
    },
  });
  try {
    const r = await runGsm8k(
      items,
      { numShots: 5, numQuestions: 40, maxNewTokens: 512, parallel: 8, temperature: 0, root: server.url, api: 'generate', model: null, headers: {} },
      ticking([10, 12.5]),
    );
    assert.deepEqual(r.lines, ['Accuracy: 0.500', 'Invalid: 0.250', 'Latency: 2.500 s', 'Output throughput: 112.000 token/s']);
    assert.equal(server.seen.length, 40);
    const first = server.seen.find((s) => (s.body.text as string).endsWith(`Question: ${items[0].question}\nAnswer:`))!;
    const shots = items.slice(0, 5).map((it) => `Question: ${it.question}\nAnswer: ${it.answer}\n\n`).join('');
    assert.equal(first.body.text, shots + `Question: ${items[0].question}\nAnswer:`);
    assert.ok((first.body.text as string).startsWith('Question: Janet’s ducks lay 16 eggs per day.'));
    const sp = first.body.sampling_params as Record<string, unknown>;
    assert.deepEqual(sp.stop, ['Question', 'Assistant:', '<|separator|>']);
    assert.equal(sp.max_new_tokens, 512);
    assert.equal(sp.temperature, 0);
    assert.equal(sp.ignore_eos, false);
    assert.ok(r.dump.startsWith(`${'='.repeat(40)} 0 ${'='.repeat(40)}\n${shots}Question: ${items[0].question}\nAnswer: Let me think.`));
  } finally {
    await server.close();
  }
});

test('CSV reading follows pandas: quoted cells, NA strings, numeric columns', () => {
  const rows = parseCsv('a,"b, ""quoted""\nline",3\n\nNone,x,4\r\nq,,5.5\n');
  assert.deepEqual(rows, [['a', 'b, "quoted"\nline', '3'], ['None', 'x', '4'], ['q', '', '5.5']]);
  assert.deepEqual(pandasCellTexts(rows), [['a', 'b, "quoted"\nline', '3.0'], ['nan', 'x', '4.0'], ['q', 'nan', '5.5']]);
  assert.deepEqual(pandasCellTexts([['1', '007'], ['2', '3']]), [['1', '7'], ['2', '3']]);
});

function writeMmlu(dir: string): void {
  mkdirSync(join(dir, 'dev'), { recursive: true });
  mkdirSync(join(dir, 'test'), { recursive: true });
  const dev = (q: string, a: string): string => `${q},w,x,y,z,${a}\n`;
  writeFileSync(join(dir, 'dev', 'abstract_algebra_dev.csv'), [1, 2, 3, 4, 5, 6].map((i) => dev(`Dev question ${i}?`, 'ABCD'[i % 4])).join(''));
  writeFileSync(
    join(dir, 'test', 'abstract_algebra_test.csv'),
    '"Find the order of Z_4, that is, ""the group""?",2,4,8,16,B\nWhich is a field?,Z,Q,N,None,B\nIs 7 prime?,yes,no,maybe,unknown,A\n',
  );
  // long dev rows: five shots exceed 1536 cl100k tokens, so fewer shots are used
  const long = Array.from({ length: 300 }, (_, i) => `token${i}`).join(' ');
  writeFileSync(join(dir, 'dev', 'anatomy_dev.csv'), [1, 2, 3, 4, 5].map((i) => dev(`${long} ${i}`, 'A')).join(''));
  writeFileSync(join(dir, 'test', 'anatomy_test.csv'), 'Bone count?,206,100,50,10,A\nHeart chambers?,2,3,4,5,C\n');
  writeFileSync(join(dir, 'test', 'zoology_test.csv'), 'Unused?,a,b,c,d,A\n');
  writeFileSync(join(dir, 'dev', 'zoology_dev.csv'), 'Unused?,a,b,c,d,A\n');
}

test('MMLU: prompts as bench_sglang.py builds them, first-character scoring, per-subject lines', async () => {
  const dir = join(TMP, 'mmlu');
  writeMmlu(dir);
  // answers: algebra Q1 " B" (right), Q2 "c" (wrong: lower case), Q3 "\n A." (right after strip);
  // anatomy Q1 "" (wrong), Q2 " C" (right)
  const answers: Record<string, string> = { 'Find the order': ' B', 'Which is a field': 'c', 'Is 7 prime': '\n A.', 'Bone count': '', 'Heart chambers': ' C' };
  const server = await startFakeServer({
    script: (req) => {
      const text = req.body.text as string;
      const question = text.slice(text.lastIndexOf('\n\n') + 2);
      const key = Object.keys(answers).find((k) => question.startsWith(k))!;
      return reply(req.path, answers[key], 1);
    },
  });
  try {
    const r = await runMmlu(
      { ntrain: 5, nsub: 2, parallel: 4, dataDir: dir, root: server.url, api: 'generate', model: null, headers: {}, backend: 'srt' },
      ticking([0, 1.25]),
    );
    assert.deepEqual(r.lines, [
      'subject: abstract_algebra, #q:3, acc: 0.667',
      'subject: anatomy, #q:2, acc: 0.500',
      'Total latency: 1.250',
      'Average accuracy: 0.600',
    ]);
    assert.equal(server.seen.length, 5);
    const q1 = server.seen.map((s) => s.body.text as string).find((t) => t.includes('Find the order'))!;
    const shots = [1, 2, 3, 4, 5].map((i) => `Dev question ${i}?\nA. w\nB. x\nC. y\nD. z\nAnswer: ${'ABCD'[i % 4]}\n\n`).join('');
    assert.equal(
      q1,
      'The following are multiple choice questions (with answers) about abstract algebra.\n\n' +
        shots +
        'Find the order of Z_4, that is, "the group"?\nA. 2\nB. 4\nC. 8\nD. 16\nAnswer:',
    );
    const field = server.seen.map((s) => s.body.text as string).find((t) => t.includes('Which is a field'))!;
    assert.ok(field.endsWith('Which is a field?\nA. Z\nB. Q\nC. N\nD. nan\nAnswer:')); // pandas reads "None" as NaN
    const anatomy = server.seen.map((s) => s.body.text as string).find((t) => t.includes('Bone count'))!;
    assert.equal(anatomy.split('\nAnswer: A\n\n').length - 1, 2); // 5 shots > 1536 tokens → cut to 2
    const sp = server.seen[0].body.sampling_params as Record<string, unknown>;
    assert.equal(sp.max_new_tokens, 1);
    assert.equal(sp.temperature, 0);
    assert.equal(r.resultRecord, '{"task": "mmlu", "backend": "srt", "num_gpus": 1, "latency": 1.25, "accuracy": 0.6, "num_requests": 5, "other": {"nsub": 2, "parallel": 4}}');
  } finally {
    await server.close();
  }
});

function writeGpqa(path: string, n: number): void {
  const esc = (s: string): string => `"${s.replace(/"/g, '""')}"`;
  const lines = ['Pre-Revision Question,Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Subdomain'];
  for (let i = 0; i < n; i++) {
    const q = i === 1 ? `Question ${i}: which "value"\nspans, two lines?` : `Question ${i}: pick the right one.`;
    lines.push([esc('old'), esc(q), esc(`right ${i}`), esc(`wrong ${i}a`), esc(`wrong ${i}b`), esc(`wrong ${i}c`), 'Physics'].join(','));
  }
  writeFileSync(path, lines.join('\n') + '\n');
}

test('GPQA: choice order reproduces Python random.Random(0) (sample, then one permutation per example)', { skip: HAS_PY ? false : 'python3 not available' }, () => {
  const rows = Array.from({ length: 30 }, (_, i) => ({ question: `q${i}`, correct: `c${i}`, incorrect: [`a${i}`, `b${i}`, `d${i}`] as [string, string, string] }));
  for (const n of [null, 10, 30]) {
    const ours = gpqaExamples(rows, n).map((e) => [e.question, e.permutation]);
    const r = spawnSync('python3', ['-c', `
import random, json
examples = [{"q": "q%d" % i} for i in range(30)]
rng = random.Random(0)
n = ${n === null ? 'None' : n}
if n:
    examples = rng.sample(examples, n)
print(json.dumps([[e["q"], rng.sample(range(4), 4)] for e in examples]))`], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(ours, JSON.parse(r.stdout), `num_examples ${n}`);
  }
});

test('GPQA: prompts, first "Answer: X" scoring (case-sensitive letter), run_eval lines, repeats', async () => {
  const csv = join(TMP, 'gpqa.csv');
  writeGpqa(csv, 8);
  const rows = loadGpqa(csv);
  assert.equal(rows.length, 8);
  assert.equal(rows[1].question, 'Question 1: which "value"\nspans, two lines?');
  // replies by question number i: correct letter for i % 4 == 0, 1; lowercase correct for 2; first match wrong for 3
  const server = await startFakeServer({
    script: (req) => {
      const content = (req.body.messages as { content: string }[])[0].content;
      const i = Number(/Question (\d+):/.exec(content)![1]);
      const letter = ['A', 'B', 'C', 'D'].find((L) => content.includes(`\n${L}) right ${i}`))!;
      const other = letter === 'A' ? 'B' : 'A';
      const text = [
        `Reasoning...\nAnswer: ${letter}`,
        `answer :  ${letter}\nDone`,
        `Answer: ${letter.toLowerCase()}`,
        `Answer: ${other}\nWait.\nAnswer: ${letter}`,
      ][i % 4];
      return reply(req.path, text, 10);
    },
  });
  try {
    const opts = {
      numExamples: null,
      numThreads: 3,
      repeat: 1,
      baseUrl: `${server.url}/v1`,
      headers: {},
      sampler: { model: 'm', maxTokens: 2048, temperature: 0, topP: 1, reasoningEffort: null, extraBody: { chat_template_kwargs: { thinking: true } }, api: 'chat' as const },
    };
    const r = await runGpqa(rows, opts, ticking([0, 4]), () => {});
    assert.deepEqual(r.lines, ['Total latency: 4.000 s', 'Score: 0.500', 'Output throughput: 20.000 token/s']);
    const ex = gpqaExamples(rows, null)[0];
    const { choices } = gpqaChoices(ex);
    const req0 = server.seen.find((s) => (s.body.messages as { content: string }[])[0].content.includes('Question 0:'))!;
    assert.deepEqual(req0.body.messages, [
      {
        role: 'user',
        content:
          "Answer the following multiple choice question. The last line of your response should be of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step before answering.\n\n" +
          `Question 0: pick the right one.\n\nA) ${choices[0]}\nB) ${choices[1]}\nC) ${choices[2]}\nD) ${choices[3]}`,
      },
    ]);
    assert.equal(req0.body.max_tokens, 2048);
    assert.equal(req0.body.temperature, 0);
    assert.equal(req0.body.top_p, 1);
    assert.deepEqual(req0.body.chat_template_kwargs, { thinking: true });
    assert.deepEqual(Object.keys(r.metrics), ['chars', 'chars:std', 'score:std', 'score', 'latency', 'output_throughput']);

    const rep = await runGpqa(rows, { ...opts, repeat: 2 }, ticking([0, 0, 3, 5]), () => {});
    assert.deepEqual(rep.lines, ['====================', 'Repeat: 2, mean: 0.500', "Scores: ['0.500', '0.500']", 'Mean latency: 4.000 s', '====================', 'Output throughput: 20.000 token/s']);
  } finally {
    await server.close();
  }
  assert.equal(extractGpqaAnswer('The Answer:C'), 'C');
  assert.equal(extractGpqaAnswer('no letter'), null);
});

test('eval CLI: offline without data names the file to provide', { skip: process.env.TSGLANG_ONLINE ? 'online machine' : false }, () => {
  const r = spawnSync(process.execPath, [join(process.cwd(), 'bin', 'tsglang.js'), 'eval', 'gpqa', '--data-path', join(TMP, 'missing.csv'), '--port', '1'], {
    encoding: 'utf8',
    env: { ...process.env, HOME: TMP },
    timeout: 60_000,
  });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /GPQA diamond CSV not found: .*missing\.csv does not exist and (the network is unreachable from this machine, so https:\/\/openaipublic\.blob\.core\.windows\.net\/simple-evals\/gpqa_diamond\.csv could not be downloaded|the download from https:\/\/openaipublic\.blob\.core\.windows\.net\/simple-evals\/gpqa_diamond\.csv failed) .* Give --data-path pointing to a local gpqa_diamond\.csv \(from https:/);
  void readFileSync;
});

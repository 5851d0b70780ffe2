// bench-serving datasets (ShareGPT file → random / sharegpt, generated-shared-prefix), the streaming
// ShareGPT reader, and the CLI's tokenizer adapter over a real tokenizer (the embedded tiny model's).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  DATA_URLS,
  describeDownloadFailure,
  NumpyRandomState,
  PythonRandom,
  forEachJsonArrayElement,
  getDataset,
  type DatasetOptions,
  type DatasetIo,
} from '../src/bench/index.js';
import { benchTokenizerOf, requestHeaders, resolveTokenizerDir } from '../src/cli/bench_serving.js';
import { writeTinyModelWithTokenizer } from '../src/cli/embedded_model.js';
import { loadTokenizer } from '../src/tokenizer/index.js';
import { fakeTokenizer } from './bench_fake_server.js';

const TMP = mkdtempSync(join(tmpdir(), 'tsglang-ds-'));
process.on('exit', () => rmSync(TMP, { recursive: true, force: true }));
const HAS_PY = spawnSync('python3', ['-c', 'import sys']).status === 0;

const BASE: DatasetOptions = {
  datasetName: 'random',
  datasetPath: '',
  numPrompts: 5,
  randomInputLen: 12,
  randomOutputLen: 6,
  randomRangeRatio: 0,
  sharegptOutputLen: null,
  sharegptContextLen: null,
  applyChatTemplate: false,
  promptSuffix: '',
  tokenizePrompt: false,
  gspNumGroups: 2,
  gspPromptsPerGroup: 3,
  gspSystemPromptLen: 10,
  gspQuestionLen: 4,
  gspOutputLen: 5,
  gspRangeRatio: 1,
  gspOrdered: false,
};

function io(printed: string[] = []): DatasetIo {
  return { fetchShareGpt: async () => null, print: (l) => printed.push(l), warn: () => {} };
}

function writeShareGpt(path: string, n: number): void {
  const rows = [];
  for (let i = 0; i < n; i++) {
    const words = Array.from({ length: (i % 4) + 2 }, (_, j) => `t${100 + i * 10 + j}`).join(' ');
    const conv = i === 3 ? [{ from: 'human', value: 'only one turn' }] : [{ from: 'human', value: words }, { from: 'gpt', value: `t5 t6 t7 ${'t8 '.repeat(i)}` }];
    rows.push(i % 2 === 0 ? { id: `c${i}`, conversations: conv } : { id: `c${i}`, conversation: conv });
  }
  writeFileSync(path, JSON.stringify(rows, null, 1));
}

test('random with a ShareGPT file: Python-shuffled conversations cut or repeated to the drawn lengths', { skip: HAS_PY ? false : 'python3 not available' }, async () => {
  const path = join(TMP, 'sharegpt.json');
  writeShareGpt(path, 12);
  const tok = fakeTokenizer();
  const rows = await getDataset({ ...BASE, datasetPath: path }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, io());
  const py = spawnSync('python3', ['-c', `
import json, random, numpy as np
random.seed(1); np.random.seed(1)
data = json.load(open(${JSON.stringify(path)}))
data = [d for d in data if len(d.get("conversations", d.get("conversation", []))) >= 2]
data = [(d.get("conversations", d.get("conversation"))[0]["value"], d.get("conversations", d.get("conversation"))[1]["value"]) for d in data]
ins = np.random.randint(1, 13, 5).tolist(); outs = np.random.randint(1, 7, 5).tolist()
random.shuffle(data)
res = []
for p, _ in data:
    i = len(res)
    if i == 5: break
    ids = [0] + [int(w[1:]) for w in p.split()]
    ids = ids[:ins[i]] if len(ids) > ins[i] else (ids * ((ins[i] + len(ids) - 1) // len(ids)))[:ins[i]]
    res.append([" ".join("t%d" % x for x in ids), ins[i], outs[i]])
print(json.dumps(res))`], { encoding: 'utf8' });
  assert.equal(py.status, 0, py.stderr);
  assert.deepEqual(rows.map((r) => [r.prompt, r.promptLen, r.outputLen]), JSON.parse(py.stdout));
});

test('sharegpt: prompt and completion lengths from the tokenizer, short rows pruned, context cap, fixed output', async () => {
  const path = join(TMP, 'sharegpt2.json');
  writeShareGpt(path, 12);
  const tok = fakeTokenizer();
  const printed: string[] = [];
  const rows = await getDataset({ ...BASE, datasetName: 'sharegpt', datasetPath: path, numPrompts: 100 }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, io(printed));
  // 11 usable conversations (one has a single turn); every prompt has ≥ 2 words + BOS
  assert.equal(rows.length, 11);
  for (const r of rows) {
    assert.equal(r.promptLen, tok.encode(r.prompt as string, true).length);
    assert.ok(r.outputLen >= 4);
  }
  assert.deepEqual(printed, [`#Input tokens: ${rows.reduce((s, r) => s + r.promptLen, 0)}`, `#Output tokens: ${rows.reduce((s, r) => s + r.outputLen, 0)}`]);
  const capped = await getDataset({ ...BASE, datasetName: 'sharegpt', datasetPath: path, numPrompts: 100, sharegptContextLen: 8 }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, io());
  assert.ok(capped.length < rows.length && capped.every((r) => r.promptLen + r.outputLen <= 8));
  const fixed = await getDataset({ ...BASE, datasetName: 'sharegpt', datasetPath: path, numPrompts: 3, sharegptOutputLen: 9, applyChatTemplate: true }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, io());
  assert.deepEqual(fixed.map((r) => r.outputLen), [9, 9, 9]);
  assert.ok(fixed.every((r) => (r.prompt as string).startsWith('<user> ') && (r.prompt as string).endsWith(' <assistant>')));
  await assert.rejects(getDataset({ ...BASE, datasetName: 'sharegpt' }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, io()), /no ShareGPT file for --dataset-name sharegpt \(bench_serving's default\): the download failed\. Give --dataset-path .* or run offline with --dataset-name random/);
  // offline (issue 14): the message says the network is unreachable and names --dataset-path and --dataset-name random
  const offline = describeDownloadFailure(DATA_URLS.sharegpt, ['https://huggingface.co/x: getaddrinfo ENOTFOUND huggingface.co']);
  assert.match(offline, /^the network is unreachable from this machine, so https:\/\/huggingface\.co\/.* could not be downloaded \(.*ENOTFOUND/);
  assert.match(describeDownloadFailure('u', ['u: HTTP 404']), /^the download from u failed \(u: HTTP 404\)/);
  const warned: string[] = [];
  await assert.rejects(getDataset({ ...BASE, datasetName: 'sharegpt' }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, { ...io(), fetchFailure: () => offline }), /: the network is unreachable from this machine.*--dataset-path.*--dataset-name random/);
  await getDataset({ ...BASE, datasetName: 'random' }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, { ...io(), warn: (l) => warned.push(l), fetchFailure: () => offline });
  assert.match(warned.join('\n'), /No ShareGPT file for --dataset-name random: the network is unreachable .*random token ids/);
});

test('generated-shared-prefix: groups share a system prompt; lengths exact with range ratio 1', async () => {
  const tok = fakeTokenizer();
  const rows = await getDataset({ ...BASE, datasetName: 'generated-shared-prefix', gspOrdered: true }, tok, { np: new NumpyRandomState(1), py: new PythonRandom(1) }, io());
  assert.equal(rows.length, 6);
  const systems = rows.map((r) => (r.prompt as string).split('\n\n')[0]);
  assert.equal(systems[0], systems[1]);
  assert.equal(systems[1], systems[2]);
  assert.notEqual(systems[2], systems[3]);
  for (const r of rows) {
    const [sys, q] = (r.prompt as string).split('\n\n');
    assert.equal(sys.split(' ').length, 10);
    assert.equal(q.split(' ').length, 4);
    assert.equal(r.outputLen, 5);
    assert.equal(r.promptLen, 15); // BOS + 10 + 4
  }
});

test('the ShareGPT reader streams a large array across 1 MiB read boundaries', () => {
  const path = join(TMP, 'big.json');
  const items = Array.from({ length: 3000 }, (_, i) => ({ id: i, conversations: [{ from: 'human', value: `q${i} ${'x'.repeat(700)} "quoted" [bracket] {brace} é` }, { from: 'gpt', value: 'a' }] }));
  writeFileSync(path, '\ufeff' + JSON.stringify(items));
  const seen: number[] = [];
  forEachJsonArrayElement(path, (json) => seen.push((JSON.parse(json) as { id: number }).id));
  assert.deepEqual(seen, items.map((x) => x.id));
  writeFileSync(join(TMP, 'trunc.json'), JSON.stringify(items).slice(0, 5000));
  assert.throws(() => forEachJsonArrayElement(join(TMP, 'trunc.json'), () => {}), /truncated JSON array/);
});

test('CLI tokenizer adapter over the embedded tiny model: base vocab, encode / decode, chat prompt, sources', () => {
  const dir = join(TMP, 'tiny');
  writeTinyModelWithTokenizer('minimax-m2', dir);
  const tok = loadTokenizer(dir);
  const bt = benchTokenizerOf(tok, dir);
  assert.ok(bt.vocabSize > 0 && bt.vocabSize <= tok.vocabSize);
  assert.ok(!tok.isSpecialToken(bt.vocabSize - 1));
  const ids = bt.encode('Hello world, benchmark!', false);
  assert.equal(bt.decode(ids), 'Hello world, benchmark!');
  assert.equal(bt.hasChatTemplate, true);
  const prompt = bt.applyChatTemplate([{ role: 'user', content: 'hi there' }]);
  assert.ok(prompt.includes(']~b]user\nhi there[e~[\n'), prompt);
  assert.ok(prompt.endsWith(']~b]ai\n<think>\n'), prompt);
  assert.equal(resolveTokenizerDir({ tokenizer: null, model: 'some/name', serverTokenizerPath: dir }), dir);
  assert.equal(resolveTokenizerDir({ tokenizer: null, model: dir, serverTokenizerPath: null }), dir);
  assert.throws(() => resolveTokenizerDir({ tokenizer: join(TMP, 'nope'), model: dir, serverTokenizerPath: dir }), /--tokenizer .*nope: not a local directory/);
  assert.throws(() => resolveTokenizerDir({ tokenizer: null, model: 'x/y', serverTokenizerPath: null }), /give --tokenizer DIR/);
  assert.deepEqual(requestHeaders({ OPENAI_API_KEY: 'sk-1', API_KEY: 'raw' }, ['X-A=1', 'X-B = two']), { Authorization: 'Bearer sk-1', 'X-A': '1', 'X-B': 'two' });
  assert.deepEqual(requestHeaders({ API_KEY: 'raw' }, null), { Authorization: 'raw' });
  assert.throws(() => requestHeaders({}, ['bad']), /--header bad: expected KEY=VALUE/);
});

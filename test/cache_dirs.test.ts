// tsglang's cache directories come from config/ (readServerEnv, the only reader of the environment): the embedded
// default model and the downloaded bench/eval data both live under $TSGLANG_CACHE_DIR, else ~/.cache/tsglang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readServerEnv } from '../src/config/index.js';
import { dataCacheDir } from '../src/bench/index.js';

test('data cache: <cacheDir>/data, cacheDir from TSGLANG_CACHE_DIR, else HOME/.cache/tsglang', () => {
  assert.equal(dataCacheDir(readServerEnv({ TSGLANG_CACHE_DIR: '/srv/cache', HOME: '/home/u' }).cacheDir), '/srv/cache/data');
  assert.equal(dataCacheDir(readServerEnv({ HOME: '/home/u' }).cacheDir), '/home/u/.cache/tsglang/data');
  assert.equal(dataCacheDir(readServerEnv({ TSGLANG_CACHE_DIR: '', HOME: '/home/v' }).cacheDir), '/home/v/.cache/tsglang/data');
});

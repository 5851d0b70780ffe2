import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeDirs } from './fs_utils.js';

test('makeDirs creates missing levels, accepts an existing directory, and fails once on an uncreatable path', { timeout: 30_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-mkd-'));
  try {
    const deep = join(dir, 'a', 'b', 'c');
    makeDirs(deep);
    assert.ok(statSync(deep).isDirectory());
    makeDirs(deep); // already there: no error
    const file = join(dir, 'f');
    writeFileSync(file, 'x');
    assert.throws(() => makeDirs(join(file, 'sub')), (e: NodeJS.ErrnoException) => e.code === 'ENOTDIR' && e.message.includes(file));
    assert.throws(() => makeDirs(file), (e: NodeJS.ErrnoException) => e.code === 'EEXIST');
    // /proc refuses new entries with ENOENT: mkdirSync(..., { recursive: true }) spins forever on it (Node 20).
    if (existsSync('/proc/self')) {
      assert.throws(() => makeDirs('/proc/tsglang-nope/x'), (e: NodeJS.ErrnoException) => e.code === 'ENOENT' && e.message.includes('/proc/tsglang-nope'));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/**
 * A fresh directory under the OS temp folder, removed (with its contents) when the test file's process exits,
 * whether its tests passed or failed. node --test runs each test file in its own process, so a file's
 * directories live exactly as long as its tests.
 * @param prefix the directory name's start, e.g. 'tsglang-args-'
 * @returns the directory's absolute path
 * @throws the mkdtemp error when the temp folder is not writable
 */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (made.length === 0) process.on('exit', removeAll);
  made.push(dir);
  return dir;
}

function removeAll(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

// File-system helpers shared by the writers (make-tiny, the embedded model, caches).
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p`: creates `dir` and any missing parents. Replaces `mkdirSync(dir, { recursive: true })`, which on
 * Node 20 loops forever (100% CPU) when the kernel answers ENOENT for a directory whose parent exists, e.g.
 * `/proc/nope`. Each missing level is created on its own, so a failure surfaces once, naming the path.
 * @param dir directory path (absolute or relative to the working directory)
 * @throws the fs error (ENOENT, ENOTDIR, EACCES, EROFS...; its message names the path) when a level cannot be created
 */
export function makeDirs(dir: string): void {
  const missing: string[] = [];
  let cur = resolve(dir);
  for (;;) {
    try {
      if (statSync(cur).isDirectory()) break;
      // An existing non-directory: mkdir below reports EEXIST/ENOTDIR naming it.
      missing.push(cur);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    missing.push(cur);
    const parent = dirname(cur);
    if (parent === cur) break;
    cur = parent;
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    try {
      mkdirSync(missing[i]);
    } catch (err) {
      // A concurrent writer created it first: fine if it is a directory now.
      if ((err as NodeJS.ErrnoException).code === 'EEXIST' && statSync(missing[i]).isDirectory()) continue;
      throw err;
    }
  }
}

// What loading the UCX addon does to the rest of the process (a file of its own: the addon must not have been loaded
// before the first reading). Before the fix, loading dist_ucx.node (1) rewrote the first instructions of libc's mmap /
// munmap / madvise / brk (libucm's memory-event hooks, while V8's GC threads may run them) and (2) replaced Node's
// SIGSEGV handler with libucs's, so that a WebAssembly out-of-bounds access killed the process ("Caught signal 11")
// instead of throwing a RuntimeError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { loadUcxAddon } from './ucx_addon.js';

/** The bytes of libc's executable mappings in this process (read through /proc/self/mem). */
function libcCode(): Buffer {
  const parts: Buffer[] = [];
  const fd = openSync('/proc/self/mem', 'r');
  try {
    for (const line of readFileSync('/proc/self/maps', 'utf8').split('\n')) {
      const f = line.split(/\s+/);
      if (f.length < 6 || !f[1].includes('x') || !/\/libc[.-]/.test(f[5])) continue;
      const [lo, hi] = f[0].split('-').map((h) => Number.parseInt(h, 16));
      const b = Buffer.alloc(hi - lo);
      readSync(fd, b, 0, b.length, lo);
      parts.push(b);
    }
  } finally {
    closeSync(fd);
  }
  return Buffer.concat(parts);
}

/** A module whose `load(addr)` reads an i32 from its one 64 KiB page of memory. */
const OOB_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type: (i32) -> i32
  0x03, 0x02, 0x01, 0x00, // function 0: type 0
  0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1 page
  0x07, 0x08, 0x01, 0x04, 0x6c, 0x6f, 0x61, 0x64, 0x00, 0x00, // export "load" = function 0
  0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x28, 0x02, 0x00, 0x0b, // local.get 0; i32.load; end
]);

/** WebAssembly (not in the project's TypeScript lib). */
const WA = (globalThis as unknown as { WebAssembly: { instantiate(b: Uint8Array): Promise<{ instance: { exports: Record<string, unknown> } }>; RuntimeError: new () => Error } }).WebAssembly;

const before = libcCode();
const { addon } = loadUcxAddon();

test('loading the UCX addon leaves libc\'s code as it was (no memory-event hooks patched in) and Node\'s WebAssembly trap handler in place', { skip: addon ? false : 'the UCX addon is not built' }, async () => {
  assert.ok(before.length > 100_000, 'libc\'s code was not found in /proc/self/maps');
  assert.equal(process.env['UCX_MEM_EVENTS'], 'no');
  const w = addon!.ucxCreateWorker();
  addon!.ucxMapRegion(w, 1 << 20);
  const after = libcCode();
  assert.equal(after.length, before.length);
  assert.ok(after.equals(before), 'libc\'s code changed when UCX loaded (memory hooks patched in)');
  const { instance } = await WA.instantiate(OOB_WASM);
  const load = instance.exports['load'] as (a: number) => number;
  assert.equal(load(16), 0);
  assert.throws(() => load(70_000), (e: unknown) => e instanceof WA.RuntimeError && /out of bounds/.test(e.message));
  assert.ok(w);
});

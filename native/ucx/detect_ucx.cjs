// Prints "1" when a test program compiles AND links against UCX (Debian libucx-dev: pkg-config `ucx`), else "0".
// TSGLANG_WITHOUT_UCX=1 forces "0". Never fails.
'use strict';
const { spawnSync } = require('node:child_process');
const { mkdtempSync, writeFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

function detect() {
  if (process.env.TSGLANG_WITHOUT_UCX === '1') return false;
  const pc = spawnSync('pkg-config', ['--cflags', '--libs', 'ucx'], { encoding: 'utf8', timeout: 30000 });
  if (pc.status !== 0) return false;
  const dir = mkdtempSync(join(tmpdir(), 'tsg-ucx-'));
  try {
    const src = join(dir, 't.cc');
    writeFileSync(src, '#include <ucp/api/ucp.h>\nint main() { unsigned a, b, c; ucp_get_version(&a, &b, &c); return a > 0 ? 0 : 1; }\n');
    const flags = pc.stdout.trim().split(/\s+/).filter(Boolean);
    const r = spawnSync(process.env.CXX || 'g++', ['-std=c++17', src, '-o', join(dir, 't'), ...flags], { stdio: 'ignore', timeout: 120000 });
    return r.status === 0;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
process.stdout.write(detect() ? '1' : '0');

// Prints "1" when a test program compiles AND links against Gloo (Debian libgloo-dev: headers in /usr/include/gloo,
// libgloo.so in /usr/lib, no pkg-config file), else "0". A header-only check is not enough: the package may be half
// removed. TSGLANG_WITHOUT_GLOO=1 forces "0". Never fails.
'use strict';
const { spawnSync } = require('node:child_process');
const { mkdtempSync, writeFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

function detect() {
  if (process.env.TSGLANG_WITHOUT_GLOO === '1') return false;
  const dir = mkdtempSync(join(tmpdir(), 'tsg-gloo-'));
  try {
    const src = join(dir, 't.cc');
    writeFileSync(src, '#include <gloo/transport/tcp/device.h>\n#include <gloo/rendezvous/context.h>\nint main() { gloo::transport::tcp::attr a("127.0.0.1"); auto d = gloo::transport::tcp::CreateDevice(a); return d ? 0 : 1; }\n');
    const r = spawnSync(process.env.CXX || 'g++', ['-std=c++17', src, '-o', join(dir, 't'), '-lgloo', '-pthread'], { stdio: 'ignore', timeout: 120000 });
    return r.status === 0;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
process.stdout.write(detect() ? '1' : '0');

// Builds the native CPU backend (native/binding.gyp → native/build/Release/tsglang_native.node) with npm's own
// bundled node-gyp against the local Node headers (never downloads them). Run by `npm install` (the `install`
// script) and `npm run build:native`. A failed or impossible build never fails the install: it prints one line and
// exits 0, and tsglang then runs on the TypeScript reference kernels.
//   env TSGLANG_SKIP_NATIVE=1    skip the build
//   env TSGLANG_NO_OPENBLAS=1    build without OpenBLAS even if libopenblas-dev is installed
//   env TSGLANG_WITHOUT_GLOO=1   skip the optional Gloo addon (native/gloo → dist_gloo.node, multi-node collectives)
//   env TSGLANG_WITHOUT_UCX=1    skip the optional UCX addon (native/ucx → dist_ucx.node, PD KV transfer backend ucx)
// The Gloo addon is a separate gyp project built after the compute addon, only when native/gloo/detect_gloo.cjs can
// compile and link against libgloo (Debian libgloo-dev); its failure or absence only disables --nnodes > 1.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = join(root, 'native');
const verbose = process.argv.includes('--verbose');

function note(msg) {
  process.stderr.write(`tsglang native: ${msg}\n`);
}

/** npm's bundled node-gyp: npm exports its path to lifecycle scripts; otherwise look beside the node binary. */
function findNodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    join(dirname(process.execPath), 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  return candidates.find((p) => p && existsSync(p)) ?? null;
}

/** A folder with include/node/node_api.h for this Node (the installed headers), so node-gyp needs no download. */
function findNodeDir() {
  const candidates = [process.env.npm_config_nodedir, resolve(dirname(process.execPath), '..')];
  return candidates.find((d) => d && existsSync(join(d, 'include', 'node', 'node_api.h')) && existsSync(join(d, 'include', 'node', 'common.gypi'))) ?? null;
}

function main() {
  if (process.env.TSGLANG_SKIP_NATIVE === '1') return note('build skipped (TSGLANG_SKIP_NATIVE=1); using the TypeScript kernels');
  if (process.arch !== 'x64') return note(`no build on ${process.arch} (the kernels are x86-64 AVX2); using the TypeScript kernels`);
  const nodeGyp = findNodeGyp();
  if (!nodeGyp) return note("npm's node-gyp not found; using the TypeScript kernels");
  const nodeDir = findNodeDir();
  if (!nodeDir) return note('local Node headers (include/node/node_api.h) not found; not downloading them; using the TypeScript kernels');
  // configure + build (not `rebuild`): an existing addon stays in place until the new one is linked, so processes
  // started meanwhile still find it; make rebuilds what changed.
  const common = [`--directory=${nativeDir}`, `--nodedir=${nodeDir}`, ...(verbose ? ['--loglevel=warn'] : [])];
  const t0 = Date.now();
  const opts = { cwd: nativeDir, stdio: verbose ? 'inherit' : ['ignore', 'pipe', 'pipe'], timeout: 15 * 60 * 1000, encoding: 'utf8' };
  let r = spawnSync(process.execPath, [nodeGyp, 'configure', ...common], opts);
  if (r.status === 0) r = spawnSync(process.execPath, [nodeGyp, 'build', '--jobs=2', ...common], opts);
  if (r.status === 0) {
    note(`built native/build/Release/tsglang_native.node in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    buildGloo(nodeGyp, nodeDir);
    buildUcx(nodeGyp, nodeDir);
    return;
  }
  const tail = `${r.stderr ?? ''}`.split('\n').filter((l) => /error|ERR!/i.test(l)).slice(0, 3).join(' | ');
  note(`build failed (${r.error ? r.error.message : `exit ${r.status}`}${tail ? `: ${tail}` : ''}); using the TypeScript kernels`);
}

/** The optional Gloo addon (never fails the install). */
function buildGloo(nodeGyp, nodeDir) {
  const glooDir = join(nativeDir, 'gloo');
  if (process.env.TSGLANG_WITHOUT_GLOO === '1') return note('Gloo addon skipped (TSGLANG_WITHOUT_GLOO=1): --nnodes > 1 unavailable');
  const probe = spawnSync(process.execPath, [join(glooDir, 'detect_gloo.cjs')], { encoding: 'utf8', timeout: 180000 });
  if (probe.stdout.trim() !== '1') return note('libgloo-dev not found (apt-get install libgloo-dev): dist_gloo.node not built, --nnodes > 1 unavailable');
  const t0 = Date.now();
  const common = [`--directory=${glooDir}`, `--nodedir=${nodeDir}`, ...(verbose ? ['--loglevel=warn'] : [])];
  const opts = { cwd: glooDir, stdio: verbose ? 'inherit' : ['ignore', 'pipe', 'pipe'], timeout: 15 * 60 * 1000, encoding: 'utf8' };
  let r = spawnSync(process.execPath, [nodeGyp, 'configure', ...common], opts);
  if (r.status === 0) r = spawnSync(process.execPath, [nodeGyp, 'build', '--jobs=2', ...common], opts);
  if (r.status === 0) return note(`built native/gloo/build/Release/dist_gloo.node in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const tail = `${r.stderr ?? ''}`.split('\n').filter((l) => /error|ERR!/i.test(l)).slice(0, 3).join(' | ');
  note(`Gloo addon build failed (${r.error ? r.error.message : `exit ${r.status}`}${tail ? `: ${tail}` : ''}); --nnodes > 1 unavailable`);
}

/** The optional UCX addon (never fails the install). */
function buildUcx(nodeGyp, nodeDir) {
  const ucxDir = join(nativeDir, 'ucx');
  if (process.env.TSGLANG_WITHOUT_UCX === '1') return note('UCX addon skipped (TSGLANG_WITHOUT_UCX=1): KV transfer backend ucx unavailable');
  const probe = spawnSync(process.execPath, [join(ucxDir, 'detect_ucx.cjs')], { encoding: 'utf8', timeout: 180000 });
  if (probe.stdout.trim() !== '1') return note('libucx-dev not found (apt-get install libucx-dev): dist_ucx.node not built, KV transfer backend ucx unavailable');
  const t0 = Date.now();
  const common = [`--directory=${ucxDir}`, `--nodedir=${nodeDir}`, ...(verbose ? ['--loglevel=warn'] : [])];
  const opts = { cwd: ucxDir, stdio: verbose ? 'inherit' : ['ignore', 'pipe', 'pipe'], timeout: 15 * 60 * 1000, encoding: 'utf8' };
  let r = spawnSync(process.execPath, [nodeGyp, 'configure', ...common], opts);
  if (r.status === 0) r = spawnSync(process.execPath, [nodeGyp, 'build', '--jobs=2', ...common], opts);
  if (r.status === 0) return note(`built native/ucx/build/Release/dist_ucx.node in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const tail = `${r.stderr ?? ''}`.split('\n').filter((l) => /error|ERR!/i.test(l)).slice(0, 3).join(' | ');
  note(`UCX addon build failed (${r.error ? r.error.message : `exit ${r.status}`}${tail ? `: ${tail}` : ''}); KV transfer backend ucx unavailable`);
}

try {
  main();
} catch (err) {
  note(`build failed (${err && err.message ? err.message : String(err)}); using the TypeScript kernels`);
}
process.exitCode = 0;

// Loads @mlc-ai/web-xgrammar 0.1.27 (the xgrammar C++ engine compiled to WASM) under Node 20, one independent WASM
// instance per call. Why a loader: the package's lib/index.js is a UMD/CommonJS bundle (WASM embedded as base64) but
// its package.json says "type": "module", so both `import` and `require` fail ("require is not defined in ES module
// scope"). We compile the file ourselves as CommonJS (measured in shared/design/structured-output.md §1), with two
// small source patches: the C++ log lines go to a hook (else [WARNING] lines reach stdout through console.log), and
// the emscripten Module is exposed as `__binding()` (heap size, reading a C++ exception's message).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as XG from '@mlc-ai/web-xgrammar';
import { UnsupportedFeatureError } from '../common/index.js';

/** The package's exports plus the patched-in binding accessor. */
export type XGrammarModule = typeof XG & {
  /** The emscripten Module of this instance (HEAPU8, HEAPU32, getHeapMax, …). */
  __binding(): { HEAPU8: Uint8Array; HEAPU32: Uint32Array; HEAP8: Int8Array };
};

/** One C++ log line: `[FATAL] file:line: message` (stderr) or `[WARNING] …` (stdout). */
export type XGrammarLogHook = (stream: 'stdout' | 'stderr', line: string) => void;

/** The exact npm version the patches were written against. */
export const XGRAMMAR_VERSION = '0.1.27';

const require = createRequire(import.meta.url);
let source: { file: string; text: string } | null = null;
let counter = 0;

function readBundle(): { file: string; text: string } {
  if (source) return source;
  let pkg: string;
  try {
    pkg = require.resolve('@mlc-ai/web-xgrammar/package.json');
  } catch {
    throw new UnsupportedFeatureError('grammar backend xgrammar: npm package @mlc-ai/web-xgrammar is not installed (run npm install)');
  }
  const version = (JSON.parse(readFileSync(pkg, 'utf8')) as { version?: string }).version;
  if (version !== XGRAMMAR_VERSION) throw new UnsupportedFeatureError(`grammar backend xgrammar: @mlc-ai/web-xgrammar ${String(version)} installed, ${XGRAMMAR_VERSION} expected`);
  const file = join(dirname(pkg), 'lib', 'index.js');
  source = { file, text: readFileSync(file, 'utf8') };
  return source;
}

/**
 * A fresh, independent xgrammar WASM instance (own heap). 40–90 ms; the WASM is instantiated on its first call.
 * @param onLog receives every C++ log line (default: dropped)
 * @throws UnsupportedFeatureError when the package is missing, of another version, or its bundle layout changed
 */
export function loadXGrammar(onLog: XGrammarLogHook = () => {}): XGrammarModule {
  const { file, text } = readBundle();
  const id = ++counter;
  const hook = `__tsglangXgLog${id}`;
  (globalThis as Record<string, unknown>)[hook] = onLog;
  const patched = text
    .replace('var out=Module["print"]||console.log.bind(console)', `var out=(l)=>globalThis.${hook}("stdout",l)`)
    .replace('var err=Module["printErr"]||console.error.bind(console)', `var err=(l)=>globalThis.${hook}("stderr",l)`)
    .replace('var index = {', 'exports.__binding = () => binding;\n  var index = {');
  if (!patched.includes(`globalThis.${hook}("stdout"`) || !patched.includes(`globalThis.${hook}("stderr"`) || !patched.includes('exports.__binding')) {
    throw new UnsupportedFeatureError('grammar backend xgrammar: the @mlc-ai/web-xgrammar bundle layout changed; the loader patch failed');
  }
  const NodeModule = require('node:module') as { new (id: string, parent: null): { filename: string; paths: string[]; exports: unknown; _compile(src: string, f: string): void }; _nodeModulePaths(d: string): string[] };
  const m = new NodeModule(`${file}?instance=${id}`, null);
  m.filename = file;
  m.paths = NodeModule._nodeModulePaths(dirname(file));
  m._compile(patched, file);
  return m.exports as XGrammarModule;
}

/**
 * The message of a C++ exception caught as a bare number (the exception object's address: web-xgrammar throws
 * structural-tag errors that way), read from the instance's heap; '' when it cannot be read.
 */
export function cxxExceptionMessage(x: XGrammarModule, e: unknown): string {
  if (typeof e !== 'number') return '';
  try {
    const B = x.__binding();
    const p = B.HEAPU32[(e + 4) >> 2];
    const bytes: number[] = [];
    for (let i = p; B.HEAPU8[i] && bytes.length < 2000; i++) bytes.push(B.HEAPU8[i]);
    return Buffer.from(bytes).toString('utf8');
  } catch {
    return '';
  }
}

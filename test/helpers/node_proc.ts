// One `tsglang serve` process per node for the multi-node e2e tests (optionally inside a network namespace): its
// stderr, a wait for a line, and a watchdog that kills it after `watchdogMs`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { TSGLANG_BIN } from './paths.js';

/** A started node process. */
export interface NodeProc {
  readonly child: ChildProcess;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** Resolves when `pattern` appears on stderr (rejects if the process exits first). */
  waitFor(pattern: RegExp): Promise<void>;
}

/**
 * Starts `tsglang serve ...args` (inside namespace `prefix` when given: `ip netns exec NAME`).
 * @param watchdogMs kills the process (SIGKILL) after this long
 */
export function startNodeProc(args: readonly string[], watchdogMs: number, prefix: readonly string[] = [], env: NodeJS.ProcessEnv = {}): NodeProc {
  const argv = [...prefix, process.execPath, TSGLANG_BIN, 'serve', ...args];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let err = '';
  const watchers: { re: RegExp; ok: () => void }[] = [];
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => {
    err += d;
    for (const w of watchers.splice(0)) (w.re.test(err) ? w.ok : () => watchers.push(w))();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), watchdogMs);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    }),
  );
  return {
    child,
    exit,
    stderr: () => err,
    waitFor: (re) =>
      new Promise<void>((resolve, reject) => {
        if (re.test(err)) return resolve();
        watchers.push({ re, ok: resolve });
        void exit.then((e) => reject(new Error(`exited (${e.code ?? e.signal}) before ${re}:\n${err}`)));
      }),
  };
}

/** SIGKILLs every node still running. */
export function killNodes(...nodes: NodeProc[]): void {
  for (const n of nodes) if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill('SIGKILL');
}

/** Waits for the node to exit within `ms` (fails the test otherwise). */
export async function exitsWithin(n: NodeProc, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const r = await Promise.race([n.exit, new Promise<null>((res) => setTimeout(() => res(null), ms).unref())]);
  assert.ok(r, `still running after ${ms} ms:\n${n.stderr()}`);
  return r;
}

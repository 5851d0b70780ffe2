// Helpers of the reliability benches (soak_bench.ts, reliability_bench.ts) and of the e2e tests: `tsglang serve` as a
// child process on a free loopback port (the embedded default model unless flags say otherwise), its RSS from /proc,
// and a bounded request pool. Nothing here asserts.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** A running server child. */
export interface ServeChild {
  readonly child: ChildProcess;
  readonly port: number;
  readonly base: string;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Its exit code (null when a signal ended it). */
  readonly exited: Promise<number | null>;
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts `tsglang serve --port P ...flags` (with `env`) and waits for its ready line.
 * @param startMs how long it may take to be ready, ms
 * @throws Error with its stderr when it exits or is not ready within `startMs` (it is then killed)
 */
export async function startServe(flags: readonly string[], startMs = 300_000, env: NodeJS.ProcessEnv = process.env): Promise<ServeChild> {
  const port = await freePort();
  const bin = fileURLToPath(new URL('../../bin/tsglang.js', import.meta.url));
  const child = spawn(process.execPath, [bin, 'serve', '--port', String(port), ...flags], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let err = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => { err += d; if (err.length > 4_000_000) err = err.slice(-1_000_000); });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server not ready in ${startMs} ms:\n${err.slice(-4000)}`));
    }, startMs);
    const onData = (): void => { if (err.includes('The server is fired up and ready to roll!')) { clearTimeout(timer); child.stderr!.off('data', onData); resolve(); } };
    child.stderr!.on('data', onData);
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${err.slice(-4000)}`)); });
  });
  return { child, port, base: `http://127.0.0.1:${port}`, stderr: () => err, exited };
}

/** Stops a server child with SIGTERM (SIGKILL after `ms`) and resolves with its exit code. */
export async function stopServe(s: ServeChild, ms = 15_000): Promise<number | null> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return s.child.exitCode;
  const exited = new Promise<number | null>((r) => s.child.once('exit', (c) => r(c)));
  s.child.kill('SIGTERM');
  const t = setTimeout(() => s.child.kill('SIGKILL'), ms);
  const code = await exited;
  clearTimeout(t);
  return code;
}

/** Resident set size of a process, MB (/proc/PID/status VmRSS), or NaN when unreadable. */
export function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Runs `total` jobs with at most `concurrency` in flight.
 * @param job called with the job index; its rejection counts as a failure (the pool carries on)
 * @returns the number of failed jobs
 */
export async function pool(total: number, concurrency: number, job: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  let failed = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      try { await job(i); } catch { failed++; }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return failed;
}

/** The q-quantile (0..1) of `xs` (nearest rank), NaN when empty. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

/** Arithmetic mean, NaN when empty. */
export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

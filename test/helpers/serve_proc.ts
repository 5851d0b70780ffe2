// Test helpers for `tsglang serve` child processes: a free loopback port, and a server started with its stderr
// collected, resolved once it prints SGLang's ready line.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { TSGLANG_BIN } from './paths.js';

/** A TCP port free on 127.0.0.1 right now (the OS picks it). */
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

/** A running `tsglang serve` child. */
export interface ServeProc {
  readonly child: ChildProcess;
  /** http://127.0.0.1:PORT */
  readonly base: string;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Its exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
}

/**
 * Starts `tsglang serve ARGS --port P` and waits for "The server is fired up and ready to roll!".
 * @throws Error with the server's stderr when it exits or is not ready within `readyTimeoutMs` (it is then killed)
 */
export async function startServe(args: readonly string[], env: NodeJS.ProcessEnv = process.env, readyTimeoutMs = 300_000): Promise<ServeProc> {
  const port = await freePort();
  const child = spawn(process.execPath, [TSGLANG_BIN, 'serve', ...args, '--port', String(port)], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start in time:\n${err}`));
    }, readyTimeoutMs);
    const onData = () => {
      if (!err.includes('The server is fired up and ready to roll!')) return;
      clearTimeout(timer);
      child.stderr!.off('data', onData);
      resolve();
    };
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${err}`));
    });
  });
  return { child, base: `http://127.0.0.1:${port}`, stderr: () => err, exited };
}

// PD disaggregation in tests: a prefill and a decode `tsglang serve` (bench/serve_child.ts startServe) behind
// `tsglang router --pd-disaggregation`, all on free loopback ports (or the addresses given), and the readings the
// tests compare: /get_server_info's per-group PD counters and KV pool usage.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { freePort, startServe, stopServe, type ServeChild } from '../../bench/serve_child.js';
import { TSGLANG_BIN } from './paths.js';

/** A running router child. */
export interface RouterChild {
  readonly child: ChildProcess;
  readonly port: number;
  readonly base: string;
  log(): string;
}

/**
 * Starts `tsglang router --pd-disaggregation --prefill URL PORT ... --decode URL ...` on a free port.
 * @throws Error with its log when it exits before listening
 */
export async function startRouter(prefill: readonly { url: string; bootstrapPort: number }[], decode: readonly string[], extra: readonly string[] = []): Promise<RouterChild> {
  const port = await freePort();
  const args = ['router', '--pd-disaggregation', ...prefill.flatMap((p) => ['--prefill', p.url, String(p.bootstrapPort)]), ...decode.flatMap((d) => ['--decode', d]),
    '--host', '127.0.0.1', '--port', String(port), '--worker-startup-check-interval', '1', ...extra];
  const child = spawn(process.execPath, [TSGLANG_BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d: string) => {
      log += d;
      if (/router listening/.test(log)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`router exited (${code}) before listening:\n${log}`)));
  });
  return { child, port, base: `http://127.0.0.1:${port}`, log: () => log };
}

/** A prefill + decode pair behind a router. */
export interface PdPair {
  readonly prefill: ServeChild;
  readonly decode: ServeChild;
  readonly router: RouterChild;
  readonly bootstrapPort: number;
  stop(): Promise<void>;
}

/**
 * Starts a prefill server (`prefillFlags` + --disaggregation-mode prefill --disaggregation-bootstrap-port P), a decode
 * server (`decodeFlags` + --disaggregation-mode decode) and a router over them.
 */
export async function startPdPair(prefillFlags: readonly string[], decodeFlags: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<PdPair> {
  const bootstrapPort = await freePort();
  const [prefill, decode] = await Promise.all([
    startServe([...prefillFlags, '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', String(bootstrapPort)], 300_000, env),
    startServe([...decodeFlags, '--disaggregation-mode', 'decode'], 300_000, env),
  ]);
  let router: RouterChild;
  try {
    router = await startRouter([{ url: prefill.base, bootstrapPort }], [decode.base]);
  } catch (e) {
    await Promise.all([stopServe(prefill), stopServe(decode)]);
    throw e;
  }
  return {
    prefill, decode, router, bootstrapPort,
    stop: async () => {
      router.child.kill('SIGTERM');
      await Promise.all([stopServe(prefill), stopServe(decode)]);
    },
  };
}

/** POSTs JSON. @returns status and body text */
export async function postJson(base: string, path: string, body: unknown, timeoutMs = 600_000): Promise<{ status: number; text: string }> {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  return { status: r.status, text: await r.text() };
}

/**
 * POSTs JSON over a connection of its own (no keep-alive pool), for a server that is stopped (SIGSTOP) and resumed: a
 * pooled connection may be closed by the server's expired keep-alive timer before it reads the request.
 * @returns status and body text; status 0 and the error's message when the request fails or times out
 */
export function postJsonFresh(base: string, path: string, body: unknown, timeoutMs = 600_000): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = request(`${base}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': data.length, connection: 'close' }, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', (e) => resolve({ status: 0, text: e.message }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on('error', (e) => resolve({ status: 0, text: e.message }));
    req.end(data);
  });
}

/** One DP group's state from /get_server_info (internal_states[g]). */
export interface GroupState {
  readonly num_used_tokens: number;
  readonly num_running_reqs: number;
  readonly disaggregation?: Record<string, number | string>;
}

/** Every DP group's internal state. */
export async function groupStates(base: string): Promise<GroupState[]> {
  const info = (await (await fetch(`${base}/get_server_info`)).json()) as { internal_states: GroupState[] };
  return info.internal_states;
}

/** Sum of a PD counter over the groups. */
export function pdSum(groups: readonly GroupState[], key: string): number {
  return groups.reduce((a, g) => a + Number(g.disaggregation?.[key] ?? 0), 0);
}

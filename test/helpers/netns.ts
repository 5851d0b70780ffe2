// Two "hosts" for multi-node tests and benchmarks: two network namespaces joined by a veth pair, with private
// addresses inside the namespaces only (no route anywhere else, nothing on the host side). Created per use with
// unique names, removed by remove() (deleting a namespace deletes its veth end, and the pair with it).
import { execFileSync } from 'node:child_process';

/** A namespace pair. exec() gives the argv prefix that runs a command inside namespace 0 or 1. */
export interface NetnsPair {
  readonly names: readonly [string, string];
  readonly addrs: readonly [string, string];
  /** ['ip', 'netns', 'exec', name] — spawn(prefix[0], [...prefix.slice(1), cmd, ...args]); the pid is the command's (ip execs it). */
  prefix(i: 0 | 1): string[];
  remove(): void;
}

function ip(args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 });
}

/**
 * Creates the pair, or returns the reason it cannot (not root, `ip` missing, namespaces not permitted).
 * @param tag a short tag (≤ 6 characters) for the names; the pid is appended
 */
export function createNetnsPair(tag: string): NetnsPair | { skip: string } {
  const id = `${tag}${process.pid % 100000}`;
  const names: [string, string] = [`tsg-${id}-a`, `tsg-${id}-b`];
  const dev: [string, string] = [`v${id}a`.slice(0, 15), `v${id}b`.slice(0, 15)];
  const subnet = `10.233.${process.pid % 250}`;
  const addrs: [string, string] = [`${subnet}.1`, `${subnet}.2`];
  const remove = (): void => {
    for (const n of names) {
      try {
        ip(['netns', 'del', n]);
      } catch {
        /* already gone */
      }
    }
  };
  try {
    ip(['netns', 'add', names[0]]);
    ip(['netns', 'add', names[1]]);
    ip(['link', 'add', dev[0], 'netns', names[0], 'type', 'veth', 'peer', 'name', dev[1], 'netns', names[1]]);
    for (const i of [0, 1] as const) {
      ip(['-n', names[i], 'addr', 'add', `${addrs[i]}/24`, 'dev', dev[i]]);
      ip(['-n', names[i], 'link', 'set', dev[i], 'up']);
      ip(['-n', names[i], 'link', 'set', 'lo', 'up']);
    }
  } catch (err) {
    remove();
    const e = err as { stderr?: Buffer; message: string };
    return { skip: `network namespaces not available here (ip netns/veth: ${(e.stderr?.toString() || e.message).trim().split('\n')[0]})` };
  }
  return { names, addrs, prefix: (i) => ['ip', 'netns', 'exec', names[i]], remove };
}

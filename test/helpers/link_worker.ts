// A thread for the point-to-point link tests (test/p2p_link.test.ts): opens its end of a link and runs a scenario —
// `echo` receives messages and sends back their byte sums through a second link; `sender` posts `count` messages
// of growing sizes without waiting; `check` receives them, compares each with linkMessage(i), then receives once more
// after the sender left and reports how that failed; `die` exits abruptly 300 ms after opening its end, its exit hook breaking the
// link as a rank thread's does (tp_worker_main.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { abortLocalLink, openLink, type LinkEnd } from '../../src/distributed/index.js';

/** What the test thread sends. */
export interface LinkJob {
  readonly scenario: 'echo' | 'sender' | 'check' | 'die';
  readonly inEnd?: LinkEnd;
  readonly outEnd?: LinkEnd;
  readonly count: number;
}

/** Message i of the sender scenario: 1 + 37·i bytes, byte j = (i + j) mod 251. */
export function linkMessage(i: number): Uint8Array {
  return Uint8Array.from({ length: 1 + 37 * i }, (_, j) => (i + j) % 251);
}

const job = workerData as LinkJob | null;
if (job) {
  try {
    const inL = job.inEnd ? openLink(job.inEnd) : null;
    const outL = job.outEnd ? openLink(job.outEnd) : null;
    if (job.scenario === 'die') {
      process.on('exit', (code) => abortLocalLink(job.outEnd as Parameters<typeof abortLocalLink>[0], `the stage thread exited with code ${code}`));
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
      process.exit(70);
    }
    if (job.scenario === 'check') {
      for (let i = 0; i < job.count; i++) {
        const m = inL!.recv();
        const want = linkMessage(i);
        if (m.length !== want.length || m.some((b, j) => b !== want[j])) throw new Error(`message ${i} differs`);
      }
      const t0 = Date.now();
      let after = 'no error';
      try {
        inL!.recv();
      } catch (e) {
        after = `${(e as Error).name}: ${(e as Error).message}`;
      }
      inL!.close();
      parentPort!.postMessage({ ok: true, after, afterMs: Date.now() - t0 });
      process.exit(0);
    }
    if (job.scenario === 'sender') {
      for (let i = 0; i < job.count; i++) outL!.send(linkMessage(i));
      outL!.flush();
    } else {
      for (let i = 0; i < job.count; i++) {
        const m = inL!.recv();
        let sum = 0;
        for (const b of m) sum += b;
        outL!.send(new Uint8Array(Uint32Array.of(m.length, sum).buffer));
      }
      outL!.flush();
    }
    inL?.close();
    outL?.close();
    parentPort!.postMessage({ ok: true });
  } catch (e) {
    parentPort!.postMessage({ error: (e as Error).message, name: (e as Error).name });
  }
}

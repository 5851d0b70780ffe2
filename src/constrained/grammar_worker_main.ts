// Entry of the grammar worker thread: owns the GrammarEngine (xgrammar WASM) of one model. Compiling (0.3–700 ms,
// synchronous WASM) never delays mask work already queued: before each compile the worker raises the BUSY flag, then
// drains the port and answers every accept first, so the core can tell "mask coming" from "worker busy compiling"
// (GrammarClient.canSampleNow) and leave a constrained row out of a step instead of stalling the whole batch.
import { parentPort, receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { GrammarEngine, grammarKeyString, type GrammarKey } from './grammar_engine.js';
import { CTL_BUSY, CTL_SEQ, type FromGrammarMsg, type GrammarWorkerData, type ToGrammarMsg } from './protocol.js';
import { readGrammarVocab } from './vocab.js';

const port = (workerData as { port?: MessagePort } | null)?.port ?? null;
if (parentPort && port) void main(port, workerData as GrammarWorkerData);

async function main(p: MessagePort, data: GrammarWorkerData): Promise<void> {
  const ctl = new Int32Array(data.control);
  const send = (m: FromGrammarMsg, transfer: ArrayBuffer[] = []): void => {
    p.postMessage(m, transfer);
    Atomics.add(ctl, CTL_SEQ, 1);
    Atomics.notify(ctl, CTL_SEQ);
  };
  const fast: ToGrammarMsg[] = [];
  /** Keys waiting to compile, in arrival order, with the requests waiting on each. */
  const pending = new Map<string, { key: GrammarKey; rids: string[]; since: number }>();
  /** The requests of the job taken from `pending` and not yet opened (compiling now), and those of them closed since. */
  let current: string[] = [];
  const cancelled = new Set<string>();
  const enqueue = (m: ToGrammarMsg): void => {
    if (m.t === 'close') {
      // closed while its grammar compiles: openAll must not open its matcher (the close itself may run first)
      if (current.includes(m.rid)) cancelled.add(m.rid);
      // closed before its grammar compiled (abort in the grammar queue): never open its matcher
      for (const [k, job] of pending) {
        const i = job.rids.indexOf(m.rid);
        if (i < 0) continue;
        job.rids.splice(i, 1);
        if (job.rids.length === 0) pending.delete(k);
      }
    }
    if (m.t === 'open') {
      const s = grammarKeyString(m.key);
      const e = pending.get(s);
      if (e) e.rids.push(m.rid);
      else pending.set(s, { key: m.key, rids: [m.rid], since: performance.now() });
    } else fast.push(m);
  };
  let engine: GrammarEngine | null = null;
  let scheduled = false;
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => void run());
  };
  p.on('message', (m: ToGrammarMsg) => {
    enqueue(m);
    schedule();
  });
  const t0 = performance.now();
  try {
    engine = await GrammarEngine.create(readGrammarVocab(data.tokenizerPath), data.vocabSize, data.stopIds, { maxCompiled: data.maxCompiled, maxErrors: data.maxErrors, anyWhitespace: data.anyWhitespace });
  } catch (e) {
    send({ t: 'init_error', message: (e as Error).message ?? String(e) });
    return;
  }
  send({ t: 'ready', initMs: performance.now() - t0 });
  schedule();

  async function handleFast(eng: GrammarEngine): Promise<void> {
    while (fast.length > 0) {
      const m = fast.shift()!;
      if (m.t === 'accept') {
        if (eng.lost.has(m.rid)) {
          send({ t: 'mask', rid: m.rid, mask: null, error: 'grammar engine was rebuilt; the matcher of this request was lost' });
          continue;
        }
        const r = eng.accept(m.rid, m.token);
        if (r === 'rejected' || r === 'unknown') send({ t: 'mask', rid: m.rid, mask: null, error: `the grammar rejected token ${m.token}` });
        else {
          const mask = r === 'terminated' ? null : await eng.mask(m.rid);
          send({ t: 'mask', rid: m.rid, mask, error: null }, mask ? [mask.buffer as ArrayBuffer] : []);
        }
      } else if (m.t === 'close') {
        eng.close(m.rid);
        eng.lost.delete(m.rid);
      } else if (m.t === 'stats') {
        send({ t: 'stats', id: m.id, stats: eng.stats() });
      }
    }
  }

  async function openAll(eng: GrammarEngine, key: GrammarKey, rids: string[], error: string | null, compileMs: number): Promise<void> {
    for (const rid of rids) {
      if (cancelled.delete(rid)) continue; // its request is gone: no reply, no matcher
      if (error !== null) {
        send({ t: 'opened', rid, mask: null, error, compileMs });
        continue;
      }
      try {
        const mask = await eng.open(rid, key);
        send({ t: 'opened', rid, mask, error: null, compileMs }, [mask.buffer as ArrayBuffer]);
      } catch (e) {
        send({ t: 'opened', rid, mask: null, error: (e as Error).message, compileMs });
      }
    }
  }

  async function run(): Promise<void> {
    scheduled = false;
    const eng = engine;
    if (!eng) return; // still building the TokenizerInfo: `ready` schedules the queued work
    await handleFast(eng);
    const first = pending.entries().next();
    if (first.done) return;
    const [s, job] = first.value;
    pending.delete(s);
    current = job.rids;
    if (eng.isKnown(job.key)) {
      // cache hit or a known invalid key: no compile, never busy
      const error = await eng.compile(job.key);
      await openAll(eng, job.key, job.rids, error, 0);
    } else {
      Atomics.store(ctl, CTL_BUSY, 1);
      for (let r = receiveMessageOnPort(p); r; r = receiveMessageOnPort(p)) enqueue(r.message as ToGrammarMsg);
      await handleFast(eng);
      const t = performance.now();
      let error: string | null;
      try {
        error = await eng.compile(job.key);
      } finally {
        Atomics.store(ctl, CTL_BUSY, 0);
      }
      // requests for the same key that arrived while compiling share the result
      for (let r = receiveMessageOnPort(p); r; r = receiveMessageOnPort(p)) enqueue(r.message as ToGrammarMsg);
      const late = pending.get(s);
      if (late) {
        job.rids.push(...late.rids);
        pending.delete(s);
      }
      await openAll(eng, job.key, job.rids, error, performance.now() - t);
    }
    current = [];
    cancelled.clear();
    if (fast.length > 0 || pending.size > 0) schedule();
  }
}

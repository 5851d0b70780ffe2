// Entry of a rank's worker thread (TP ranks 1..N-1, and under PP every rank but global rank 0, which is the engine
// core thread: tp_runner.ts, pp_runner.ts): loads this rank's shard (of its stage), reports on the RankBoard, meets
// the others at the world barrier, then runs its loop until shutdown — the TP step loop, or a pipeline stage's loop.
// A failure is written to the board and aborts the groups and links, so rank 0 and the peers stop waiting at once.
import { workerData } from 'node:worker_threads';
import { openGroup, openLink, type Communicator, type P2pLink } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { loadModel } from '../models/index.js';
import { installNativeSampling } from './native_sampling.js';
import { runStageLoop } from './pp_stage.js';
import { CommStepChannel, RankBoard, type StepChannel } from './rank_channel.js';
import { breakGroups, breakRankLinks, rankGroupRefs, rankParallel, runRankLoop, type TpRankInit } from './tp_runner.js';

/**
 * Fault injection for tests (TSGLANG_TEST_RANK_EXIT="rank:steps"): that rank's thread exits abruptly (process.exit
 * of a worker thread: no board report, no group abort, as a crashed rank) when it receives its steps-th step.
 */
function withInjectedExit(receive: () => Uint8Array, rank: number): () => Uint8Array {
  const m = /^(\d+):(\d+)$/.exec(process.env['TSGLANG_TEST_RANK_EXIT'] ?? '');
  if (!m || Number(m[1]) !== rank) return receive;
  let left = Number(m[2]);
  return () => (--left <= 0 ? process.exit(70) : receive());
}

const init = workerData as TpRankInit | null;
if (init) {
  const board = new RankBoard(init.board);
  const comms: Communicator[] = [];
  const links: P2pLink[] = [];
  const tpRank = init.rank % init.tpSize; // the global rank under PP
  // A thread that leaves without finishing its loop (process.exit, an error outside the try) breaks the groups from
  // here: rank 0 may be blocked in a collective and cannot run its Worker 'exit' listener until the timeout.
  let finished = false; // the body below ran to its end (its own failure, if any, is reported there)
  const breakAll = (why: string): void => {
    breakGroups(rankGroupRefs(init), comms, init.rank, why);
    breakRankLinks(init, why);
    for (const l of links) l.close();
  };
  process.on('exit', (code) => {
    const st = board.stateOf(init.rank);
    if (finished || st === 'exited' || st === 'failed') return;
    board.fail(init.rank, `thread exited (code ${code}) before leaving its step loop`);
    breakAll(`${board.nameOf(init.rank)} thread exited with code ${code}`);
  });
  try {
    const world = openGroup(init.world, init.rank); // across nodes: blocks until every rank has joined
    comms.push(world);
    const tp = openGroup(init.tp, tpRank);
    comms.push(tp);
    const pp = init.pp;
    const step0 = pp?.step0 ? openGroup(pp.step0, tpRank) : null;
    if (step0) comms.push(step0);
    const open = (e: Parameters<typeof openLink>[0] | null): P2pLink | null => {
      if (!e) return null;
      const l = openLink(e);
      links.push(l);
      return l;
    };
    const prev = open(pp?.prev ?? null);
    const next = open(pp?.next ?? null);
    const results = open(pp?.results ?? null);
    const ops = createOps({ threads: init.threads, ...(init.kernelEnv ? { env: init.kernelEnv } : {}) });
    const loaded = loadModel(init.modelPath, {
      ops, overrides: init.overrides, parallel: rankParallel(tpRank, init.tpSize, init.epSize, tp, init.cp, comms), ...(pp ? { stage: pp.stage } : {}),
    });
    board.ready(init.rank, loaded.weightBytes);
    world.barrier();
    const allocKv = (n: number): Float32Array => ops.allocateKvBuffer(n);
    if (pp) {
      if (results) installNativeSampling(init.kernelEnv, init.threads); // the last stage samples on this thread
      const stepChannel: StepChannel | null = step0 ? new CommStepChannel(step0) : null;
      const receive = prev ? () => prev.recv(Infinity) : () => stepChannel!.receive();
      runStageLoop(loaded.model, { receive: withInjectedExit(receive, init.rank), next, results, onBusy: (ms) => board.addBusy(init.rank, ms) },
        loaded.config.vocabSize, allocKv, init.kvCacheDtype ?? 'auto');
    } else {
      const channel = new CommStepChannel(world);
      runRankLoop(loaded.model, { send: (s) => channel.send(s), receive: withInjectedExit(() => channel.receive(), init.rank) }, allocKv, init.kvCacheDtype ?? 'auto', world);
    }
    board.exited(init.rank);
  } catch (e) {
    const err = e as Error;
    // A peer's failure reaches this rank as a DistributedError after the peer wrote its cause on the board: only a
    // first failure is reported (and breaks the groups, so rank 0 and the peers stop waiting at once).
    if (err.name !== 'DistributedError' || board.failures() === '') {
      board.fail(init.rank, err.message);
      process.stderr.write(`[${board.nameOf(init.rank)}] rank failed: ${err.stack ?? err.message}\n`);
      breakAll(`${board.nameOf(init.rank)} failed: ${err.message}`);
    }
  } finally {
    for (const c of comms) c.close();
    for (const l of links) l.close();
    finished = true;
  }
}

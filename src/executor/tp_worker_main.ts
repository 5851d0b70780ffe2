// Entry of a TP rank's worker thread (ranks 1..N-1; rank 0 is the engine core thread, tp_runner.ts): loads this rank's
// shard, reports on the RankBoard, meets the others at the world barrier, then runs the step loop until shutdown.
// A failure is written to the board and aborts both groups, so rank 0 and the peers stop waiting at once.
import { workerData } from 'node:worker_threads';
import { openGroup, type Communicator } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { loadModel } from '../models/index.js';
import { CommStepChannel, RankBoard, type StepChannel } from './rank_channel.js';
import { breakGroups, rankGroupRefs, rankParallel, runRankLoop, type TpRankInit } from './tp_runner.js';

/**
 * Fault injection for tests (TSGLANG_TEST_RANK_EXIT="rank:steps"): that rank's thread exits abruptly (process.exit
 * of a worker thread: no board report, no group abort, as a crashed rank) when it receives its steps-th step.
 */
function withInjectedExit(channel: StepChannel, rank: number): StepChannel {
  const m = /^(\d+):(\d+)$/.exec(process.env['TSGLANG_TEST_RANK_EXIT'] ?? '');
  if (!m || Number(m[1]) !== rank) return channel;
  let left = Number(m[2]);
  return { send: (s) => channel.send(s), receive: () => (--left <= 0 ? process.exit(70) : channel.receive()) };
}

const init = workerData as TpRankInit | null;
if (init) {
  const board = new RankBoard(init.board);
  const comms: Communicator[] = [];
  // A thread that leaves without finishing its loop (process.exit, an error outside the try) breaks the groups from
  // here: rank 0 may be blocked in a collective and cannot run its Worker 'exit' listener until the timeout.
  let finished = false; // the body below ran to its end (its own failure, if any, is reported there)
  process.on('exit', (code) => {
    const st = board.stateOf(init.rank);
    if (finished || st === 'exited' || st === 'failed') return;
    board.fail(init.rank, `thread exited (code ${code}) before leaving its step loop`);
    breakGroups(rankGroupRefs(init), comms, init.rank, `TP rank ${init.rank} thread exited with code ${code}`);
  });
  try {
    const world = openGroup(init.world, init.rank); // across nodes: blocks until every rank has joined
    comms.push(world);
    const tp = openGroup(init.tp, init.rank);
    comms.push(tp);
    const ops = createOps({ threads: init.threads, ...(init.kernelEnv ? { env: init.kernelEnv } : {}) });
    const loaded = loadModel(init.modelPath, { ops, overrides: init.overrides, parallel: rankParallel(init.rank, init.tpSize, init.epSize, tp, init.cp, comms) });
    board.ready(init.rank, loaded.weightBytes);
    world.barrier();
    runRankLoop(loaded.model, withInjectedExit(new CommStepChannel(world), init.rank), (n) => ops.allocateKvBuffer(n), init.kvCacheDtype ?? 'auto');
    board.exited(init.rank);
  } catch (e) {
    const err = e as Error;
    // A peer's failure reaches this rank as a DistributedError after the peer wrote its cause on the board: only a
    // first failure is reported (and breaks the groups, so rank 0 and the peers stop waiting at once).
    if (err.name !== 'DistributedError' || board.failures() === '') {
      board.fail(init.rank, err.message);
      process.stderr.write(`[TP${init.rank}] rank failed: ${err.stack ?? err.message}\n`);
      breakGroups(rankGroupRefs(init), comms, init.rank, `TP rank ${init.rank} failed: ${err.message}`);
    }
  } finally {
    for (const c of comms) c.close();
    finished = true;
  }
}

// Entry of a TP rank's worker thread (ranks 1..N-1; rank 0 is the engine core thread, tp_runner.ts): loads this rank's
// shard, reports on the RankBoard, meets the others at the world barrier, then runs the step loop until shutdown.
// A failure is written to the board and aborts both groups, so rank 0 and the peers stop waiting at once.
import { workerData } from 'node:worker_threads';
import { SabCommunicator } from '../distributed/index.js';
import { createOps } from '../kernels/index.js';
import { parallelGroups } from '../layers/index.js';
import { loadModel } from '../models/index.js';
import { CommStepChannel, RankBoard } from './rank_channel.js';
import { runRankLoop, type TpRankInit } from './tp_runner.js';

const init = workerData as TpRankInit | null;
if (init) {
  const board = new RankBoard(init.board);
  const world = new SabCommunicator(init.world, init.rank);
  const tp = new SabCommunicator(init.tp, init.rank);
  try {
    const ops = createOps({ threads: init.threads, ...(init.kernelEnv ? { env: init.kernelEnv } : {}) });
    const loaded = loadModel(init.modelPath, { ops, overrides: init.overrides, parallel: parallelGroups(init.rank, init.tpSize, init.epSize, tp) });
    board.ready(init.rank, loaded.weightBytes);
    world.barrier();
    runRankLoop(loaded.model, new CommStepChannel(world), (n) => ops.allocateKvBuffer(n));
    board.exited(init.rank);
  } catch (e) {
    const err = e as Error;
    // A peer's failure reaches this rank as a DistributedError: only the first failure is the cause worth reporting.
    if (!(world.broken || tp.broken) || err.name !== 'DistributedError') {
      board.fail(init.rank, err.message);
      process.stderr.write(`[TP${init.rank}] rank failed: ${err.stack ?? err.message}\n`);
    }
    world.abort();
    tp.abort();
  } finally {
    world.close();
    tp.close();
  }
}

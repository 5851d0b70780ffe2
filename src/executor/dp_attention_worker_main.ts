// Entry of a non-leader attention-DP rank's worker thread (attn_tp ranks 1..attn_tp-1 of a group; the leader is its
// group's engine core thread, dp_attention_runner.ts): loads the shard, then follows the leader's steps until shutdown.
// A failure is written to the board and breaks the groups, so every rank stops waiting at once; a thread that leaves
// without finishing its loop (process.exit, a crash) breaks them from its exit hook (the leader may be blocked in a
// collective and unable to run its Worker 'exit' listener; across nodes nothing else would tell the peers).
import { workerData } from 'node:worker_threads';
import type { Communicator } from '../distributed/index.js';
import { dpAttnRankRefs, runDpAttnRank, type DpAttnRankInit } from './dp_attention_runner.js';
import { RankBoard } from './rank_channel.js';
import { breakGroups } from './tp_runner.js';

const init = workerData as DpAttnRankInit | null;
if (init?.board) {
  const board = new RankBoard(init.board);
  const local = init.rank % (init.tpSize / init.dpSize);
  const comms: Communicator[] = [];
  const refs = dpAttnRankRefs(init);
  let finished = false;
  process.on('exit', (code) => {
    const st = board.stateOf(local);
    if (finished || st === 'exited' || st === 'failed') return;
    board.fail(local, `thread exited (code ${code}) before leaving its step loop`);
    breakGroups(refs, comms, init.rank, `TP rank ${init.rank} thread exited with code ${code}`);
  });
  try {
    runDpAttnRank(init, board, comms);
    board.exited(local);
  } catch (e) {
    const err = e as Error;
    // a peer's failure or the shutdown of another group reaches this rank as a DistributedError: only a first
    // failure of its own is reported
    if (err.name !== 'DistributedError' || board.failures() === '') {
      board.fail(local, err.message);
      if (!/shutdown/.test(err.message)) process.stderr.write(`[TP${init.rank}] rank failed: ${err.stack ?? err.message}\n`);
      breakGroups(refs, comms, init.rank, `TP rank ${init.rank} failed: ${err.message}`);
    }
  } finally {
    for (const c of comms) c.close();
    finished = true;
  }
}

// One rank process of `npm run bench:comm`'s Gloo cases: argv[2] = JSON {spec: GlooGroupSpec, cases: CommCase[]};
// joins the group, times the all-reduces and (rank 0) prints the per-case sorted µs as one JSON line on stdout.
import { GlooCommunicator } from '../src/distributed/index.js';
import type { GlooGroupSpec } from '../src/distributed/index.js';
import { timeAllReduce } from './comm_bench_worker.js';
import type { CommCase } from './comm_bench_worker.js';

const { spec, cases } = JSON.parse(process.argv[2]) as { spec: GlooGroupSpec; cases: CommCase[] };
const comm = new GlooCommunicator(spec);
const times = timeAllReduce(comm, cases);
comm.barrier();
if (spec.rank === 0) process.stdout.write(`${JSON.stringify(times)}\n`);
comm.close();

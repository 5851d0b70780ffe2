// One rank of a Gloo group as its own process (test/gloo_communicator.test.ts): joins the group given in argv[2]
// (JSON GlooGroupSpec), prints "joined", then all-reduces 1024 floats in a loop until it fails; prints the error
// message on one line prefixed "ERROR " and exits 3.
import { GlooCommunicator } from '../../src/distributed/index.js';
import type { GlooGroupSpec } from '../../src/distributed/index.js';

const spec = JSON.parse(process.argv[2]) as GlooGroupSpec;
try {
  const comm = new GlooCommunicator(spec);
  process.stdout.write('joined\n');
  const buf = new Float32Array(1024);
  for (;;) {
    buf.fill(1);
    comm.allReduceSum(buf);
    if (buf[0] !== spec.size) throw new Error(`bad sum ${buf[0]}`);
  }
} catch (err) {
  process.stdout.write(`ERROR ${(err as Error).message.replace(/\n/g, ' ')}\n`);
  process.exit(3);
}

// kernels/index.js as seen by the golden tests in the native variant run: every export unchanged, except that
// createCpuOps() hands out the native backend (1 thread). Prints one marker line so the runner can prove it was used.
import { createOps } from '../src/kernels/index.js';
import type { Ops } from '../src/kernels/index.js';

export * from '../src/kernels/index.js';

let announced = false;

/** The golden tests' backend factory, redirected to the native addon. */
export function createCpuOps(): Ops {
  if (!announced) {
    announced = true;
    process.stderr.write('native-golden-shim: createCpuOps() -> native backend, 1 thread\n');
  }
  return createOps({ backend: 'native', threads: 1 });
}

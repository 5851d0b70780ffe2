// Public surface of kernels/ (level 2: imports common, config). Pure maths on typed arrays.
export * from './ops.js';
export * from './cpu/cpu_ops.js';
export { dequantizeFp8Block, storedToF32, weightToF32, weightRowToF32 } from './cpu/quant.js';
export { ropeInvFreq } from './cpu/rope.js';
export { dot } from './cpu/matmul.js';
export { indexScores, selectTopKCausal } from './cpu/indexer.js';
export * from './native/index.js';

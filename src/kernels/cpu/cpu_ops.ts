// CpuOps: the plain-TypeScript f32 reference backend (readable first; the oracle for faster backends).
import type { AttentionBatch, AttentionParams, ExpertWeights, GroupedMatmulLayout, IndexerParams, Ops, RopeParams, RopeTarget, SparseKeys, StoredTensor, TopKResult, Weight } from '../ops.js';
import { add, sigmoid, siluAndMul, softmax } from './activation.js';
import { attention } from './attention.js';
import { groupedMatmul } from './grouped_matmul.js';
import { indexerTopK } from './indexer.js';
import { embedding, matmul } from './matmul.js';
import { fusedMoe } from './moe.js';
import { layerNorm, rmsNorm } from './norm.js';
import { storedToF32 } from './quant.js';
import { rope } from './rope.js';
import { topk } from './topk.js';

/**
 * The reference backend. `prepareWeight` dequantizes every tensor to f32 at load (one f32 copy per weight, stored
 * bytes dropped), so all math runs on f32 weights. Stateless: one instance can serve any number of models.
 */
export class CpuOps implements Ops {
  readonly name = 'cpu-ref';

  prepareWeight(t: StoredTensor): Weight {
    return { format: 'f32', shape: [...t.shape], data: storedToF32(t) };
  }
  /** A plain array: the stored bytes are dropped once `prepareWeight` has dequantized them. */
  allocateWeightBytes(byteLength: number): Uint8Array {
    return new Uint8Array(byteLength);
  }
  allocateKvBuffer(floats: number): Float32Array {
    return new Float32Array(floats);
  }
  matmul(x: Float32Array, numRows: number, w: Weight, out?: Float32Array): Float32Array {
    return matmul(x, numRows, w, out);
  }
  groupedMatmul(x: Float32Array, numRows: number, groups: number, w: Weight, layout?: GroupedMatmulLayout, out?: Float32Array): Float32Array {
    return groupedMatmul(x, numRows, groups, w, layout, out);
  }
  embedding(ids: Int32Array, table: Weight, out?: Float32Array): Float32Array {
    return embedding(ids, table, out);
  }
  rmsNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, eps: number, out?: Float32Array, xRowStride?: number): Float32Array {
    return rmsNorm(x, numRows, width, weight, eps, out, xRowStride);
  }
  layerNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, bias: Float32Array, eps: number, out?: Float32Array): Float32Array {
    return layerNorm(x, numRows, width, weight, bias, eps, out);
  }
  rope(x: Float32Array, numTokens: number, positions: Int32Array, target: RopeTarget, params: RopeParams): void {
    rope(x, numTokens, positions, target, params);
  }
  softmax(x: Float32Array, numRows: number, width: number, out?: Float32Array): Float32Array {
    return softmax(x, numRows, width, out);
  }
  add(a: Float32Array, b: Float32Array, out?: Float32Array): Float32Array {
    return add(a, b, out);
  }
  sigmoid(x: Float32Array, out?: Float32Array): Float32Array {
    return sigmoid(x, out);
  }
  siluAndMul(gate: Float32Array, up: Float32Array, out?: Float32Array): Float32Array {
    return siluAndMul(gate, up, out);
  }
  topk(x: Float32Array, numRows: number, width: number, k: number): TopKResult {
    return topk(x, numRows, width, k);
  }
  attention(q: Float32Array, numTokens: number, p: AttentionParams, batch: AttentionBatch, sparse?: SparseKeys): Float32Array {
    return attention(q, numTokens, p, batch, sparse);
  }
  indexerTopK(q: Float32Array, weights: Float32Array, numTokens: number, p: IndexerParams, batch: AttentionBatch): Int32Array {
    return indexerTopK(q, weights, numTokens, p, batch);
  }
  fusedMoe(x: Float32Array, numTokens: number, hiddenSize: number, experts: readonly (ExpertWeights | null)[], topkIds: Int32Array, topkWeights: Float32Array, topK: number, out?: Float32Array): Float32Array {
    return fusedMoe(x, numTokens, hiddenSize, experts, topkIds, topkWeights, topK, out);
  }
}

/** A CpuOps instance (stateless; share it freely). */
export function createCpuOps(): Ops {
  return new CpuOps();
}

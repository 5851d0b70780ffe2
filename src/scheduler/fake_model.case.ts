// A small deterministic fake model for scheduler tests: every token writes a hash of (token, position) to its KV loc,
// and a row's logits are a hash of the KV values of all its positions read through reqToToken — so any wrong loc,
// missing prefix or stale cache entry changes the output. Rows are independent (batch-invariant by construction).
import type { ForwardBatch, ForwardOutput } from '../layers/index.js';
import type { KVPoolLayout } from '../mem_cache/index.js';
import type { ForwardModel } from '../executor/index.js';

/** Fake CausalLM over a 1-layer, width-1 KV pool. */
export class FakeModel implements ForwardModel {
  readonly vocabSize: number;
  /** Forward calls and their modes (tests). */
  readonly modes: string[] = [];

  constructor(vocabSize = 64) {
    this.vocabSize = vocabSize;
  }

  kvPoolLayout(): KVPoolLayout {
    return { numLayers: 1, buffers: [{ name: 'k', width: 1 }] };
  }

  forward(b: ForwardBatch): ForwardOutput {
    this.modes.push(b.forwardMode);
    const kv = () => b.kvPool.buffer(0, 'k');
    for (let t = 0; t < b.numTokens; t++) {
      kv()[b.outCacheLoc[t]] = (Math.imul(b.inputIds[t] + 1, 2654435761) ^ Math.imul(b.positions[t] + 7, 40503)) & 0xffffff;
    }
    const V = this.vocabSize;
    const logits = new Float32Array(b.logitRows.length * V);
    const k = kv();
    b.logitRows.forEach((row, i) => {
      let r = 0;
      while (r + 1 < b.numReqs && b.extendStartLoc[r + 1] <= row) r++;
      const pos = b.positions[row];
      let s = 2166136261;
      for (let q = 0; q <= pos; q++) {
        const loc = b.reqToToken[b.reqPoolIndices[r] * b.reqToTokenStride + q];
        s = Math.imul(s ^ k[loc], 16777619) >>> 0;
      }
      for (let v = 0; v < V; v++) {
        const h = Math.imul(s ^ Math.imul(v + 1, 374761393), 668265263) >>> 0;
        logits[i * V + v] = ((h >>> 8) / 16777216) * 8 - 4;
      }
    });
    return { logits };
  }
}

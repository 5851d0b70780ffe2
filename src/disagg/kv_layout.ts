// The KV payload on the wire, independent of how either side splits its KV over TP ranks. Each side's attn_tp ranks
// hold the pool's buffers in one of two ways (SGLang memory_pool.py MHATokenToKVPool / MLATokenToKVPool):
//   - head-split (GQA/MHA K and V, MiniMax): rank r of T holds KV heads kvHeadRange(H, T, r) — H/T heads each, or,
//     when T > H, one head replicated on T/H ranks (layers/parallel.ts kvHeadRange);
//   - replicated (DeepSeek MLA latent + rope key, DSA indexer key): every rank holds the same rows.
// The wire payload of a token range is layer-major (per layer, per buffer, the rows of every token) with full rows:
// all H heads for head-split buffers (each head taken from the first rank holding it), one copy for replicated ones
// (SGLang sends MLA's identical replicas from one prefill rank only — the other target ranks are "dummy" — and so
// does this: rank 0's rows). A prefill side builds it from its ranks' rows (toWire), a decode side of any TP size cuts
// it into its ranks' rows (fromWire): SGLang's TP-size mapping (decode rank d reads its heads from the prefill ranks
// that hold them, rank_mapping.ts) done in one place. With one rank the wire payload is the pool's own rows.
import { InvalidRequestError, kvRowBytes, type KvCodec } from '../common/index.js';
import type { KVPool } from '../mem_cache/index.js';

/** Buffers split by KV head over the attn_tp ranks (the GQA/MHA pool's K and V). */
const HEAD_SPLIT_BUFFERS: readonly string[] = ['k', 'v'];

/** How a group's KV is spread over its attn_tp ranks. */
export interface KvShardSpec {
  /** attn_tp ranks holding the pool (1: the pool holds everything). */
  readonly ranks: number;
  /** GQA/MHA: the model's KV heads and head size (K and V are head-split); null for MLA (everything replicated). */
  readonly kvHeads: { readonly numKvHeads: number; readonly headDim: number } | null;
}

/** KV heads [start, start + count) of attn_tp rank `rank` of `ranks` (layers/parallel.ts kvHeadRange's rule). */
export function kvHeadRangeOf(numKvHeads: number, ranks: number, rank: number): { start: number; count: number } {
  if (numKvHeads >= ranks) {
    const count = numKvHeads / ranks;
    return { start: rank * count, count };
  }
  return { start: Math.floor(rank / (ranks / numKvHeads)), count: 1 };
}

/** Bytes per element of an elementwise codec (head slices are byte ranges of a row). */
function elemBytes(c: KvCodec): number | null {
  return c.kind === 'f32' ? 4 : c.kind === 'bf16' ? 2 : c.kind === 'fp8_e4m3' || c.kind === 'fp8_e5m2' ? 1 : null;
}

interface BufferPlan {
  readonly name: string;
  /** Row bytes on a rank and on the wire. */
  readonly rankRow: number;
  readonly wireRow: number;
  /** Bytes of one head (head-split buffers), else 0. */
  readonly headBytes: number;
  readonly codec: KvCodec;
}

/** A group's KV layout on the wire (see the file comment). */
export class KvWireLayout {
  /** Per layer, per buffer. */
  private readonly plan: BufferPlan[][];
  /** Wire bytes of one token over every layer and buffer. */
  readonly bytesPerToken: number;
  /** Rank bytes of one token (each rank's pool). */
  readonly rankBytesPerToken: number;
  private readonly heads: { start: number; count: number }[];

  /**
   * @param pool the group leader's pool (every rank's has the same layout)
   * @throws InvalidRequestError for a head-split buffer whose codec is not elementwise or whose width is not the rank's heads
   */
  constructor(pool: KVPool, readonly spec: KvShardSpec) {
    const kh = spec.kvHeads;
    this.heads = Array.from({ length: spec.ranks }, (_, r) => (kh ? kvHeadRangeOf(kh.numKvHeads, spec.ranks, r) : { start: 0, count: 0 }));
    this.plan = [];
    let wire = 0;
    let rank = 0;
    for (let l = 0; l < pool.layout.numLayers; l++) {
      const row: BufferPlan[] = [];
      for (const b of pool.layout.buffers) {
        const st = pool.store(l, b.name);
        const rankRow = st.rowFloats * 4;
        let wireRow = rankRow;
        let headBytes = 0;
        if (kh && HEAD_SPLIT_BUFFERS.includes(b.name)) {
          const e = elemBytes(st.codec);
          if (e === null) throw new InvalidRequestError(`KV buffer '${b.name}' is head-split but stored as ${st.codec.kind}`, null);
          if (b.width !== this.heads[0].count * kh.headDim) throw new InvalidRequestError(`KV buffer '${b.name}' has width ${b.width}, not ${this.heads[0].count} heads of ${kh.headDim}`, null);
          headBytes = kh.headDim * e;
          wireRow = kvRowBytes(st.codec, kh.numKvHeads * kh.headDim);
        }
        row.push({ name: b.name, rankRow, wireRow, headBytes, codec: st.codec });
        wire += wireRow;
        rank += rankRow;
      }
      this.plan.push(row);
    }
    this.bytesPerToken = wire;
    this.rankBytesPerToken = rank;
  }

  /**
   * What both sides must agree on: layers, and per buffer its name, codec (with its scale) and wire row size. Different
   * checkpoints or KV dtypes would scramble the cache; TP sizes may differ.
   */
  get fingerprint(): string {
    const parts: string[] = [`layers=${this.plan.length}`];
    this.plan.forEach((row, l) => {
      for (const p of row) parts.push(`${l}:${p.name}:${p.codec.kind}${'scale' in p.codec ? `@${p.codec.scale}` : ''}${p.codec.kind === 'fp8_block' ? `/${p.codec.fp8Dims}` : ''}:${p.wireRow}`);
    });
    return parts.join(',');
  }

  /** True when the wire payload is rank 0's rows as they are (one rank, or nothing head-split). */
  get identity(): boolean {
    return this.spec.ranks === 1;
  }

  /** True when every rank's rows are needed to build the wire payload (head-split buffers over several ranks). */
  get needsAllRanks(): boolean {
    return this.spec.ranks > 1 && this.spec.kvHeads !== null;
  }

  /**
   * The wire payload of `n` tokens from the ranks' rows (rank order; replicated buffers read from rank 0 only).
   * @param rankRows per rank its rows (gatherKvRows of its pool); only [0] is read when !needsAllRanks
   */
  toWire(rankRows: readonly Uint8Array[], n: number): Uint8Array {
    if (this.identity) return rankRows[0];
    const out = Buffer.allocUnsafe(n * this.bytesPerToken);
    let wOff = 0;
    let rOff = 0;
    const H = this.spec.kvHeads?.numKvHeads ?? 0;
    for (const row of this.plan) {
      for (const p of row) {
        if (p.headBytes === 0) {
          out.set(rankRows[0].subarray(rOff, rOff + n * p.rankRow), wOff);
        } else {
          out.fill(0, wOff, wOff + n * p.wireRow); // row padding
          for (let h = 0; h < H; h++) {
            const r = this.heads.findIndex((x) => h >= x.start && h < x.start + x.count);
            const src = rankRows[r];
            const so = (h - this.heads[r].start) * p.headBytes;
            for (let t = 0; t < n; t++) {
              const s = rOff + t * p.rankRow + so;
              out.set(src.subarray(s, s + p.headBytes), wOff + t * p.wireRow + h * p.headBytes);
            }
          }
        }
        wOff += n * p.wireRow;
        rOff += n * p.rankRow;
      }
    }
    return out;
  }

  /** Each rank's rows (rank order, layer-major) of `n` tokens of a wire payload. */
  fromWire(wire: Uint8Array, n: number): Uint8Array[] {
    if (this.identity) return [wire];
    return this.heads.map((hr) => {
      const out = Buffer.allocUnsafe(n * this.rankBytesPerToken);
      let wOff = 0;
      let rOff = 0;
      for (const row of this.plan) {
        for (const p of row) {
          if (p.headBytes === 0) out.set(wire.subarray(wOff, wOff + n * p.rankRow), rOff);
          else {
            const len = hr.count * p.headBytes;
            out.fill(0, rOff, rOff + n * p.rankRow);
            for (let t = 0; t < n; t++) {
              const s = wOff + t * p.wireRow + hr.start * p.headBytes;
              out.set(wire.subarray(s, s + len), rOff + t * p.rankRow);
            }
          }
          wOff += n * p.wireRow;
          rOff += n * p.rankRow;
        }
      }
      return out;
    });
  }
}

// Which prefill ranks a decode rank reads its KV from (SGLang disaggregation/common/conn.py
// CommonKVManager._resolve_rank_mapping), and which prefill DP rank holds a room.
//   - equal attn_tp sizes: decode rank d ↔ prefill rank d;
//   - decode larger (D > P): D/P decode ranks share prefill rank ⌊d / (D/P)⌋, which waits for D/P destinations
//     (required_dst_info_num); for MHA/GQA each gets its slice of that rank's heads;
//   - decode smaller (D < P): decode rank d reads from prefill ranks d·(P/D) … (d+1)·(P/D)−1: for MHA/GQA all of them
//     (each sends its heads: P/D responses), for MLA only the first (the others hold the same replica and are "dummy").
// tsglang's ranks are threads behind one transfer endpoint per group, so the rows of every target rank travel on one
// connection as one wire payload (kv_layout.ts); the mapping drives the per-rank /route lookups and is sent with the
// destination.

/** SGLang's PrefillServerInfo rank-mapping fields for one decode rank. */
export interface RankMapping {
  /** The prefill rank whose rows this decode rank uses (MLA: the one real sender). */
  readonly targetTpRank: number;
  /** Every prefill rank this decode rank talks to (MLA: the others are dummy). */
  readonly targetTpRanks: readonly number[];
  /** Destinations a prefill rank waits for (decode larger than prefill). */
  readonly requiredDstInfoNum: number;
  /** Prefill responses this decode rank waits for. */
  readonly requiredPrefillResponseNum: number;
}

/**
 * SGLang's rank mapping for decode attn_tp rank `decodeRank` of `decodeTp`, against a prefill side of `prefillTp`.
 * @param isMla the KV is MLA (one replica on every rank)
 */
export function resolveRankMapping(decodeTp: number, decodeRank: number, prefillTp: number, isMla: boolean): RankMapping {
  const d = decodeRank % decodeTp;
  if (decodeTp === prefillTp) return { targetTpRank: d, targetTpRanks: [d], requiredDstInfoNum: 1, requiredPrefillResponseNum: 1 };
  if (decodeTp > prefillTp) {
    const t = Math.floor(d / (decodeTp / prefillTp));
    return { targetTpRank: t, targetTpRanks: [t], requiredDstInfoNum: decodeTp / prefillTp, requiredPrefillResponseNum: 1 };
  }
  const k = prefillTp / decodeTp;
  const targets = Array.from({ length: k }, (_, i) => d * k + i);
  return { targetTpRank: targets[0], targetTpRanks: targets, requiredDstInfoNum: 1, requiredPrefillResponseNum: isMla ? 1 : k };
}

/**
 * The prefill DP rank of a room when the prefill server dispatches by follow_bootstrap_room (SGLang: room mod dp_size).
 * Rooms are integers below 2^53 (exact in JSON), so the modulo is exact.
 */
export function followBootstrapRoomDpRank(room: number, dpSize: number): number {
  return dpSize <= 1 ? 0 : room % dpSize;
}

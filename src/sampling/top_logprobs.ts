// The top-n [logprob, id] pairs of one logprob row (SGLang's top_logprobs / top_logprobs_num): a sorted insertion
// list for the usual small n, a linear-time selection plus a sort of the n winners for large n (top_logprobs_num may
// be the whole vocabulary). Pure: a row in, pairs out; knows nothing of requests.

/** Up to this n, the top list is kept sorted by insertion (O(V·n), fastest for the usual 0..20). */
const TOP_BY_INSERTION_MAX = 256;
/** Ids below 2^ID_BITS get packed (value bits, id) keys; ordered value bits (32) + ID_BITS ≤ 53, exact in a double. */
const ID_BITS = 21;
const ID_SCALE = 2 ** ID_BITS;
const ID_MASK = ID_SCALE - 1;

/** Bit view of one f32 (the packed keys). */
const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/**
 * Top-n [logprob, id] of a logprob row: descending by value, ties by lower id; NaN after every number (n ≥ V: the
 * whole row). Small n (≤ 256) keeps a sorted list of the best n; larger n selects the n best of V packed keys in
 * expected O(V) (quickselect, falling back to a sort of what is left if it partitions badly) and sorts only them:
 * O(V + n log n) instead of sorting the whole row.
 * @param lp [V] f32 logprobs (not modified)
 * @param n pairs wanted (≤ 0: none)
 * @returns min(n, V) pairs `[logprob, id]`
 */
export function topLogprobsOf(lp: Float32Array, n: number): [number, number][] {
  if (n <= 0) return [];
  if (n <= TOP_BY_INSERTION_MAX) return topByInsertion(lp, n);
  const V = lp.length;
  const k = Math.min(n, V);
  if (V > ID_SCALE) return topBySort(lp, k);
  const keys = new Float64Array(V);
  for (let id = 0; id < V; id++) keys[id] = packKey(lp[id], id);
  if (k < V) selectLargest(keys, k);
  const top = keys.subarray(V - k).sort();
  const out: [number, number][] = new Array(k);
  for (let r = 0; r < k; r++) {
    const id = ID_MASK - (top[k - 1 - r] % ID_SCALE);
    out[r] = [lp[id], id];
  }
  return out;
}

/**
 * A key whose numeric order is (value, then lower id) order: the f32 bits of `v` mapped to an unsigned order
 * (negatives complemented, non-negatives with the sign bit set; −0 as +0; NaN 0, below −Infinity) above the
 * complemented id.
 * @param v an f32 value @param id 0 ≤ id < 2^ID_BITS
 */
function packKey(v: number, id: number): number {
  let ord = 0;
  if (v === v) {
    F32[0] = v === 0 ? 0 : v;
    const u = U32[0];
    ord = u >= 0x80000000 ? ~u >>> 0 : u + 0x80000000;
  }
  return ord * ID_SCALE + (ID_MASK - id);
}

/**
 * Rearranges `a` so that its k largest values are `a[len − k, len)` (in no particular order): Hoare's FIND with a
 * median-of-three pivot (Wirth, Algorithms + Data Structures, §2.3.4), expected O(len). After `maxRounds`
 * partitions the range left is sorted instead, so the worst case stays O(len log len).
 * @param a distinct values (packed keys), rearranged in place
 * @param k 1 ≤ k < a.length
 * @param maxRounds partition rounds before the sort fallback (default 4·log2(len) + 8)
 */
export function selectLargest(a: Float64Array, k: number, maxRounds = 4 * Math.ceil(Math.log2(a.length)) + 8): void {
  const t = a.length - k; // a[t] must end as the value of ascending rank t
  let lo = 0;
  let hi = a.length - 1;
  let rounds = 0;
  while (lo < hi) {
    if (rounds++ >= maxRounds) {
      a.subarray(lo, hi + 1).sort();
      return;
    }
    const x = median3(a[lo], a[(lo + hi) >>> 1], a[hi]);
    let i = lo;
    let j = hi;
    do {
      while (a[i] < x) i++;
      while (x < a[j]) j--;
      if (i <= j) {
        const s = a[i];
        a[i] = a[j];
        a[j] = s;
        i++;
        j--;
      }
    } while (i <= j);
    if (j < t) lo = i;
    if (t < i) hi = j;
  }
}

function median3(a: number, b: number, c: number): number {
  if (a < b) return b < c ? b : a < c ? c : a;
  return a < c ? a : b < c ? c : b;
}

/** Small n: a list kept sorted by insertion (ties: the earlier, lower id stays ahead). */
function topByInsertion(lp: Float32Array, n: number): [number, number][] {
  const top: [number, number][] = [];
  for (let i = 0; i < lp.length; i++) {
    const v = lp[i];
    if (top.length === n && v <= top[n - 1][0]) continue;
    let j = top.length < n ? top.length : n - 1;
    if (top.length < n) top.push([v, i]);
    else top[j] = [v, i];
    while (j > 0 && top[j - 1][0] < v) {
      [top[j - 1], top[j]] = [top[j], top[j - 1]];
      j--;
    }
  }
  return top;
}

/** Vocabularies past 2^ID_BITS ids (none in practice): a comparator sort of every id. */
function topBySort(lp: Float32Array, k: number): [number, number][] {
  const ids = Array.from({ length: lp.length }, (_, i) => i);
  ids.sort((a, b) => {
    const na = lp[a] !== lp[a];
    if (na !== (lp[b] !== lp[b])) return na ? 1 : -1;
    return lp[b] - lp[a] || a - b;
  });
  return ids.slice(0, k).map((i) => [lp[i], i]);
}

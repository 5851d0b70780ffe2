// Bit-exact ports of the two random streams SGLang's benchmark clients draw from: numpy's legacy global
// RandomState (np.random.seed / randint / exponential / random) and CPython's `random` module (seed / random /
// shuffle / sample / choices). Both are MT19937 underneath. Only the bench and eval clients use these: the
// engine's randomness lives in common/rng.ts.
//
// Algorithms: M. Matsumoto & T. Nishimura, "Mersenne Twister" (ACM TOMACS 1998), reference mt19937ar.c
// (init_genrand, init_by_array, genrand_int32, genrand_res53). Draw rules: numpy
// `numpy/random/src/distributions/distributions.c` (bounded masked uint32, legacy exponential) and CPython
// `Modules/_randommodule.c` + `Lib/random.py` (seed from an int, _randbelow via getrandbits, shuffle, sample,
// choices). bench-spec.md §1.4 records that this reproduces the seed documents' token totals.

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;

/** The MT19937 generator: 624 words of state, 32-bit outputs. */
export class MT19937 {
  private readonly mt = new Uint32Array(N);
  private mti = N + 1;

  /**
   * Seeds with one 32-bit integer (mt19937ar `init_genrand`; numpy `np.random.seed(int)`).
   * @param seed 0 ≤ seed < 2^32
   */
  seedInt(seed: number): void {
    const mt = this.mt;
    mt[0] = seed >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      // 1812433253 * prev + i, mod 2^32 (split the multiply to stay exact in doubles)
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.mti = N;
  }

  /**
   * Seeds with a key of 32-bit words (mt19937ar `init_by_array`; CPython `random.seed(int)`).
   * @param key [keyLength] u32 words, least significant first
   */
  seedArray(key: readonly number[]): void {
    const mt = this.mt;
    this.seedInt(19650218);
    let i = 1;
    let j = 0;
    const keyLength = key.length;
    for (let k = Math.max(N, keyLength); k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1664525)) + (key[j] >>> 0) + j) >>> 0;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
      if (j >= keyLength) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
      mt[i] = ((mt[i] ^ Math.imul(prev, 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1];
        i = 1;
      }
    }
    mt[0] = 0x80000000;
    this.mti = N;
  }

  /** Next 32-bit output (mt19937ar `genrand_int32`), as an unsigned number. */
  nextU32(): number {
    const mt = this.mt;
    if (this.mti >= N) {
      if (this.mti === N + 1) this.seedInt(5489);
      let kk = 0;
      for (; kk < N - M; kk++) {
        const y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + M] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      for (; kk < N - 1; kk++) {
        const y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + (M - N)] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      const y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
      mt[N - 1] = mt[M - 1] ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      this.mti = 0;
    }
    let y = mt[this.mti++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** Uniform double in [0, 1) with 53 random bits (mt19937ar `genrand_res53`; numpy / CPython `random()`). */
  nextDouble(): number {
    const a = this.nextU32() >>> 5;
    const b = this.nextU32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }
}

/**
 * numpy's legacy global generator (`np.random.seed`, `np.random.randint`, `np.random.exponential`,
 * `np.random.random`), restricted to the calls bench_serving makes.
 */
export class NumpyRandomState {
  private readonly mt = new MT19937();

  /**
   * @param seed `np.random.seed(seed)`: 0 ≤ seed < 2^32
   * @throws RangeError for a seed outside [0, 2^32)
   */
  constructor(seed: number) {
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new RangeError(`numpy seed must be an integer in [0, 2**32 - 1], got ${seed}`);
    }
    this.mt.seedInt(seed);
  }

  /**
   * `np.random.randint(low, high, size)`: uniform integers in [low, high) (int64 path, masked rejection sampling
   * on 32-bit draws; numpy `random_bounded_uint64_fill` with `use_masked`).
   * @param low inclusive lower bound
   * @param high exclusive upper bound; high - low ≤ 2^32
   * @param size number of values
   * @returns [size] integers
   * @throws RangeError if high ≤ low or the range exceeds 2^32
   */
  randint(low: number, high: number, size: number): number[] {
    if (!(high > low)) throw new RangeError(`randint: low >= high (${low} >= ${high})`);
    const rng = high - low - 1;
    if (rng > 0xffffffff) throw new RangeError(`randint: range ${rng + 1} exceeds 2**32 (not ported)`);
    const out = new Array<number>(size);
    if (rng === 0) return out.fill(low);
    if (rng === 0xffffffff) {
      for (let i = 0; i < size; i++) out[i] = low + this.mt.nextU32();
      return out;
    }
    let mask = rng;
    mask |= mask >>> 1;
    mask |= mask >>> 2;
    mask |= mask >>> 4;
    mask |= mask >>> 8;
    mask |= mask >>> 16;
    mask >>>= 0;
    for (let i = 0; i < size; i++) {
      let v: number;
      do v = (this.mt.nextU32() & mask) >>> 0;
      while (v > rng);
      out[i] = low + v;
    }
    return out;
  }

  /** `np.random.random()`: uniform double in [0, 1). */
  random(): number {
    return this.mt.nextDouble();
  }

  /**
   * `np.random.exponential(scale)` (legacy): `-log(1 - U) * scale`.
   * @param scale mean of the distribution (seconds, for request inter-arrival gaps)
   */
  exponential(scale: number): number {
    return -Math.log(1 - this.mt.nextDouble()) * scale;
  }
}

/** CPython's `random.Random` (seed from an int, random, shuffle, sample, choices, randrange). */
export class PythonRandom {
  private readonly mt = new MT19937();

  /** @param seed `random.seed(seed)` / `random.Random(seed)` with an int (any sign, up to 2^53) */
  constructor(seed: number) {
    this.seed(seed);
  }

  /**
   * `random.seed(int)`: init_by_array over the 32-bit words of |seed| (key [0] for 0).
   * @throws RangeError for a non-integer or unsafe-integer seed
   */
  seed(seed: number): void {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`python seed must be a safe integer, got ${seed}`);
    let n = Math.abs(seed);
    const key: number[] = [];
    while (n > 0) {
      key.push(n % 4294967296);
      n = Math.floor(n / 4294967296);
    }
    if (key.length === 0) key.push(0);
    this.mt.seedArray(key);
  }

  /** `random.random()`: uniform double in [0, 1). */
  random(): number {
    return this.mt.nextDouble();
  }

  /**
   * `random.getrandbits(k)` for 0 < k ≤ 32.
   * @throws RangeError for k outside (0, 32]
   */
  getrandbits(k: number): number {
    if (k <= 0 || k > 32) throw new RangeError(`getrandbits: k must be in 1..32 here, got ${k}`);
    return this.mt.nextU32() >>> (32 - k);
  }

  /**
   * `Random._randbelow(n)`: uniform integer in [0, n) by rejection on `getrandbits(n.bit_length())`.
   * @param n 0 < n ≤ 2^32
   */
  randbelow(n: number): number {
    if (n <= 0) return 0;
    const k = bitLength(n);
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** `random.shuffle(x)` in place (Fisher–Yates from the end). */
  shuffle<T>(x: T[]): void {
    for (let i = x.length - 1; i > 0; i--) {
      const j = this.randbelow(i + 1);
      const t = x[i];
      x[i] = x[j];
      x[j] = t;
    }
  }

  /**
   * `random.sample(population, k)`: k distinct elements in selection order (pool method for small populations,
   * set method otherwise, as CPython chooses).
   * @throws RangeError if k > population.length
   */
  sample<T>(population: readonly T[], k: number): T[] {
    const n = population.length;
    if (k < 0 || k > n) throw new RangeError('Sample larger than population or is negative');
    const result = new Array<T>(k);
    let setsize = 21;
    if (k > 5) setsize += 4 ** Math.ceil(Math.log(k * 3) / Math.log(4));
    if (n <= setsize) {
      const pool = population.slice();
      for (let i = 0; i < k; i++) {
        const j = this.randbelow(n - i);
        result[i] = pool[j];
        pool[j] = pool[n - i - 1];
      }
    } else {
      const selected = new Set<number>();
      for (let i = 0; i < k; i++) {
        let j = this.randbelow(n);
        while (selected.has(j)) j = this.randbelow(n);
        selected.add(j);
        result[i] = population[j];
      }
    }
    return result;
  }

  /** `random.choices(population, k=k)` without weights: `population[floor(random() * n)]`, k times. */
  choices<T>(population: readonly T[], k: number): T[] {
    const n = population.length;
    const out = new Array<T>(k);
    for (let i = 0; i < k; i++) out[i] = population[Math.floor(this.random() * n)];
    return out;
  }

  /** `random.choice(seq)`: one element via randbelow(len). */
  choice<T>(seq: readonly T[]): T {
    return seq[this.randbelow(seq.length)];
  }
}

function bitLength(n: number): number {
  let k = 0;
  while (n > 0) {
    k++;
    n = Math.floor(n / 2);
  }
  return k;
}

// Seeded pseudo-random numbers: the only source of randomness in the engine (no Math.random).

/**
 * Small fast PRNG (xoshiro128**, Blackman & Vigna 2018) seeded through splitmix32.
 * Deterministic for a given seed; not cryptographic.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** @param seed any integer (taken modulo 2^32; the upper part of a larger integer is mixed in too) */
  constructor(seed: number) {
    let x = (seed >>> 0) ^ Math.floor(seed / 4294967296);
    const next = (): number => {
      x = (x + 0x9e3779b9) | 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** The generator's state (four u32 words): a copy made from it continues the same sequence (Rng.fromState). */
  getState(): [number, number, number, number] {
    return [this.s0 >>> 0, this.s1 >>> 0, this.s2 >>> 0, this.s3 >>> 0];
  }

  /** Continues from a state taken with getState (pipeline parallelism: the last stage samples, the scheduler keeps the Rng). */
  setState(s: readonly number[]): void {
    this.s0 = s[0] | 0;
    this.s1 = s[1] | 0;
    this.s2 = s[2] | 0;
    this.s3 = s[3] | 0;
  }

  /** A generator at a state taken with getState. */
  static fromState(s: readonly number[]): Rng {
    const r = new Rng(0);
    r.setState(s);
    return r;
  }

  /** Next uniform 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform float in [0, 1) with 32 bits of randomness. */
  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }

  /** Standard normal sample (Box–Muller). */
  nextGaussian(): number {
    let u = 0;
    while (u === 0) u = this.nextFloat();
    const v = this.nextFloat();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Uniform integer in [0, n). */
  nextInt(n: number): number {
    return Math.floor(this.nextFloat() * n);
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

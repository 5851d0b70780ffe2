// Inputs of the communicator tests: a fixed function of (rank, index, salt), computed alike on every thread.

/** Rank r's input element i for a collective with salt s (f32, order-sensitive sums: magnitudes differ). */
export function inputValue(rank: number, i: number, salt: number): number {
  return Math.fround(Math.sin(rank * 7919 + i * 13 + salt) * 10 ** ((i + rank) % 7));
}


// ReqToTokenPool: the request → token-locs table (SGLang memory_pool.py ReqToTokenPool). Rows are handed out to
// running requests; row r, column p holds the KV loc of that request's token at position p. Never sees a Req.
import { assert, OutOfKVCacheError } from '../common/index.js';

/**
 * A `[size, maxContextLen]` i32 table of KV locs plus a free list of rows.
 * The table is shared (not copied) into every ForwardBatch as `reqToToken`. Rows are handed out lowest first and the
 * table's storage grows (doubling) as higher rows are first used, so thousands of rows of a long context cost memory
 * only when that many requests really run. NOTE: growth replaces the array; read `reqToToken` per step.
 */
export class ReqToTokenPool {
  /** Number of rows (max concurrently running requests). */
  readonly size: number;
  /** Row length: the longest sequence (prompt + output) a request may reach. */
  readonly maxContextLen: number;
  /** [committedRows, maxContextLen] i32 req row × position → loc (committedRows ≤ size grows on demand). */
  reqToToken: Int32Array;
  private readonly freeRows: number[];

  /**
   * @param size rows
   * @param maxContextLen positions per row
   * @throws InternalError if a size is not positive
   */
  constructor(size: number, maxContextLen: number) {
    assert(size > 0 && maxContextLen > 0, 'ReqToTokenPool: sizes must be positive');
    this.size = size;
    this.maxContextLen = maxContextLen;
    this.reqToToken = new Int32Array(Math.min(size, 4) * maxContextLen);
    // Pop from the end: lowest row first.
    this.freeRows = Array.from({ length: size }, (_, i) => size - 1 - i);
  }

  /** Rows still free. */
  availableSize(): number {
    return this.freeRows.length;
  }

  /**
   * Takes a free row.
   * @throws OutOfKVCacheError when no row is free (the scheduler checks `availableSize` first)
   */
  alloc(): number {
    const row = this.freeRows.pop();
    if (row === undefined) throw new OutOfKVCacheError('ReqToTokenPool: no free request slot');
    const rows = this.reqToToken.length / this.maxContextLen;
    if (row >= rows) {
      const grown = new Int32Array(Math.min(this.size, Math.max(row + 1, rows * 2)) * this.maxContextLen);
      grown.set(this.reqToToken);
      this.reqToToken = grown;
    }
    return row;
  }

  /** Returns a row to the free list. @throws InternalError for an out-of-range row */
  free(row: number): void {
    assert(row >= 0 && row < this.size, () => `ReqToTokenPool: bad row ${row}`);
    this.freeRows.push(row);
  }

  /**
   * Writes locs into a row at positions [start, start + locs.length).
   * @param locs [n] i32 KV locs
   * @throws InternalError when the range leaves the row
   */
  write(row: number, start: number, locs: ArrayLike<number>): void {
    assert(start >= 0 && start + locs.length <= this.maxContextLen, () => `ReqToTokenPool: write [${start}, ${start + locs.length}) exceeds ${this.maxContextLen}`);
    this.reqToToken.set(locs, row * this.maxContextLen + start);
  }

  /** Copy of a row's locs at positions [start, end). @returns [end - start] i32 */
  read(row: number, start: number, end: number): Int32Array {
    const base = row * this.maxContextLen;
    return this.reqToToken.slice(base + start, base + end);
  }

  /** Loc at one position of a row. */
  locAt(row: number, pos: number): number {
    return this.reqToToken[row * this.maxContextLen + pos];
  }

  /** Frees every row. */
  clear(): void {
    this.freeRows.length = 0;
    for (let i = this.size - 1; i >= 0; i--) this.freeRows.push(i);
  }
}

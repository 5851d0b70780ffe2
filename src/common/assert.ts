// Invariant checks kept in production builds. They throw InternalError (a bug), never user errors.
import { InternalError } from './errors.js';

/**
 * Throws InternalError with `message` unless `cond` holds.
 * @throws InternalError when the condition is false
 */
export function assert(cond: unknown, message: string | (() => string) = 'assertion failed'): asserts cond {
  if (!cond) throw new InternalError(typeof message === 'function' ? message() : message);
}

/**
 * Exhaustiveness check for `switch` over a string-literal union.
 * @throws InternalError always (reaching it is a bug)
 */
export function assertNever(value: never, what = 'value'): never {
  throw new InternalError(`unexpected ${what}: ${String(value)}`);
}

/**
 * Checks a tensor shape against the expected one.
 * @throws InternalError naming `what` when the shapes differ
 */
export function assertShape(actual: readonly number[], expected: readonly number[], what: string): void {
  if (actual.length !== expected.length || actual.some((d, i) => d !== expected[i])) {
    throw new InternalError(`${what}: shape [${actual.join(', ')}] != expected [${expected.join(', ')}]`);
  }
}

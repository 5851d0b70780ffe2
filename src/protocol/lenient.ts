// zod building blocks shared by the wire schemas (openai.ts, generate.ts): numbers that accept numeric strings,
// as pydantic's lax mode does for SGLang's request models, and the `nullish` optional form pydantic's
// `Optional[...] = None` fields take (absent, null and a value are all valid).
import { z } from 'zod';

/** A number that also accepts a numeric string ("0.5" → 0.5); other strings fail as `invalid_type`. */
export const num = () =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v), z.number());

/** An integer with the same leniency ("7" → 7; "7.5" and 7.5 fail). */
export const int = () =>
  z.preprocess((v) => (typeof v === 'string' && /^\s*[+-]?\d+\s*$/.test(v) ? Number(v) : v), z.number().int());

/** `Optional[T] = None`: absent, null or a valid T. */
export const opt = <T extends z.ZodType>(t: T) => t.nullish();

// Typing of raw XML-style parameter values from the tool's JSON Schema (MiniMax-M2, parsers-spec §4.2).
// Source: python/sglang/srt/function_call/minimax_m2.py (schema-typed revision, after the fix of issue 16057).

import { PyFloat, pyJsonLoads } from '../common/index.js';
import type { PyJson } from '../common/index.js';

type JsonType = 'null' | 'boolean' | 'integer' | 'number' | 'string' | 'array' | 'object';

function typeOfEnumValue(v: unknown): JsonType | null {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  if (typeof v === 'string') return 'string';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') return 'object';
  return null;
}

/**
 * Candidate JSON types of a property schema: its `type` (string or list), the types of its `enum` values, and
 * recursively those of `anyOf` / `oneOf` / `allOf` members. Empty when the schema names none.
 * @param schema a property schema (any value; non-objects give no types)
 */
export function schemaTypes(schema: unknown, out: Set<string> = new Set()): Set<string> {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return out;
  const s = schema as Record<string, unknown>;
  if (typeof s.type === 'string') out.add(s.type);
  else if (Array.isArray(s.type)) for (const t of s.type) if (typeof t === 'string') out.add(t);
  if (Array.isArray(s.enum)) {
    for (const v of s.enum) {
      const t = typeOfEnumValue(v);
      if (t !== null) out.add(t);
    }
  }
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const members = s[key];
    if (Array.isArray(members)) for (const m of members) schemaTypes(m, out);
  }
  return out;
}

/** Python `int(text)` for decimal literals (surrounding whitespace and a sign allowed), else null. */
function parsePyInt(text: string): number | bigint | null {
  const t = text.trim();
  if (!/^[+-]?\d+$/.test(t)) return null;
  const n = Number(t);
  return Number.isSafeInteger(n) ? (n === 0 ? 0 : n) : BigInt(t.replace(/^\+/, ''));
}

/** Python `float(text)` for finite decimal literals, else null. */
function parsePyFloat(text: string): number | null {
  const t = text.trim();
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t)) return null;
  const x = Number(t);
  return Number.isFinite(x) ? x : null;
}

function tryJson(text: string): { ok: true; value: PyJson } | { ok: false } {
  try {
    return { ok: true, value: pyJsonLoads(text) };
  } catch {
    return { ok: false };
  }
}

/**
 * Converts one raw parameter value to a JSON value using the called tool's schema.
 *
 * 1. Candidate types from `parameters.properties[key]` ({@link schemaTypes}); none, or key not declared → string.
 * 2. `null` (case-insensitive) → null.
 * 3. Candidates are tried in the fixed order integer → number (integral floats become ints) → boolean
 *    (true/1/yes/on, false/0/no/off) → object/array (JSON) → string (raw, unchanged).
 * 4. Nothing matched → JSON-decoded raw value, else the raw string.
 * @param raw the value text (newlines at both ends already removed)
 * @param key the parameter name
 * @param parameters the tool's `parameters` JSON Schema (any value)
 * @returns a value for `pyJsonDumps` (ints as number/bigint, floats as {@link PyFloat})
 */
export function convertParameterValue(raw: string, key: string, parameters: unknown): PyJson {
  let property: unknown;
  if (parameters !== null && typeof parameters === 'object' && !Array.isArray(parameters)) {
    const props = (parameters as Record<string, unknown>).properties;
    if (props !== null && typeof props === 'object' && !Array.isArray(props) && Object.hasOwn(props, key)) {
      property = (props as Record<string, unknown>)[key];
    }
  }
  let types = schemaTypes(property);
  if (types.size === 0) types = new Set(['string']);

  if (raw.trim().toLowerCase() === 'null') return null;

  if (types.has('integer')) {
    const n = parsePyInt(raw);
    if (n !== null) return n;
  }
  if (types.has('number')) {
    const x = parsePyFloat(raw);
    if (x !== null) return Number.isInteger(x) ? (x === 0 ? 0 : x) : new PyFloat(x);
  }
  if (types.has('boolean')) {
    const b = raw.trim().toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(b)) return true;
    if (['false', '0', 'no', 'off'].includes(b)) return false;
  }
  if (types.has('object') || types.has('array')) {
    const j = tryJson(raw);
    if (j.ok) return j.value;
  }
  if (types.has('string')) return raw;
  const j = tryJson(raw);
  return j.ok ? j.value : raw;
}

// The constraint kinds the structured-output tests sample, each with its independent validator. Schemas keep their
// strings bounded (maxLength / enum): the checkpoints have random weights, so only the constraint shapes the output,
// and an unbounded free string would rarely end.
import { ARITH_EBNF, fullMatch, jsonTextErrors, matchesArith } from './so_helpers.js';

/** A bounded variant of the seed's weather-tool parameters. */
export const WEATHER_SCHEMA = {
  type: 'object',
  properties: {
    location: { type: 'string', maxLength: 12 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 14 },
  },
  required: ['location', 'unit'],
  additionalProperties: false,
};

/** Test tools with bounded arguments (so random-weight models finish their calls). */
export const BOUNDED_TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: WEATHER_SCHEMA } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET', 'JST'] } }, required: ['zone'], additionalProperties: false } } },
];

export const EMAIL_REGEX = '[a-z]{1,8}@[a-z]{1,6}\\.(com|org|net)';

/** A constraint kind: the sampling-param field, its value, and the validator (null = valid, else why). */
export interface ConstraintCase {
  readonly name: string;
  readonly params: Record<string, string>;
  validate(text: string): string | null;
}

export const CASES: readonly ConstraintCase[] = [
  { name: 'json_schema', params: { json_schema: JSON.stringify(WEATHER_SCHEMA) }, validate: (t) => jsonTextErrors(WEATHER_SCHEMA, t) },
  { name: 'regex', params: { regex: EMAIL_REGEX }, validate: (t) => (fullMatch(EMAIL_REGEX, t) ? null : `no full match: ${JSON.stringify(t)}`) },
  { name: 'ebnf', params: { ebnf: ARITH_EBNF }, validate: (t) => (matchesArith(t) ? null : `not an arithmetic expression: ${JSON.stringify(t)}`) },
  {
    name: 'structural_tag',
    params: { structural_tag: JSON.stringify({ type: 'structural_tag', format: { type: 'tag', begin: '<answer>', content: { type: 'json_schema', json_schema: WEATHER_SCHEMA }, end: '</answer>' } }) },
    validate: (t) => {
      const m = /^<answer>([\s\S]*)<\/answer>$/.exec(t);
      return m ? jsonTextErrors(WEATHER_SCHEMA, m[1]) : `not <answer>…</answer>: ${JSON.stringify(t)}`;
    },
  },
];

// The grammar constraint of a chat request's tool choice (SGLang serving_chat.py _process_messages →
// FunctionCallParser.get_structure_constraint, function_call/utils.py get_json_schema_constraint):
//  - `tool_choice: "required"` or a named function: the model must call a tool with arguments matching its
//    `parameters`. For `deepseekv32` the constraint is the model's own DSML section (invokes with a JSON body, which
//    the detector parses, parsers-spec §4.3); for the other parsers it is SGLang's JSON array
//    `[{"name": …, "parameters": {…}}, …]` (parsed by the JSON-array detector), the shape SGLang v0.5 uses for every
//    detector without a structural tag.
//  - `tool_choice: "auto"` with a `strict: true` tool, for `deepseekv32`: a triggered structural tag, so prose stays
//    free and any call the model starts has schema-valid arguments.
// `parallel_tool_calls: false` allows one call only (maxItems 1 / stop_after_first).
import { InvalidRequestError } from '../common/index.js';

/** A tool as the request gives it (OpenAI shape). */
interface RequestTool {
  function?: { name?: unknown; parameters?: unknown; strict?: unknown };
  name?: unknown;
  parameters?: unknown;
  strict?: unknown;
}

/** The constraint to put into the sampling params (exactly one field), or null. */
export interface ToolConstraint {
  readonly jsonSchema?: string;
  readonly structuralTag?: string;
}

interface Fn { name: string; parameters: Record<string, unknown>; strict: boolean }

function functionsOf(tools: unknown): Fn[] {
  if (!Array.isArray(tools)) return [];
  const out: Fn[] = [];
  for (const t of tools as RequestTool[]) {
    if (t === null || typeof t !== 'object') continue;
    const f = t.function ?? t;
    if (typeof f.name !== 'string') continue;
    const p = f.parameters && typeof f.parameters === 'object' && Object.keys(f.parameters).length > 0 ? (f.parameters as Record<string, unknown>) : { type: 'object', properties: {} };
    out.push({ name: f.name, parameters: p, strict: f.strict === true });
  }
  return out;
}

/** SGLang's _get_tool_schema: one array element. */
function toolItemSchema(f: Fn): Record<string, unknown> {
  return { properties: { name: { type: 'string', enum: [f.name] }, parameters: f.parameters }, required: ['name', 'parameters'] };
}

/**
 * The `$defs` of every tool merged at the top of the array schema (SGLang get_all_defs).
 * @throws InvalidRequestError when two tools define the same $defs name differently
 */
function mergedDefs(fns: readonly Fn[]): Record<string, unknown> {
  const all: Record<string, unknown> = {};
  for (const f of fns) {
    const defs = (f.parameters.$defs ?? {}) as Record<string, unknown>;
    for (const [k, v] of Object.entries(defs)) {
      if (k in all && JSON.stringify(all[k]) !== JSON.stringify(v)) throw new InvalidRequestError(`Tool definition '${k}' has multiple schemas, which is not supported.`, 'tools');
      all[k] = v;
    }
  }
  return all;
}

/** SGLang get_json_schema_constraint: the JSON array of calls. */
export function jsonArrayToolSchema(tools: unknown, toolChoice: unknown, parallelToolCalls = true): Record<string, unknown> | null {
  const fns = functionsOf(tools);
  const named = namedChoice(toolChoice);
  let schema: Record<string, unknown>;
  if (named !== null) {
    const f = fns.find((x) => x.name === named);
    if (!f) return null;
    schema = { type: 'array', minItems: 1, items: toolItemSchema(f) };
  } else {
    schema = { type: 'array', minItems: 1, items: { type: 'object', anyOf: fns.map(toolItemSchema) } };
    const defs = mergedDefs(fns);
    if (Object.keys(defs).length > 0) schema.$defs = defs;
  }
  if (!parallelToolCalls) schema.maxItems = 1;
  return schema;
}

function namedChoice(toolChoice: unknown): string | null {
  if (toolChoice && typeof toolChoice === 'object') {
    const n = (toolChoice as { function?: { name?: unknown } }).function?.name;
    return typeof n === 'string' ? n : null;
  }
  return null;
}

const DSML = '｜DSML｜';

/** One DSML invoke with a JSON body (what the deepseekv32 detector parses as the call's arguments). */
function dsmlInvokeTag(f: Fn, begin = '', end = ''): Record<string, unknown> {
  return {
    type: 'tag',
    begin: `${begin}<${DSML}invoke name="${f.name}">\n`,
    content: { type: 'json_schema', json_schema: f.parameters },
    end: `\n</${DSML}invoke>${end}`,
  };
}

/**
 * The constraint for a chat request's tools, or null when none applies.
 * @param parser --tool-call-parser (null: tools are not parsed, no constraint)
 * @param toolChoice the request's tool_choice (already validated against the tools)
 */
export function toolCallConstraint(parser: string | null, tools: unknown, toolChoice: unknown, parallelToolCalls = true): ToolConstraint | null {
  const fns = functionsOf(tools);
  if (parser === null || fns.length === 0 || toolChoice === 'none') return null;
  const named = namedChoice(toolChoice);
  const forced = toolChoice === 'required' || named !== null;
  if (parser === 'deepseekv32') {
    if (forced) {
      const chosen = named !== null ? fns.filter((f) => f.name === named) : fns;
      if (chosen.length === 0) return null;
      const format = {
        type: 'tag',
        begin: `<${DSML}function_calls>\n`,
        content: { type: 'tags_with_separator', tags: chosen.map((f) => dsmlInvokeTag(f)), separator: '\n', at_least_one: true, stop_after_first: !parallelToolCalls },
        end: `\n</${DSML}function_calls>`,
      };
      return { structuralTag: JSON.stringify({ type: 'structural_tag', format }) };
    }
    if (fns.some((f) => f.strict)) {
      const open = `<${DSML}function_calls>\n`;
      const format = {
        type: 'triggered_tags',
        triggers: [open],
        tags: fns.map((f) => dsmlInvokeTag(f, open, `\n</${DSML}function_calls>`)),
        at_least_one: false,
        stop_after_first: !parallelToolCalls,
      };
      return { structuralTag: JSON.stringify({ type: 'structural_tag', format }) };
    }
    return null;
  }
  if (!forced) return null;
  const schema = jsonArrayToolSchema(tools, toolChoice, parallelToolCalls);
  return schema ? { jsonSchema: JSON.stringify(schema) } : null;
}

// A small argparse for the bench and eval commands: `--flag value`, `--flag=value`, store_true flags,
// nargs lists, choices, and Python argparse's unique-prefix abbreviations (`--num-prom 10`). Knows no flags.
import { InvalidRequestError } from '../common/index.js';

/** How a flag's value is read. */
export type FlagType = 'int' | 'float' | 'str' | 'bool' | 'list';

/** One flag. `name` is the long form (`--num-prompts`); its value lands under camelCase (`numPrompts`). */
export interface FlagSpec {
  name: string;
  type: FlagType;
  /** Value when the flag is absent (bool flags: false unless given). */
  default?: unknown;
  choices?: readonly string[];
  help: string;
  /** Extra spellings (e.g. `-k`, `--data_dir`) mapping to the same value. */
  aliases?: readonly string[];
}

/** `--num-prompts` → `numPrompts`. */
export function flagKey(name: string): string {
  return name.replace(/^-+/, '').replace(/[-_]([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Python `float(s)`: also accepts inf / infinity / nan (any case, optional sign). */
export function parsePyFloat(s: string): number {
  const t = s.trim().toLowerCase();
  if (/^[+-]?(inf|infinity)$/.test(t)) return t.startsWith('-') ? -Infinity : Infinity;
  if (/^[+-]?nan$/.test(t)) return NaN;
  if (t === '' || !/^[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?)$/.test(t.replace(/_/g, ''))) return NaN;
  return Number(t.replace(/_/g, ''));
}

/** The result of {@link parseFlags}: values by camelCase key, plus whether `--help` was asked. */
export interface ParsedFlags {
  values: Record<string, unknown>;
  help: boolean;
}

/**
 * Parses argv against the specs.
 * @throws InvalidRequestError naming the flag: unknown or ambiguous flag, missing or bad value, bad choice
 */
export function parseFlags(argv: readonly string[], specs: readonly FlagSpec[], prog: string): ParsedFlags {
  const byName = new Map<string, FlagSpec>();
  for (const s of specs) {
    byName.set(s.name, s);
    for (const a of s.aliases ?? []) byName.set(a, s);
  }
  const values: Record<string, unknown> = {};
  for (const s of specs) values[flagKey(s.name)] = s.type === 'bool' ? (s.default ?? false) : (s.default ?? null);
  let help = false;
  const fail = (msg: string, flag: string | null): never => {
    throw new InvalidRequestError(`${prog}: error: ${msg}`, flag);
  };
  const lookup = (raw: string): FlagSpec => {
    const exact = byName.get(raw);
    if (exact) return exact;
    const matches = [...new Set([...byName.entries()].filter(([n]) => n.startsWith('--') && n.startsWith(raw)).map(([, s]) => s))];
    if (matches.length === 1) return matches[0];
    if (matches.length === 0) return fail(`unrecognized arguments: ${raw}`, raw);
    return fail(`ambiguous option: ${raw} could match ${matches.map((m) => m.name).join(', ')}`, raw);
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      help = true;
      continue;
    }
    if (!arg.startsWith('-') || arg === '-') fail(`unrecognized arguments: ${arg}`, null);
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const rawName = eq >= 0 ? arg.slice(0, eq) : arg;
    const spec = lookup(rawName);
    const key = flagKey(spec.name);
    if (spec.type === 'bool') {
      if (eq >= 0) fail(`argument ${spec.name}: ignored explicit argument '${arg.slice(eq + 1)}'`, spec.name);
      values[key] = true;
      continue;
    }
    if (spec.type === 'list') {
      const items: string[] = eq >= 0 ? [arg.slice(eq + 1)] : [];
      while (i + 1 < argv.length && !/^--?[a-zA-Z]/.test(argv[i + 1])) items.push(argv[++i]);
      values[key] = items;
      continue;
    }
    let raw: string;
    if (eq >= 0) raw = arg.slice(eq + 1);
    else {
      if (i + 1 >= argv.length) fail(`argument ${spec.name}: expected one argument`, spec.name);
      raw = argv[++i];
    }
    values[key] = convert(spec, raw, fail);
  }
  return { values, help };
}

function convert(spec: FlagSpec, raw: string, fail: (msg: string, flag: string | null) => never): unknown {
  switch (spec.type) {
    case 'int': {
      if (!/^[+-]?\d+$/.test(raw.trim())) fail(`argument ${spec.name}: invalid int value: '${raw}'`, spec.name);
      return Number(raw);
    }
    case 'float': {
      const v = parsePyFloat(raw);
      if (Number.isNaN(v) && !/nan/i.test(raw)) fail(`argument ${spec.name}: invalid float value: '${raw}'`, spec.name);
      return v;
    }
    case 'str': {
      if (spec.choices && !spec.choices.includes(raw)) {
        fail(`argument ${spec.name}: invalid choice: '${raw}' (choose from ${spec.choices.map((c) => `'${c}'`).join(', ')})`, spec.name);
      }
      return raw;
    }
    default:
      return raw;
  }
}

/** A `--help` text: usage line and one line per flag with its default. */
export function formatHelp(prog: string, description: string, specs: readonly FlagSpec[]): string {
  const lines = [`usage: ${prog} [flags]`, '', description, '', 'flags:'];
  for (const s of specs) {
    const names = [s.name, ...(s.aliases ?? [])].join(', ');
    const meta = s.type === 'bool' ? '' : s.type === 'list' ? ' V [V ...]' : ` ${s.type.toUpperCase()}`;
    const choices = s.choices ? ` {${s.choices.join(',')}}` : '';
    const def = s.type === 'bool' || s.default === undefined || s.default === null ? '' : ` (default: ${String(s.default)})`;
    lines.push(`  ${(names + meta + choices).padEnd(44)} ${s.help}${def}`);
  }
  return lines.join('\n') + '\n';
}

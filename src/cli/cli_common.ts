// Argument and error plumbing shared by the small `tsglang` subcommands (parse, render-chat, logits, make-tiny):
// strict flag parsing that reports bad flags as InvalidRequestError, and the usage/exit-code frame of a
// subcommand that reads its input from stdin and prints one JSON value on stdout.
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';

/** node:util parseArgs option table: long name → { type, default, short }. */
type FlagOptions = NonNullable<ParseArgsConfig['options']>;
import { InvalidRequestError, TsglangError } from '../common/index.js';

/** Flag values as node:util parseArgs returns them: string flags, boolean switches, absent → undefined. */
export type FlagValues = Record<string, string | boolean | undefined>;

/**
 * Parses `argv` strictly against `options` (unknown flags, missing values and positionals are errors).
 * @param argv the subcommand's arguments (without the subcommand name)
 * @param options node:util parseArgs option table (long name → type, default, short)
 * @returns the flag values by long name
 * @throws InvalidRequestError with node's message (e.g. "Unknown option '--x'") for any malformed argv
 */
export function parseStrictFlags(argv: string[], options: FlagOptions): FlagValues {
  // `--flag -3`: node's parseArgs refuses a value starting with '-' as "ambiguous"; a negative number is plainly the
  // flag's value, so pass it as `--flag=-3` and let the flag's own check judge it (e.g. "must be ≥ 0, got '-3'").
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = argv[i + 1];
    const name = a.startsWith('--') && !a.includes('=') ? a.slice(2) : null;
    if (name !== null && options[name]?.type === 'string' && next !== undefined && /^-\d+(\.\d+)?$/.test(next)) {
      args.push(`${a}=${next}`);
      i++;
    } else {
      args.push(a);
    }
  }
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values as FlagValues;
  } catch (err) {
    const message = (err as Error).message;
    // Any other flag followed by a dash-word: say what is missing, as argparse does, instead of node's three lines.
    const ambiguous = /^Option '(-[^']+)' argument is ambiguous/.exec(message);
    if (ambiguous) throw new InvalidRequestError(`argument ${ambiguous[1]}: expected one argument`);
    throw new InvalidRequestError(message);
  }
}

/** Message of the InvalidRequestError a flag parser throws for `--help` / `-h` (usage, exit 0). */
export const HELP_REQUESTED = 'help';

/** One stdin → stdout subcommand for {@link runStdioCommand}. */
export interface StdioCommand<A> {
  /** Name printed before messages, e.g. `render-chat`. */
  name: string;
  /** Usage text written to stderr after a usage error or on --help. */
  usage: string;
  /** Parses argv; throws InvalidRequestError({@link HELP_REQUESTED}) for --help, any other error = usage error. */
  parse: (argv: string[]) => A;
  /** Does the work and writes the result to stdout; TsglangError = input error (exit 1). */
  execute: (args: A) => void;
}

/**
 * The exit-code frame of a stdin → stdout subcommand: usage errors print `tsglang NAME: msg` and the usage
 * on stderr (exit 2; --help prints the usage alone, exit 0); a TsglangError from `execute` prints
 * `tsglang NAME: msg` (exit 1); success is exit 0.
 * @returns the process exit code
 * @throws whatever `execute` throws that is not a TsglangError (a bug, not bad input)
 */
export function runStdioCommand<A>(command: StdioCommand<A>, argv: string[]): number {
  let args: A;
  try {
    args = command.parse(argv);
  } catch (err) {
    const message = (err as Error).message;
    if (message !== HELP_REQUESTED) process.stderr.write(`tsglang ${command.name}: ${message}\n\n`);
    process.stderr.write(command.usage);
    return message === HELP_REQUESTED ? 0 : 2;
  }
  try {
    command.execute(args);
    return 0;
  } catch (err) {
    if (err instanceof TsglangError) {
      process.stderr.write(`tsglang ${command.name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

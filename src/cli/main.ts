import { readFileSync } from 'node:fs';

// `tsglang <subcommand> [flags]`: dispatches to one module per subcommand (loaded lazily, so `tsglang logits`
// never loads the HTTP server). Each subcommand module exports `run(argv): Promise<number>` (the exit code).

/** A subcommand: parses its own flags from argv and returns the process exit code. */
export type SubcommandRun = (argv: string[]) => Promise<number>;

const SUBCOMMANDS: Record<string, { summary: string; module: string }> = {
  serve: { summary: 'serve a model over an OpenAI-compatible HTTP API (SGLang flags)', module: 'serve' },
  logits: { summary: 'print the logits (and greedy tokens) of a prompt of token ids as JSON', module: 'logits' },
  'make-tiny': { summary: 'write a tiny random checkpoint of a supported architecture', module: 'make_tiny' },
  'render-chat': { summary: 'print the prompt text an OpenAI chat request renders to', module: 'render_chat' },
  parse: { summary: 'run the reasoning / tool-call parsers over a model output', module: 'parse' },
  'bench-serving': { summary: 'benchmark a serving endpoint (sglang.bench_serving flags)', module: 'bench_serving' },
  'bench-one-batch': { summary: 'time one static batch: prefill then decode (sglang.bench_one_batch)', module: 'bench_one_batch' },
  eval: { summary: 'accuracy evals against an OpenAI-compatible server: gsm8k | mmlu | gpqa', module: 'eval' },
  router: { summary: 'route requests over workers, or prefill/decode pairs (sglang_router.launch_router flags)', module: 'router' },
};

/** The SGLang release whose flags, routes and wire format tsglang follows (reported as /get_server_info `version`). */
export const SGLANG_COMPAT_VERSION = '0.5.10.post1';

/** tsglang's own version (package.json). */
export function tsglangVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** `tsglang --version`: tsglang's version and the SGLang version it is compatible with. */
function versionLine(): string {
  return `tsglang ${tsglangVersion()} (SGLang ${SGLANG_COMPAT_VERSION} compatible)`;
}

function usage(): string {
  const lines = ['usage: tsglang <command> [flags]', '', 'commands:'];
  for (const [name, s] of Object.entries(SUBCOMMANDS)) lines.push(`  ${name.padEnd(16)} ${s.summary}`);
  lines.push('', 'Run `tsglang <command> --help` for the flags of a command; `tsglang --version` prints the version.');
  return lines.join('\n') + '\n';
}

/**
 * CLI entry: `argv` without the node and script paths.
 * @returns process exit code (0 ok, 1 runtime error, 2 usage error)
 */
export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === '--version' || cmd === '-V' || cmd === 'version' || (cmd === 'serve' && rest.includes('--version'))) {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(usage());
    return cmd === undefined ? 2 : 0;
  }
  const sub = SUBCOMMANDS[cmd];
  if (!sub) {
    process.stderr.write(`tsglang: unknown command '${cmd}'\n\n${usage()}`);
    return 2;
  }
  let mod: { run: SubcommandRun };
  try {
    mod = (await import(`./${sub.module}.js`)) as { run: SubcommandRun };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') {
      process.stderr.write(`tsglang: command '${cmd}' is not built yet\n`);
      return 2;
    }
    throw err;
  }
  return mod.run(rest);
}

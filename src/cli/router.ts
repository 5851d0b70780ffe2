// `tsglang router [flags]` (= `python -m sglang_router.launch_router`): SGLang's router in regular mode
// (--worker-urls) or PD mode (--pd-disaggregation --prefill URL [BOOTSTRAP_PORT] --decode URL). Runs until
// SIGINT/SIGTERM, then lets requests in flight finish for up to --shutdown-grace-period-secs. Logs go to stderr, and
// to <--log-dir>/sgl-router.log when given.
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, Logger, type LogLevel } from '../common/index.js';
import { parseRouterArgs, routerHelp, startRouter } from '../router/index.js';

/**
 * Entry of `tsglang router`.
 * @returns 0 after a clean shutdown or --help, 2 on a flag error, 1 when start-up fails (workers never healthy, port taken)
 */
export async function run(argv: string[]): Promise<number> {
  let args;
  try {
    args = parseRouterArgs(argv);
  } catch (e) {
    if (e instanceof InvalidRequestError) {
      process.stderr.write(`usage: tsglang router [flags]  (tsglang router --help lists them)\n${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (args === 'help') {
    process.stdout.write(routerHelp());
    return 0;
  }
  const level: LogLevel = args.logLevel === 'warn' ? 'warning' : args.logLevel;
  let write = (line: string): void => { process.stderr.write(line); };
  if (args.logDir !== null) {
    mkdirSync(args.logDir, { recursive: true });
    const file = join(args.logDir, 'sgl-router.log');
    write = (line) => { process.stderr.write(line); appendFileSync(file, line); };
  }
  const logger = new Logger(level, '[router]', write);
  let router;
  try {
    router = await startRouter(args, logger);
  } catch (e) {
    logger.error(`router start-up failed: ${(e as Error).message}`);
    return 1;
  }
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  logger.info(`shutting down (waiting up to ${args.shutdownGracePeriodSecs} s for requests in flight)`);
  await router.close(args.shutdownGracePeriodSecs * 1000);
  return 0;
}

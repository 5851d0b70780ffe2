// Entry of the engine worker thread: builds the EngineCore from workerData.options and wires it to the parent port.
import { parentPort, workerData } from 'node:worker_threads';
import { Logger, TsglangError } from '../common/index.js';
import type { LogLevel } from '../common/index.js';
import { EngineCore } from './engine_core.js';
import type { FromCoreMsg, ToCoreMsg } from './messages.js';
import type { EngineOptions } from './types.js';

const port = parentPort;
if (port) {
  const options = (workerData as { options: EngineOptions }).options;
  const logger = new Logger((options.logLevel ?? 'info') as LogLevel);
  const fail = (e: unknown): void => {
    const kind = e instanceof TsglangError ? e.kind : 'internal';
    port.postMessage({ type: 'init_error', message: (e as Error).message, kind } satisfies FromCoreMsg);
  };
  try {
    const core = EngineCore.create(options, (m: FromCoreMsg) => port.postMessage(m), logger);
    // PD: the bootstrap server and transfer endpoint listen before the core says it is ready
    core.startDisaggregation().then(() => {
      port.on('message', (m: ToCoreMsg) => {
        core.handle(m);
        if (m.type === 'shutdown') port.close();
      });
      port.postMessage({ type: 'ready', info: core.info } satisfies FromCoreMsg);
    }, fail);
  } catch (e) {
    fail(e);
  }
}

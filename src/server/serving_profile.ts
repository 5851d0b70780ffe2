// /start_profile and /stop_profile (SGLang http_server.py start_profile_async / stop_profile_async, which
// `bench_serving --profile` calls): profile the engine core on CPU (engine/profiler.ts) and answer SGLang's texts.
import type { Exchange, ServerDeps } from './context.js';

/** SGLang's ProfileReqInput fields tsglang reads (others, e.g. activities or with_stack, are accepted and ignored). */
interface ProfileBody {
  output_dir?: unknown;
  num_steps?: unknown;
  profile_id?: unknown;
}

/**
 * POST|GET /start_profile: 200 "Start profiling.\n"; 400 with the reason when a profile already runs or the body is
 * bad; 501 when the engine has no profiler.
 */
export async function handleStartProfile(deps: ServerDeps, ex: Exchange, body: unknown): Promise<void> {
  const engine = deps.engine;
  if (!engine.startProfile) { ex.sendText(501, 'Profiling is not available on this engine.\n'); return; }
  const b = (body ?? {}) as ProfileBody;
  if (b.num_steps !== undefined && b.num_steps !== null && !(Number.isInteger(b.num_steps) && (b.num_steps as number) > 0)) {
    ex.sendText(400, `num_steps must be a positive integer, got ${JSON.stringify(b.num_steps)}\n`);
    return;
  }
  const outputDir = typeof b.output_dir === 'string' && b.output_dir !== '' ? b.output_dir : deps.profilerDir ?? '/tmp';
  const r = await engine.startProfile({
    outputDir,
    numSteps: typeof b.num_steps === 'number' ? b.num_steps : null,
    profileId: typeof b.profile_id === 'string' && /^[\w.-]+$/.test(b.profile_id) ? b.profile_id : String(Date.now() / 1000),
  });
  deps.logger.info(r.success ? `Profiling starts. Traces will be saved to: ${outputDir}` : `start_profile: ${r.message}`);
  ex.sendText(r.success ? 200 : 400, r.success ? 'Start profiling.\n' : `${r.message}\n`);
}

/** POST|GET /stop_profile: 200 "Stop profiling. This will take some time.\n" (files logged); 400 when none runs. */
export async function handleStopProfile(deps: ServerDeps, ex: Exchange): Promise<void> {
  const engine = deps.engine;
  if (!engine.stopProfile) { ex.sendText(501, 'Profiling is not available on this engine.\n'); return; }
  const r = await engine.stopProfile();
  deps.logger.info(`stop_profile: ${r.message}`);
  ex.sendText(r.success ? 200 : 400, r.success ? 'Stop profiling. This will take some time.\n' : `${r.message}\n`);
}

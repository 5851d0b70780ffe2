// /start_profile and /stop_profile on CPU (SGLang's torch profiler, scheduler_profiler_mixin.py, restated): a V8 CPU
// profile of the engine core thread through node:inspector (what `node --cpu-prof` writes, for Chrome DevTools /
// speedscope) and the per-step scheduler timings, written as `<output_dir>/<profile_id>-TP-0.cpuprofile` and
// `<output_dir>/<profile_id>-TP-0.steps.json`. The output dir defaults to $SGLANG_TORCH_PROFILER_DIR, else /tmp, as
// in SGLang; `num_steps` stops the profile by itself after that many forward steps.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import type { StepStats } from '../scheduler/index.js';

/** What /start_profile asks for (SGLang's ProfileReqInput fields tsglang uses). */
export interface ProfileRequest {
  readonly outputDir: string;
  /** Stop after this many forward steps (null: until /stop_profile). */
  readonly numSteps: number | null;
  /** File name prefix (SGLang: str(time.time())). */
  readonly profileId: string;
}

/** The answer of a profiler request (SGLang's ProfileReqOutput). */
export interface ProfileReply {
  readonly success: boolean;
  readonly message: string;
  /** Files written by a stop. */
  readonly files?: readonly string[];
}

/** One profiled step: the scheduler's statistics and where the time went (ms). */
interface StepRecord extends StepStats {
  readonly startMs: number;
  readonly forwardMs: number;
  readonly detokenizeMs: number;
}

/** The profiler of one engine core (one thread): at most one profile at a time. */
export class CoreProfiler {
  private session: Session | null = null;
  private req: ProfileRequest | null = null;
  private steps: StepRecord[] = [];
  private t0 = 0;

  /** True while a profile runs. */
  get active(): boolean {
    return this.req !== null;
  }

  /** Starts the CPU profiler of this thread and the step log. */
  start(req: ProfileRequest): Promise<ProfileReply> {
    if (this.req) return Promise.resolve({ success: false, message: 'Profiling is already in progress. Call /stop_profile first.' });
    try {
      mkdirSync(req.outputDir, { recursive: true });
    } catch (e) {
      return Promise.resolve({ success: false, message: `cannot create the profile output dir ${req.outputDir}: ${(e as Error).message}` });
    }
    this.req = req;
    this.steps = [];
    this.t0 = performance.now();
    const session = new Session();
    session.connect();
    this.session = session;
    return new Promise((resolve) => {
      session.post('Profiler.enable', () => {
        session.post('Profiler.start', (err) => {
          if (err) {
            this.reset();
            resolve({ success: false, message: `the V8 CPU profiler did not start: ${err.message}` });
          } else {
            resolve({ success: true, message: 'Start profiling.' });
          }
        });
      });
    });
  }

  /**
   * Records one scheduler step while profiling; stops the profile when `numSteps` steps were recorded.
   * @param startMs performance.now() at the step's start; forwardMs / detokenizeMs the step's parts
   */
  onStep(stats: StepStats, startMs: number, forwardMs: number, detokenizeMs: number): void {
    if (!this.req) return;
    this.steps.push({ ...stats, startMs: startMs - this.t0, forwardMs, detokenizeMs });
    if (this.req.numSteps !== null && this.steps.length >= this.req.numSteps) void this.stop();
  }

  /** Stops the profile and writes its two files. */
  stop(): Promise<ProfileReply> {
    const req = this.req;
    const session = this.session;
    if (!req || !session) return Promise.resolve({ success: false, message: 'Profiling is not in progress. Call /start_profile first.' });
    const steps = this.steps;
    this.req = null;
    return new Promise((resolve) => {
      session.post('Profiler.stop', (err, res) => {
        this.reset(session);
        const base = join(req.outputDir, `${req.profileId}-TP-0`);
        try {
          const files: string[] = [];
          if (!err && res?.profile) {
            writeFileSync(`${base}.cpuprofile`, JSON.stringify(res.profile));
            files.push(`${base}.cpuprofile`);
          }
          const totals = steps.reduce((t, s) => ({ forwardMs: t.forwardMs + s.forwardMs, detokenizeMs: t.detokenizeMs + s.detokenizeMs }), { forwardMs: 0, detokenizeMs: 0 });
          writeFileSync(`${base}.steps.json`, JSON.stringify({ profile_id: req.profileId, num_steps: steps.length, totals, steps }, null, 1));
          files.push(`${base}.steps.json`);
          resolve({ success: true, message: `Stop profiling. ${err ? `(the CPU profile failed: ${err.message}) ` : ''}Wrote ${files.join(', ')}`, files });
        } catch (e) {
          resolve({ success: false, message: `cannot write the profile to ${req.outputDir}: ${(e as Error).message}` });
        }
      });
    });
  }

  private reset(session: Session | null = this.session): void {
    try {
      session?.disconnect();
    } catch {
      // already disconnected
    }
    this.session = null;
    this.req = null;
  }
}

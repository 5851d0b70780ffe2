// KV pool sizing from --mem-fraction-static, as SGLang does on GPUs (server_args.py _handle_gpu_memory_settings,
// model_runner.py profile_max_num_token / init_memory_pool), with CPU RAM standing in for device memory.
//
// Formula [serving-spec §3.4] (all sizes in bytes unless noted):
//   M        = RAM available at start-up (/proc/meminfo MemAvailable, else os.freemem()), before the weights load
//   chunk    = --chunked-prefill-size, default by M: < 35 GiB → 2048, < 60 GiB → 4096, < 160 GiB → 8192, else 16384
//   fraction = --mem-fraction-static, default round((M_MiB − reserved_MiB) / M_MiB, 3) with
//              reserved_MiB = 512 + 1.5·max(chunk, 2048) + 2·graphBs + 1024·tp·pp/8   (graphBs = 0 on CPU: no CUDA graphs)
//              and reserved_MiB ≥ 10240 when M > 60 GiB; a derived fraction below 0.1 (the reserve is about as large as
//              the machine: e.g. a seed page's --chunked-prefill-size 16384 asks 24.5 GiB) becomes 0.1 with a warning
//              [choice: SGLang sizes that reserve for GPU activations; on CPU a chunk's activations are far smaller]
//   rest     = availableAfterLoad − M·(1 − fraction)     (availableAfterLoad = RAM available once the weights are in)
//   tokens   = floor(rest / kvBytesPerToken), clamped by --max-total-tokens, rounded down to a page multiple
// On CPU the KV storage then grows page by page up to `tokens` (KVPool.ensureLocs), so the capacity is a ceiling, not
// memory committed at start-up.
import { readFileSync } from 'node:fs';
import { freemem } from 'node:os';
import { InvalidRequestError, OutOfKVCacheError } from '../common/index.js';

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/** Inputs of {@link planMemory}. */
export interface MemoryPlanInput {
  /** RAM available at start-up, bytes (M). */
  readonly totalMemBytes: number;
  /** RAM available after the weights were loaded, bytes. */
  readonly availableAfterLoadBytes: number;
  readonly memFractionStatic: number | null;
  /** --chunked-prefill-size (null = default by memory; ≤ 0 = disabled). */
  readonly chunkedPrefillSize: number | null;
  readonly maxPrefillTokens: number;
  /** KV bytes per token over all layers (KVPool.bytesPerToken). */
  readonly kvBytesPerToken: number;
  readonly maxTotalTokens: number | null;
  readonly pageSize: number;
  readonly contextLength: number;
  readonly maxRunningRequests: number | null;
  readonly tpSize?: number;
  readonly ppSize?: number;
}

/** Result of the sizing. */
export interface MemoryPlan {
  readonly memFractionStatic: number;
  /** Chunked prefill size in effect (null = disabled). */
  readonly chunkedPrefillSize: number | null;
  /** KV pool token capacity. */
  readonly maxTotalNumTokens: number;
  /** Token capacity from memory alone, before --max-total-tokens. */
  readonly profiledTokens: number;
  /** ReqToTokenPool rows. */
  readonly reqToTokenPoolSize: number;
  readonly maxRunningRequests: number;
  /** A warning for the log: the automatic fraction was raised to its floor (null when not). */
  readonly notice: string | null;
}

/** The smallest automatic --mem-fraction-static (see the file header). */
export const MIN_AUTO_MEM_FRACTION = 0.1;

/** RAM available now, bytes (Linux MemAvailable; elsewhere os.freemem()). */
export function readAvailableMemoryBytes(): number {
  try {
    const m = /MemAvailable:\s+(\d+)\s+kB/.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return freemem();
}

/** SGLang's default chunked prefill size for a device of `memBytes`. */
export function defaultChunkedPrefillSize(memBytes: number): number {
  if (memBytes < 35 * GIB) return 2048;
  if (memBytes < 60 * GIB) return 4096;
  if (memBytes < 160 * GIB) return 8192;
  return 16384;
}

/**
 * Sizes the KV pool and the request table (see the file header for the formula).
 * @throws InvalidRequestError for a fraction outside (0, 1]
 * @throws OutOfKVCacheError "Not enough memory..." when no token fits
 */
export function planMemory(i: MemoryPlanInput): MemoryPlan {
  const tp = i.tpSize ?? 1;
  const pp = i.ppSize ?? 1;
  const chunk = i.chunkedPrefillSize === null ? defaultChunkedPrefillSize(i.totalMemBytes) : i.chunkedPrefillSize > 0 ? i.chunkedPrefillSize : null;
  let fraction = i.memFractionStatic;
  let notice: string | null = null;
  if (fraction === null) {
    const mMiB = i.totalMemBytes / MIB;
    const graphBs = 0;
    let reservedMiB = 512 + 1.5 * Math.max(chunk ?? i.maxPrefillTokens, 2048) + 2 * graphBs + (1024 * tp * pp) / 8;
    if (i.totalMemBytes > 60 * GIB) reservedMiB = Math.max(reservedMiB, 10240);
    fraction = Math.round(((mMiB - reservedMiB) / mMiB) * 1000) / 1000;
    if (fraction < MIN_AUTO_MEM_FRACTION) {
      notice = `The automatic mem_fraction_static reserves ${Math.round(reservedMiB)} MiB (chunked_prefill_size ${chunk ?? 'disabled'}) of `
        + `${Math.round(mMiB)} MiB available (fraction ${fraction}); using mem_fraction_static=${MIN_AUTO_MEM_FRACTION}. `
        + 'Set --mem-fraction-static to choose another.';
      fraction = MIN_AUTO_MEM_FRACTION;
    }
  }
  if (!(fraction > 0 && fraction <= 1)) throw new InvalidRequestError(`--mem-fraction-static must be in (0, 1], got ${fraction}`, 'mem_fraction_static');
  const rest = i.availableAfterLoadBytes - i.totalMemBytes * (1 - fraction);
  const profiled = Math.max(0, Math.floor(rest / i.kvBytesPerToken));
  let tokens = profiled;
  if (i.maxTotalTokens !== null && i.maxTotalTokens > 0) tokens = Math.min(tokens, i.maxTotalTokens);
  tokens = Math.floor(tokens / i.pageSize) * i.pageSize;
  if (tokens <= 0) throw new OutOfKVCacheError('Not enough memory. Please try to increase --mem-fraction-static.');
  const rows =
    i.maxRunningRequests !== null
      ? i.maxRunningRequests
      : Math.max(2048, Math.min(4096, Math.floor((tokens / i.contextLength) * 512)));
  const poolRows = Math.min(rows, Math.max(1, Math.floor(tokens / 2)));
  const maxRunning = Math.min(i.maxRunningRequests ?? Math.max(1, Math.floor(tokens / 2)), poolRows);
  return { memFractionStatic: fraction, chunkedPrefillSize: chunk, maxTotalNumTokens: tokens, profiledTokens: profiled, reqToTokenPoolSize: poolRows, maxRunningRequests: maxRunning, notice };
}

// KVPoll states and the disaggregation settings read from SGLang's environment variables
// (python/sglang/srt/disaggregation/base/conn.py KVPoll; environ.py; serving-spec.md §5.4).

/** State of one request's KV transfer (SGLang KVPoll; the numbers are SGLang's). */
export const KVPoll = { Failed: 0, Bootstrapping: 1, WaitingForInput: 2, Transferring: 3, Success: 4 } as const;
export type KVPollState = (typeof KVPoll)[keyof typeof KVPoll];

/** Timeouts and limits of PD disaggregation. */
export interface DisaggEnv {
  /** Prefill: longest wait for the decode side's destination (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT, 300 s), ms. */
  readonly bootstrapTimeoutMs: number;
  /** Decode: longest wait for the KV once the destination was sent (SGLANG_DISAGGREGATION_WAITING_TIMEOUT, 300 s), ms. */
  readonly waitingTimeoutMs: number;
  /** Decode: heartbeat to each bootstrap server (SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL, 5 s), ms. */
  readonly heartbeatIntervalMs: number;
  /** Decode: failed heartbeats before a prefill server counts as gone (SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE, 2). */
  readonly heartbeatMaxFailure: number;
  /** Decode: KV tokens kept free per running request when admitting transfers (SGLANG_NUM_RESERVED_DECODE_TOKENS, 512). */
  readonly numReservedDecodeTokens: number;
  /** Decode: attempts to fetch a prefill server's topology, 1 s apart (15, as SGLang). */
  readonly bootstrapRetries: number;
}

function num(env: NodeJS.ProcessEnv, name: string, def: number): number {
  const v = env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : def;
}

/** Reads the settings from the environment (invalid values fall back to SGLang's defaults). */
export function readDisaggEnv(env: NodeJS.ProcessEnv = process.env): DisaggEnv {
  return {
    bootstrapTimeoutMs: num(env, 'SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT', 300) * 1000,
    waitingTimeoutMs: num(env, 'SGLANG_DISAGGREGATION_WAITING_TIMEOUT', 300) * 1000,
    heartbeatIntervalMs: num(env, 'SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL', 5) * 1000,
    heartbeatMaxFailure: Math.max(1, Math.floor(num(env, 'SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE', 2))),
    numReservedDecodeTokens: Math.floor(num(env, 'SGLANG_NUM_RESERVED_DECODE_TOKENS', 512)),
    bootstrapRetries: 15,
  };
}

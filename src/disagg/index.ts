// Public surface of disagg/ (see ARCHITECTURE.md for what it may import).
export { KVPoll, readDisaggEnv, type DisaggEnv, type KVPollState } from './kv_poll.js';
export { BootstrapServer, type RankRegistration } from './bootstrap_server.js';
export { gatherKv, scatterKv, locRuns, layoutFingerprint, payloadBytesPerToken, type LocRun } from './kv_pages.js';
export { TcpPrefillKVManager, TcpDecodeKVManager, type AuxData, type Destination } from './tcp_transfer.js';
export { PrefillLoop, type PrefillStats } from './prefill_loop.js';
export { DecodeLoop, type DecodeStats } from './decode_loop.js';
export { TRANSFER_BACKENDS, availableTransferBackends, resolveTransferBackend, type TransferBackendChoice } from './backends.js';
export { loadUcxAddon, RangeAllocator, ucxWorkerSettings, type UcxAddon } from './ucx_addon.js';

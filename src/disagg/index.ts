// Public surface of disagg/ (see ARCHITECTURE.md for what it may import).
export { KVPoll, readDisaggEnv, type DisaggEnv, type KVPollState } from './kv_poll.js';
export { BootstrapServer, registerToBootstrap, type RankRegistration } from './bootstrap_server.js';
export { gatherKvRows, scatterKvRows, kvRowBytesPerToken, locRuns, type LocRun } from '../mem_cache/index.js';
export { type AuxData, type Destination } from './transfer_frames.js';
export { PrefillKVManager, KVSender } from './kv_sender.js';
export { DecodeKVManager, KVReceiver, type KvChunk } from './kv_receiver.js';
export { KvWireLayout, kvHeadRangeOf, type KvShardSpec } from './kv_layout.js';
export { GroupKv } from './kv_io.js';
export { resolveRankMapping, followBootstrapRoomDpRank, type RankMapping } from './rank_mapping.js';
export { PrefillLoop, type PrefillStats } from './prefill_loop.js';
export { DecodeLoop, type DecodeStats } from './decode_loop.js';
export { TRANSFER_BACKENDS, availableTransferBackends, resolveTransferBackend, type TransferBackendChoice } from './backends.js';
export { loadUcxAddon, RangeAllocator, ucxWorkerSettings, type UcxAddon } from './ucx_addon.js';

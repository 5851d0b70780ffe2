// Public surface of distributed/ (see ARCHITECTURE.md for what it may import).
export type { CommBuffer, Communicator } from './communicator.js';
export { createSabGroup, SabCommunicator, SAB_MAX_RANKS } from './sab_communicator.js';
export type { SabGroupHandle, SabGroupOptions } from './sab_communicator.js';
export { abortShmGroup, createShmGroup, ShmCommunicator } from './shm_communicator.js';
export type { ShmGroupHandle, ShmGroupOptions } from './shm_communicator.js';
export { loadShmAddon } from './shm_addon.js';
export { abortLocalGroup, createLocalGroup, openLocalCommunicator } from './local_group.js';
export type { LocalGroupHandle, LocalGroupOptions, SabLocalGroupHandle } from './local_group.js';
export { exitProcessNow, GLOO_PACKAGE, GlooCommunicator, loadGlooAddon } from './gloo_communicator.js';
export type { GlooAddon, GlooGroupSpec } from './gloo_communicator.js';
export { TcpStoreClient, TcpStoreServer } from './tcp_store.js';
export { abortCommunicator, glooSubgroupRef, openGroup } from './group_ref.js';
export type { GlooGroupRef, GroupRef } from './group_ref.js';
export { FramedLink, listenFramed } from './framed_link.js';
export { bootstrapNodes, NodeBootstrap, parseDistInitAddr } from './node_bootstrap.js';
export type { NodeBootstrapOptions } from './node_bootstrap.js';
export { abortLocalLink, createLocalLink, openLink } from './p2p_link.js';
export type { GlooLinkEnd, LinkEnd, LocalLinkEnd, P2pLink } from './p2p_link.js';

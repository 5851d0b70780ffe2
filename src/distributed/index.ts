// Public surface of distributed/ (see ARCHITECTURE.md for what it may import).
export type { CommBuffer, Communicator } from './communicator.js';
export { createSabGroup, SabCommunicator, SAB_MAX_RANKS } from './sab_communicator.js';
export type { SabGroupHandle, SabGroupOptions } from './sab_communicator.js';

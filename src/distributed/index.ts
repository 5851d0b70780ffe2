// Public surface of distributed/ (see ARCHITECTURE.md for what it may import).
export type { CommBuffer, Communicator } from './communicator.js';

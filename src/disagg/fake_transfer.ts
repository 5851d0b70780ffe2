// The `fake` KV transfer backend (SGLang disaggregation/fake/conn.py): no connection and no transfer, for warm-up,
// health checks and tests of the queues. A sender is WaitingForInput at once (the handshake "completed instantly")
// and Success once finished; a receiver is WaitingForInput after init and Success at its next poll, with no KV: the
// decode side decodes from whatever its newly allocated KV rows hold, starting from token 0 (SGLang reads its
// metadata buffer, zeroed at start). Both sides must use it.
import { KVPoll, type KVPollState } from './kv_poll.js';
import type { DecodeKVManagerLike, KVReceiverLike, KvChunk } from './kv_receiver.js';
import type { KVSenderLike, PrefillKVManagerLike } from './kv_sender.js';
import type { AuxData, Destination } from './transfer_frames.js';

/** SGLang FakeKVSender. */
class FakeKVSender implements KVSenderLike {
  readonly error: string | null = null;
  readonly dst: Destination | null = null;
  readonly via = null;
  chunks = 0;
  private state: KVPollState = KVPoll.WaitingForInput;
  constructor(readonly room: number) {}
  poll(): KVPollState {
    return this.state;
  }
  sendChunk(): void {
    this.chunks++;
  }
  finish(): void {
    if (this.state !== KVPoll.Failed) this.state = KVPoll.Success;
  }
  abort(): void {
    this.state = KVPoll.Failed;
  }
}

/** SGLang FakeKVManager, prefill side: no endpoint. */
export class FakePrefillKVManager implements PrefillKVManagerLike {
  readonly backend = 'fake' as const;
  listen(): Promise<number> {
    return Promise.resolve(0);
  }
  createSender(room: number): KVSenderLike {
    return new FakeKVSender(room);
  }
  release(): void {}
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** SGLang FakeKVReceiver. */
class FakeKVReceiver implements KVReceiverLike {
  error: string | null = null;
  aux: AuxData | null = null;
  private bootstrapped = false;
  private state: KVPollState = KVPoll.Bootstrapping;
  constructor(readonly room: number) {}
  poll(): KVPollState {
    if (this.state === KVPoll.WaitingForInput && this.bootstrapped) {
      this.aux = { room: this.room, firstTokenId: 0, cachedTokens: 0 };
      this.state = KVPoll.Success;
    }
    return this.state;
  }
  init(): void {
    this.bootstrapped = true;
    this.state = KVPoll.WaitingForInput;
  }
  takeChunks(): KvChunk[] {
    return [];
  }
  fail(message: string): void {
    if (this.state === KVPoll.Success) return;
    this.state = KVPoll.Failed;
    this.error = message;
  }
}

/** SGLang FakeKVManager, decode side. */
export class FakeDecodeKVManager implements DecodeKVManagerLike {
  readonly backend = 'fake' as const;
  createReceiver(_addr: string, room: number): KVReceiverLike {
    return new FakeKVReceiver(room);
  }
  init(r: KVReceiverLike, _dst?: Destination): void {
    (r as FakeKVReceiver).init();
  }
  abort(r: KVReceiverLike, message: string): void {
    r.fail(message);
  }
  release(): void {}
  close(): void {}
}

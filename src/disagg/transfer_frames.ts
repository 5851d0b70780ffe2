import type { DraftState } from './draft_kv.js';

// The PD transfer connection's messages (one TCP connection from a decode group to a prefill group's transfer
// endpoint, rooms multiplexed on it). Frames: [u32 header bytes][u32 payload bytes][JSON header][payload].
//   decode → prefill: hello (the decode side's UCX worker address, staging region and rkey), dst (a room's
//     destination), fail (the decode side gave up on a room: SGLang's abort notification);
//   prefill → decode: kv (a chunk's rows for tokens [start, start + count): the payload, or "already put by UCX"),
//     done (the aux data: first token, its logprobs, the room), fail (the prefill side failed the room), released
//     (answer to the decode side's fail: no UCX put into the room's staging slot is in flight or will follow, so the
//     slot may be reused).

/** A decode rank's part of SGLang's rank mapping, sent with the destination (rank_mapping.ts). */
export interface DecodeRankTargets {
  readonly tpRank: number;
  /** Prefill attn_tp ranks it reads from; `dummy` of them send nothing (MLA replicas). */
  readonly targets: readonly number[];
  readonly dummy: readonly number[];
}

/** A decode group's destination for one room (SGLang KVReceiver.send_metadata). */
export interface Destination {
  readonly room: number;
  /** Prompt tokens whose KV is expected. */
  readonly numTokens: number;
  /** Wire-layout fingerprint of the decode side (kv_layout.ts); the prefill side refuses another one. */
  readonly layout: string;
  /** Wire bytes per token. */
  readonly bytesPerToken: number;
  /** UCX: the room's slot in the decode side's staging region; token t's chunk goes at offset + t · bytesPerToken. */
  readonly ucx?: { readonly offset: number; readonly length: number };
  /** The decode group's attn_tp size and each rank's prefill targets. */
  readonly decodeTp?: { readonly attnTpSize: number; readonly ranks: readonly DecodeRankTargets[] };
  /** Speculative decoding on the decode side: its draft pool's fingerprint and row bytes (draft_kv.ts). */
  readonly draft?: { readonly layout: string; readonly bytesPerToken: number };
}

/** What the prefill side sends after the KV (SGLang's aux buffer: first token, its logprob, the room check). */
export interface AuxData {
  readonly room: number;
  readonly firstTokenId: number;
  /** [logprob, id] of the first token and its top alternatives, when the request returns logprobs. */
  readonly outputTokenLogprob?: [number, number] | null;
  readonly outputTopLogprobs?: [number, number][] | null;
  /** Prompt tokens the prefill side found in its prefix cache. */
  readonly cachedTokens: number;
  /** Speculative decoding: the draft state of the last prompt position (draft_kv.ts). */
  readonly draft?: DraftState | null;
}

export type Header =
  | { type: 'hello'; ucx: { address: string; rkey: string; base: string } }
  | { type: 'dst'; dst: Destination }
  | { type: 'kv'; room: number; start: number; count: number; ucx?: boolean; draft?: boolean }
  | { type: 'done'; aux: AuxData }
  | { type: 'fail'; room: number; message: string }
  | { type: 'released'; room: number };

/** One frame's header bytes (lengths and JSON header), for a payload of `payloadBytes` that follows it. */
export function frameHeader(h: Header, payloadBytes = 0): Buffer {
  const hb = Buffer.from(JSON.stringify(h));
  const out = Buffer.allocUnsafe(8 + hb.length);
  out.writeUInt32LE(hb.length, 0);
  out.writeUInt32LE(payloadBytes, 4);
  hb.copy(out, 8);
  return out;
}

/** A frame without payload. */
export function frame(h: Header): Buffer {
  return frameHeader(h);
}

/** Writes a frame with a payload: the header, then the payload as it is (no copy into one buffer). */
export function writeFrame(socket: { write(b: Uint8Array): boolean }, h: Header, payload: Uint8Array): void {
  socket.write(frameHeader(h, payload.length));
  socket.write(payload);
}

/** Splits a byte stream into frames (chunks are joined only once a whole frame is there). */
export class FrameReader {
  private buf: Buffer = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private partBytes = 0;
  private need = 8;
  constructor(private readonly onFrame: (h: Header, payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.parts.push(chunk);
    this.partBytes += chunk.length;
    if (this.buf.length + this.partBytes < this.need) return;
    this.buf = this.buf.length === 0 && this.parts.length === 1 ? this.parts[0] : Buffer.concat([this.buf, ...this.parts]);
    this.parts = [];
    this.partBytes = 0;
    for (;;) {
      this.need = this.buf.length < 8 ? 8 : 8 + this.buf.readUInt32LE(0) + this.buf.readUInt32LE(4);
      if (this.buf.length < this.need) return;
      const hl = this.buf.readUInt32LE(0);
      const h = JSON.parse(this.buf.subarray(8, 8 + hl).toString('utf8')) as Header;
      const payload = this.buf.subarray(8 + hl, this.need);
      this.buf = this.buf.subarray(this.need);
      this.need = 8;
      this.onFrame(h, payload);
    }
  }
}

/** SGLang's KVTransferError text: "KVTransferError(bootstrap_room=N): reason". */
export function kvTransferError(room: number, reason: string): string {
  return `KVTransferError(bootstrap_room=${room}): ${reason}`;
}

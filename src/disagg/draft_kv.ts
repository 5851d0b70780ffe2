// PD with speculative decoding (EAGLE / NEXTN; SGLang disaggregation/prefill.py + decode.py for spec): the prefill server
// also runs the draft (its draft extend over the prompt, which the target's hidden states seed) and sends, after the
// target KV, the draft model's KV rows of the prompt and the draft state of the last position — SGLang's
// output_topk_p / output_topk_index / hidden_states in the metadata buffer; here the request's draft top-k ids and
// probabilities, the hidden state and how far the draft KV reaches. The decode server writes the rows into its draft
// pool and starts drafting from that state, as if it had prefilled the request itself. The draft runs unsharded on
// the core thread on both sides (engine/spec_setup.ts), so its rows move from one pool to one pool.
import { gatherKvRows, kvRowBytesPerToken, scatterKvRows } from '../mem_cache/index.js';
import type { Req, SpecDecoder } from '../scheduler/index.js';
import { KvWireLayout } from './kv_layout.js';

/** The draft state of a request's last prompt position, as sent with the aux data. */
export interface DraftState {
  /** Positions whose draft KV is in place (Req.specDraftLen). */
  readonly draftLen: number;
  readonly topIds: number[] | null;
  readonly topP: number[] | null;
  /** The hidden state seeding the next draft level, f32 bytes in base64. */
  readonly hidden: string | null;
}

/** The draft pool of one side. */
export class DraftKv {
  readonly fingerprint: string;
  readonly bytesPerToken: number;

  constructor(private readonly spec: SpecDecoder) {
    const pool = spec.draft.kvPool;
    this.fingerprint = `${spec.draft.algorithm}:${new KvWireLayout(pool, { ranks: 1, kvHeads: null }).fingerprint}`;
    this.bytesPerToken = kvRowBytesPerToken(pool);
  }

  private shifted(locs: Int32Array): Int32Array {
    const off = this.spec.draft.locOffset;
    return Int32Array.from(locs, (l) => l + off);
  }

  /** The draft rows of target locs `locs` (token order). */
  read(locs: Int32Array): Uint8Array {
    return gatherKvRows(this.spec.draft.kvPool, this.shifted(locs));
  }

  /** Writes draft rows at target locs `locs`. @throws InternalError for a payload of the wrong size */
  write(locs: Int32Array, data: Uint8Array): void {
    scatterKvRows(this.spec.draft.kvPool, this.shifted(locs), data);
  }

  /** A request's draft state after its prefill (read on the prefill side). */
  static stateOf(req: Req): DraftState {
    return {
      draftLen: req.specDraftLen,
      topIds: req.specTopIds ? Array.from(req.specTopIds) : null,
      topP: req.specTopP ? Array.from(req.specTopP) : null,
      hidden: req.specHidden ? Buffer.from(req.specHidden.buffer, req.specHidden.byteOffset, req.specHidden.byteLength).toString('base64') : null,
    };
  }

  /** Gives a transferred request the prefill side's draft state (decode side). */
  static install(req: Req, s: DraftState): void {
    req.specDraftLen = s.draftLen;
    req.specTopIds = s.topIds ? Int32Array.from(s.topIds) : null;
    req.specTopP = s.topP ? Float32Array.from(s.topP) : null;
    if (s.hidden) {
      const b = Buffer.from(s.hidden, 'base64');
      req.specHidden = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    } else req.specHidden = null;
  }
}

// Reusable f32 activation buffers of one model: a decode step's intermediates (norm outputs, projections, the MoE
// output) go into the same memory every step instead of ~80 fresh typed arrays (each an off-heap calloc, zeroing and
// a free) — at batch 1 that allocation work is a visible part of the step.
/**
 * Named f32 buffers reused from one forward to the next. A model holds one instance and runs one forward at a
 * time; a buffer's contents are whatever the previous user left (callers pass it as an op's `out`, which the op
 * overwrites completely). Never return one of these buffers to the caller of the forward: it changes next step.
 */
export class ScratchBuffers {
  private readonly buffers = new Map<string, Float32Array>();
  private readonly views = new Map<string, Float32Array>();

  /** @param maxElements requests above this many elements get a fresh array instead (prefill-sized activations) */
  constructor(readonly maxElements = 1 << 17) {}

  /**
   * @param name the buffer's role (one name per live intermediate: two names never share memory)
   * @param length elements wanted
   * @returns a Float32Array of exactly `length` elements (stale contents), or a new zeroed one when `length` exceeds
   *   maxElements
   */
  get(name: string, length: number): Float32Array {
    if (length > this.maxElements) return new Float32Array(length);
    const view = this.views.get(name);
    if (view !== undefined && view.length === length) return view;
    let buf = this.buffers.get(name);
    if (buf === undefined || buf.length < length) {
      buf = new Float32Array(Math.max(length, Math.min(this.maxElements, 2 * (buf?.length ?? 0))));
      this.buffers.set(name, buf);
    }
    const v = buf.subarray(0, length);
    this.views.set(name, v);
    return v;
  }
}

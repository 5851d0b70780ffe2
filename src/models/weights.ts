// WeightStore: every weight of a model, held once, in the form the backend chose (Ops.prepareWeight), plus the
// TensorSpec list a model declares (name → shape from config) that the loader validates and tiny_weights generates.
import { ModelLoadError } from '../common/index.js';
import { weightToF32 } from '../kernels/index.js';
import type { Weight } from '../kernels/index.js';

/**
 * How the released checkpoint stores a tensor. The loader accepts any dtype the header says (a BF16 linear where
 * FP8 is usual is fine); tiny_weights writes this encoding.
 * - fp8: float8_e4m3fn `[N, K]` plus F32 `<name>_scale_inv` `[ceil(N/bn), ceil(K/bk)]` (model-spec §1.2)
 */
export type StoredAs = 'fp8' | 'bf16' | 'f32';

/** What random values tiny_weights draws for a tensor (its role). */
export type InitKind = 'linear' | 'embedding' | 'norm' | 'norm_bias' | 'router_bias';

/**
 * The part of a tensor one TP/EP rank loads: the slice [start, start + count) of dimension `dim` (0 = rows, the
 * output features of a linear; 1 = columns, its input features). FP8 block scales follow the slice.
 */
export interface TensorShard {
  readonly dim: 0 | 1;
  readonly start: number;
  readonly count: number;
}

/** One tensor a model expects in its checkpoint. */
export interface TensorSpec {
  /** Checkpoint name, e.g. `model.layers.0.self_attn.q_proj.weight`. */
  readonly name: string;
  /** Shape implied by config.json. */
  readonly shape: readonly number[];
  readonly storedAs: StoredAs;
  readonly init: InitKind;
  /**
   * If true the checkpoint may lack it (e.g. DeepSeek's MTP layer): the loader skips it when absent (and
   * shape-checks it when present); tiny_weights still writes it.
   */
  readonly optional?: boolean;
  /** Under TP/EP: the slice this rank loads (`shape` stays the full checkpoint shape); absent = the whole tensor. */
  readonly shard?: TensorShard;
}

/** The name of the block-scale tensor of an FP8 weight (`X.weight` → `X.weight_scale_inv`). */
export function scaleInvName(weightName: string): string {
  return `${weightName}_scale_inv`;
}

/**
 * Weights by checkpoint name. Holds exactly one representation per weight (whatever Ops.prepareWeight returned).
 * Models take their weights out at construction; `get`/`f32` name the tensor when it is absent.
 */
export class WeightStore {
  private readonly map = new Map<string, Weight>();
  /** Checkpoint bytes read into this store (weights and their FP8 scales): the rank's weight bytes. */
  bytesLoaded = 0;

  /** Adds (or replaces) a weight. */
  set(name: string, w: Weight): void {
    this.map.set(name, w);
  }

  /** True if a weight of this name was loaded or set. */
  has(name: string): boolean {
    return this.map.has(name);
  }

  /**
   * The weight as held by the backend.
   * @throws ModelLoadError naming the tensor when absent
   */
  get(name: string): Weight {
    const w = this.map.get(name);
    if (!w) throw new ModelLoadError(`weight '${name}' was not loaded`, { tensor: name });
    return w;
  }

  /**
   * The weight as f32 (no copy for an f32-held weight; a fresh dequantized copy otherwise). Use for small tensors
   * (norm weights, biases) and in tests.
   * @returns [numel] f32
   * @throws ModelLoadError naming the tensor when absent
   */
  f32(name: string): Float32Array {
    return weightToF32(this.get(name));
  }

  /** Names in insertion order. */
  names(): string[] {
    return [...this.map.keys()];
  }

  /** Number of weights held. */
  get size(): number {
    return this.map.size;
  }
}

// safetensors on disk: validated headers, tensor-by-tensor positional reads (never whole files: real shards are
// several GB), sharded checkpoints through model.safetensors.index.json, and a writer (tests, make-tiny).
//
// File format (https://github.com/huggingface/safetensors): u64 LE header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the data section;
// offsets are relative to the data section start (8 + N). The header is padded with spaces to 8 bytes.
import { closeSync, existsSync, fstatSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DTYPE_BYTES, ModelLoadError, dtypeFromSafetensors, dtypeToSafetensors, numel } from '../common/index.js';
import type { DType } from '../common/index.js';

/** Largest header we accept (the spec caps it at 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;

/** Where one tensor lives on disk. */
export interface TensorInfo {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Absolute path of the file holding it. */
  readonly file: string;
  /** Absolute byte offset of its first byte in `file`. */
  readonly offset: number;
  /** Byte length (numel · bytes per element). */
  readonly byteLength: number;
}

/** One opened .safetensors file: header parsed and validated against the file size; data read on demand. */
export class SafetensorsFile {
  readonly path: string;
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  readonly metadata: Readonly<Record<string, string>>;
  private fd: number | null;

  private constructor(path: string, fd: number, tensors: Map<string, TensorInfo>, metadata: Record<string, string>) {
    this.path = path;
    this.fd = fd;
    this.tensors = tensors;
    this.metadata = metadata;
  }

  /**
   * Opens a file and validates its header: length, JSON, dtypes, shapes, offsets consistent with the shape and
   * inside the file.
   * @throws ModelLoadError naming the file (and tensor) for a missing/truncated file, bad header JSON, unknown dtype,
   *   inconsistent offsets
   */
  static open(path: string): SafetensorsFile {
    let fd: number;
    try {
      fd = openSync(path, 'r');
    } catch (err) {
      throw new ModelLoadError(`cannot open ${path}: ${(err as Error).message}`, { file: path }, { cause: err });
    }
    try {
      const fileSize = fstatSync(fd).size;
      if (fileSize < 8) throw new ModelLoadError(`${path}: truncated safetensors file (${fileSize} bytes, no header)`, { file: path });
      const lenBuf = Buffer.alloc(8);
      readExactly(fd, lenBuf, 0, path, 'header length');
      const headerLen = Number(lenBuf.readBigUInt64LE(0));
      if (headerLen > MAX_HEADER_BYTES || 8 + headerLen > fileSize) {
        throw new ModelLoadError(`${path}: header length ${headerLen} exceeds the file (${fileSize} bytes): truncated or not a safetensors file`, { file: path });
      }
      const headerBuf = Buffer.alloc(headerLen);
      readExactly(fd, headerBuf, 8, path, 'header');
      let header: unknown;
      try {
        header = JSON.parse(headerBuf.toString('utf8'));
      } catch (err) {
        throw new ModelLoadError(`${path}: bad safetensors header JSON: ${(err as Error).message}`, { file: path }, { cause: err });
      }
      if (header === null || typeof header !== 'object' || Array.isArray(header)) {
        throw new ModelLoadError(`${path}: safetensors header is not a JSON object`, { file: path });
      }
      const dataStart = 8 + headerLen;
      const tensors = new Map<string, TensorInfo>();
      let metadata: Record<string, string> = {};
      for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
        if (name === '__metadata__') {
          metadata = (entry ?? {}) as Record<string, string>;
          continue;
        }
        tensors.set(name, parseEntry(path, name, entry, dataStart, fileSize));
      }
      return new SafetensorsFile(path, fd, tensors, metadata);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /**
   * Reads one tensor's bytes with a positional read into a fresh (aligned) buffer.
   * @param alloc where the bytes go (default: a new Uint8Array); must return exactly the requested length
   * @returns [byteLength] u8, little-endian elements
   * @throws ModelLoadError naming file and tensor when absent or the read comes up short (file truncated since open)
   */
  read(name: string, alloc: (byteLength: number) => Uint8Array = (n) => new Uint8Array(n)): Uint8Array {
    const info = this.tensors.get(name);
    if (!info) throw new ModelLoadError(`${this.path}: no tensor '${name}'`, { file: this.path, tensor: name });
    if (this.fd === null) throw new ModelLoadError(`${this.path}: file already closed`, { file: this.path, tensor: name });
    const out = alloc(info.byteLength);
    readExactly(this.fd, out, info.offset, this.path, `tensor '${name}'`, name);
    return out;
  }

  /**
   * Reads the slice [start, start + count) of dimension `dim` of a 1-D or 2-D tensor (a TP shard): one positional
   * read for rows (dim 0), one per row for columns (dim 1); the rest of the tensor is never read.
   * @param alloc where the bytes go (default: a new Uint8Array); must return exactly the requested length
   * @returns the slice's bytes, row-major (shape: the tensor's with dimension `dim` = count)
   * @throws ModelLoadError naming file and tensor when absent, the slice is outside the tensor, or a read comes up short
   */
  readSlice(name: string, dim: 0 | 1, start: number, count: number, alloc: (byteLength: number) => Uint8Array = (n) => new Uint8Array(n)): Uint8Array {
    const info = this.tensors.get(name);
    if (!info) throw new ModelLoadError(`${this.path}: no tensor '${name}'`, { file: this.path, tensor: name });
    if (this.fd === null) throw new ModelLoadError(`${this.path}: file already closed`, { file: this.path, tensor: name });
    const shape = info.shape;
    const eb = DTYPE_BYTES[info.dtype];
    if (shape.length < 1 || shape.length > 2 || (dim === 1 && shape.length !== 2) || start < 0 || count < 0 || start + count > shape[dim]) {
      throw new ModelLoadError(`${this.path}: tensor '${name}' [${shape.join(', ')}] has no slice [${start}, ${start + count}) of dimension ${dim}`, { file: this.path, tensor: name });
    }
    const cols = shape.length === 2 ? shape[1] : 1;
    if (dim === 0) {
      const out = alloc(count * cols * eb);
      readExactly(this.fd, out, info.offset + start * cols * eb, this.path, `tensor '${name}'`, name);
      return out;
    }
    const rows = shape[0];
    const out = alloc(rows * count * eb);
    for (let r = 0; r < rows; r++) {
      readExactly(this.fd, out.subarray(r * count * eb, (r + 1) * count * eb), info.offset + (r * cols + start) * eb, this.path, `tensor '${name}'`, name);
    }
    return out;
  }

  /** Closes the file descriptor (idempotent). */
  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

function parseEntry(path: string, name: string, entry: unknown, dataStart: number, fileSize: number): TensorInfo {
  const bad = (what: string): never => {
    throw new ModelLoadError(`${path}: tensor '${name}': ${what}`, { file: path, tensor: name });
  };
  if (entry === null || typeof entry !== 'object') bad('header entry is not an object');
  const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  const dtype = typeof e.dtype === 'string' ? dtypeFromSafetensors(e.dtype) : undefined;
  if (!dtype) bad(`unknown dtype ${JSON.stringify(e.dtype)}`);
  const shape = e.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) bad(`bad shape ${JSON.stringify(shape)}`);
  const offs = e.data_offsets;
  if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isInteger(o) && o >= 0) || offs[1] < offs[0]) {
    bad(`bad data_offsets ${JSON.stringify(offs)}`);
  }
  const [begin, end] = offs as [number, number];
  const byteLength = numel(shape as number[]) * DTYPE_BYTES[dtype as DType];
  if (end - begin !== byteLength) bad(`data_offsets [${begin}, ${end}] hold ${end - begin} bytes, shape [${(shape as number[]).join(', ')}] ${e.dtype} needs ${byteLength}`);
  if (dataStart + end > fileSize) bad(`data ends at byte ${dataStart + end} but the file has ${fileSize} bytes (truncated file)`);
  return { name, dtype: dtype as DType, shape: shape as number[], file: path, offset: dataStart + begin, byteLength };
}

function readExactly(fd: number, buf: Uint8Array, position: number, path: string, what: string, tensor?: string): void {
  let done = 0;
  while (done < buf.length) {
    const n = readSync(fd, buf, done, buf.length - done, position + done);
    if (n === 0) throw new ModelLoadError(`${path}: unexpected end of file reading ${what} (truncated file)`, { file: path, tensor });
    done += n;
  }
}

/** Name of the shard index of a sharded checkpoint. */
export const SAFETENSORS_INDEX = 'model.safetensors.index.json';

/**
 * A checkpoint directory: one `model.safetensors`, shards listed by `model.safetensors.index.json`, or (no index)
 * every `*.safetensors` file. Headers are read at open; tensor data only on `read`.
 */
export class Checkpoint {
  readonly dir: string;
  private readonly files: SafetensorsFile[];
  private readonly where = new Map<string, SafetensorsFile>();

  private constructor(dir: string, files: SafetensorsFile[]) {
    this.dir = dir;
    this.files = files;
  }

  /**
   * Opens a checkpoint directory and validates every header (and the index against them).
   * @throws ModelLoadError naming the file (and a tensor it should hold) for a missing shard, a bad index, a
   *   tensor the index lists but its shard lacks, duplicated tensors, or no safetensors at all
   */
  static open(dir: string): Checkpoint {
    const indexPath = join(dir, SAFETENSORS_INDEX);
    const opened: SafetensorsFile[] = [];
    try {
      if (existsSync(indexPath)) {
        const weightMap = readIndex(indexPath);
        const byFile = new Map<string, string[]>();
        for (const [tensor, file] of Object.entries(weightMap)) {
          if (!byFile.has(file)) byFile.set(file, []);
          byFile.get(file)!.push(tensor);
        }
        const ckpt = new Checkpoint(dir, opened);
        for (const [file, names] of byFile) {
          const path = join(dir, file);
          if (!existsSync(path)) {
            throw new ModelLoadError(`missing shard ${path} (listed in ${indexPath} for tensor '${names[0]}' and ${names.length - 1} more)`, { file: path, tensor: names[0] });
          }
          let sf: SafetensorsFile;
          try {
            sf = SafetensorsFile.open(path);
          } catch (err) {
            // Name a tensor the broken shard should hold when the file-level error cannot.
            if (err instanceof ModelLoadError && err.tensor === null) {
              throw new ModelLoadError(`${err.message} (shard holds tensor '${names[0]}' and ${names.length - 1} more)`, { file: path, tensor: names[0] }, { cause: err });
            }
            throw err;
          }
          opened.push(sf);
          for (const name of names) {
            if (!sf.tensors.has(name)) throw new ModelLoadError(`${path}: tensor '${name}' is listed in ${indexPath} but missing from the shard`, { file: path, tensor: name });
            ckpt.where.set(name, sf);
          }
        }
        return ckpt;
      }
      const single = join(dir, 'model.safetensors');
      let names: string[];
      if (existsSync(single)) names = ['model.safetensors'];
      else {
        let entries: string[];
        try {
          entries = readdirSync(dir);
        } catch (err) {
          throw new ModelLoadError(`cannot read checkpoint directory ${dir}: ${(err as Error).message}`, { file: dir }, { cause: err });
        }
        names = entries.filter((n) => n.endsWith('.safetensors')).sort();
      }
      if (names.length === 0) throw new ModelLoadError(`${dir}: no model.safetensors, ${SAFETENSORS_INDEX} or *.safetensors files`, { file: dir });
      const ckpt = new Checkpoint(dir, opened);
      for (const n of names) {
        const sf = SafetensorsFile.open(join(dir, n));
        opened.push(sf);
        for (const t of sf.tensors.keys()) {
          const prev = ckpt.where.get(t);
          if (prev) throw new ModelLoadError(`tensor '${t}' appears in both ${prev.path} and ${sf.path}`, { file: sf.path, tensor: t });
          ckpt.where.set(t, sf);
        }
      }
      return ckpt;
    } catch (err) {
      for (const f of opened) f.close();
      throw err;
    }
  }

  /** All tensor names, in file then header order. */
  tensorNames(): string[] {
    return [...this.where.keys()];
  }

  /** True if any shard of the checkpoint holds a tensor of this name. */
  has(name: string): boolean {
    return this.where.has(name);
  }

  /** Header info of a tensor, or undefined when absent. */
  info(name: string): TensorInfo | undefined {
    return this.where.get(name)?.tensors.get(name);
  }

  /**
   * Reads one tensor (positional read of exactly its bytes).
   * @param alloc where the bytes go (default: a new Uint8Array), e.g. `Ops.allocateWeightBytes`
   * @throws ModelLoadError naming the checkpoint and tensor when absent, or file and tensor on a short read
   */
  read(name: string, alloc?: (byteLength: number) => Uint8Array): { info: TensorInfo; bytes: Uint8Array } {
    const sf = this.where.get(name);
    if (!sf) throw new ModelLoadError(`${this.dir}: checkpoint has no tensor '${name}'`, { file: this.dir, tensor: name });
    return { info: sf.tensors.get(name)!, bytes: sf.read(name, alloc) };
  }

  /**
   * Reads a slice of one tensor (SafetensorsFile.readSlice).
   * @throws ModelLoadError naming the checkpoint and tensor when absent, or file and tensor for a bad slice or short read
   */
  readSlice(name: string, dim: 0 | 1, start: number, count: number, alloc?: (byteLength: number) => Uint8Array): { info: TensorInfo; bytes: Uint8Array } {
    const sf = this.where.get(name);
    if (!sf) throw new ModelLoadError(`${this.dir}: checkpoint has no tensor '${name}'`, { file: this.dir, tensor: name });
    return { info: sf.tensors.get(name)!, bytes: sf.readSlice(name, dim, start, count, alloc) };
  }

  /** Total bytes of tensor data. */
  get totalBytes(): number {
    let s = 0;
    for (const f of this.files) for (const t of f.tensors.values()) s += t.byteLength;
    return s;
  }

  /** Closes every file. */
  close(): void {
    for (const f of this.files) f.close();
  }
}

function readIndex(indexPath: string): Record<string, string> {
  let idx: unknown;
  try {
    idx = JSON.parse(readFileSync(indexPath, 'utf8'));
  } catch (err) {
    throw new ModelLoadError(`${indexPath}: cannot parse shard index: ${(err as Error).message}`, { file: indexPath }, { cause: err });
  }
  const wm = (idx as { weight_map?: unknown } | null)?.weight_map;
  if (wm === null || typeof wm !== 'object' || Array.isArray(wm) || !Object.values(wm as object).every((v) => typeof v === 'string')) {
    throw new ModelLoadError(`${indexPath}: 'weight_map' must map tensor names to file names`, { file: indexPath });
  }
  return wm as Record<string, string>;
}

// ---------------------------------------------------------------------------------------------------- writer

/** A tensor to write: raw little-endian bytes of `dtype` elements. */
export interface TensorToWrite {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/**
 * Serializes tensors into one safetensors file image (header padded with spaces to a multiple of 8).
 * @throws ModelLoadError when a tensor's byte length disagrees with its shape and dtype
 */
export function encodeSafetensors(tensors: readonly TensorToWrite[], metadata: Record<string, string> = { format: 'pt' }): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    const n = numel(t.shape) * DTYPE_BYTES[t.dtype];
    if (n !== t.data.byteLength) throw new ModelLoadError(`encodeSafetensors: tensor '${t.name}' has ${t.data.byteLength} bytes, shape needs ${n}`, { tensor: t.name });
    header[t.name] = { dtype: dtypeToSafetensors(t.dtype), shape: [...t.shape], data_offsets: [offset, offset + n] };
    offset += n;
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const headerBytes = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let pos = 8 + headerBytes.length;
  for (const t of tensors) {
    out.set(t.data, pos);
    pos += t.data.byteLength;
  }
  return out;
}

/** Writes one safetensors file. @throws ModelLoadError on inconsistent tensors */
export function writeSafetensors(path: string, tensors: readonly TensorToWrite[], metadata?: Record<string, string>): void {
  writeFileSync(path, encodeSafetensors(tensors, metadata));
}

/**
 * Writes a checkpoint: `model.safetensors` when numShards is 1, else `model-0000i-of-0000n.safetensors` shards
 * (tensors split in order into runs of about equal bytes) plus `model.safetensors.index.json`.
 * A weight and its `_scale_inv` always land in the same shard.
 * @returns the file names written (shards, then the index if any)
 */
export function writeCheckpoint(dir: string, tensors: readonly TensorToWrite[], numShards = 1): string[] {
  if (numShards <= 1) {
    writeSafetensors(join(dir, 'model.safetensors'), tensors);
    return ['model.safetensors'];
  }
  const total = tensors.reduce((s, t) => s + t.data.byteLength, 0);
  const shards: TensorToWrite[][] = [[]];
  let acc = 0;
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i];
    const isScaleOfPrev = t.name.endsWith('_scale_inv');
    if (!isScaleOfPrev && shards.length < numShards && acc >= (total * shards.length) / numShards && shards[shards.length - 1].length > 0) shards.push([]);
    shards[shards.length - 1].push(t);
    acc += t.data.byteLength;
  }
  const n = shards.length;
  const pad = (x: number): string => String(x).padStart(5, '0');
  const weightMap: Record<string, string> = {};
  const written: string[] = [];
  shards.forEach((ts, i) => {
    const name = `model-${pad(i + 1)}-of-${pad(n)}.safetensors`;
    writeSafetensors(join(dir, name), ts);
    for (const t of ts) weightMap[t.name] = name;
    written.push(name);
  });
  const index = { metadata: { total_size: total }, weight_map: weightMap };
  writeFileSync(join(dir, SAFETENSORS_INDEX), JSON.stringify(index, null, 2) + '\n');
  written.push(SAFETENSORS_INDEX);
  return written;
}


import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelLoadError } from '../common/index.js';
import { Checkpoint, SafetensorsFile, encodeSafetensors, writeCheckpoint } from './safetensors.js';
import type { TensorToWrite } from './safetensors.js';

const TENSORS: TensorToWrite[] = [
  { name: 'a', dtype: 'f32', shape: [2, 2], data: new Uint8Array(Float32Array.of(1, 2, 3, 4).buffer) },
  { name: 'b', dtype: 'bf16', shape: [3], data: new Uint8Array(Uint16Array.of(0x3f80, 0x4000, 0xc040).buffer) },
  { name: 'c', dtype: 'f8_e4m3', shape: [1, 3], data: Uint8Array.of(0x38, 0x40, 0xb8) },
  { name: 'd', dtype: 'i64', shape: [], data: new Uint8Array(new BigInt64Array([42n]).buffer) },
];

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-st-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('encodeSafetensors: u64 header length, space-padded to 8 bytes, offsets relative to the data section', () => {
  const bytes = encodeSafetensors(TENSORS);
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal((8 + n) % 8, 0);
  const header = JSON.parse(Buffer.from(bytes.subarray(8, 8 + n)).toString('utf8'));
  assert.deepEqual(header.a, { dtype: 'F32', shape: [2, 2], data_offsets: [0, 16] });
  assert.deepEqual(header.c, { dtype: 'F8_E4M3', shape: [1, 3], data_offsets: [22, 25] });
  assert.deepEqual(header.d.data_offsets, [25, 33]);
  assert.equal(bytes.length, 8 + n + 33);
  assert.throws(() => encodeSafetensors([{ name: 'x', dtype: 'f32', shape: [3], data: new Uint8Array(8) }]), /has 8 bytes, shape needs 12/);
});

test('SafetensorsFile: round trip with positional reads; aligned fresh buffers', () => {
  withDir((dir) => {
    writeFileSync(join(dir, 'm.safetensors'), encodeSafetensors(TENSORS));
    const f = SafetensorsFile.open(join(dir, 'm.safetensors'));
    try {
      assert.deepEqual([...f.tensors.keys()], ['a', 'b', 'c', 'd']);
      assert.equal(f.metadata.format, 'pt');
      const b = f.read('b');
      assert.equal(b.byteOffset, 0);
      assert.deepEqual(Array.from(new Uint16Array(b.buffer)), [0x3f80, 0x4000, 0xc040]);
      assert.deepEqual(Array.from(new Float32Array(f.read('a').buffer)), [1, 2, 3, 4]);
      assert.deepEqual(f.tensors.get('d')?.shape, []);
      assert.throws(() => f.read('zz'), (e: unknown) => e instanceof ModelLoadError && e.tensor === 'zz');
    } finally {
      f.close();
    }
  });
});

test('SafetensorsFile: header validation errors name the file and tensor', () => {
  withDir((dir) => {
    const path = join(dir, 'bad.safetensors');
    const good = encodeSafetensors(TENSORS);
    writeFileSync(path, good.subarray(0, 5));
    assert.throws(() => SafetensorsFile.open(path), /truncated safetensors file \(5 bytes/);
    writeFileSync(path, good.subarray(0, good.length - 4));
    assert.throws(() => SafetensorsFile.open(path), (e: unknown) => e instanceof ModelLoadError && e.tensor === 'd' && e.file === path && /truncated file/.test(e.message));
    const mk = (header: object): Uint8Array => {
      const h = Buffer.from(JSON.stringify(header));
      const out = Buffer.alloc(8 + h.length + 16);
      out.writeBigUInt64LE(BigInt(h.length));
      h.copy(out, 8);
      return out;
    };
    writeFileSync(path, mk({ w: { dtype: 'Q4', shape: [4], data_offsets: [0, 16] } }));
    assert.throws(() => SafetensorsFile.open(path), /tensor 'w': unknown dtype "Q4"/);
    writeFileSync(path, mk({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 16] } }));
    assert.throws(() => SafetensorsFile.open(path), /tensor 'w': data_offsets \[0, 16\] hold 16 bytes, shape \[3\] F32 needs 12/);
    const huge = Buffer.alloc(16);
    huge.writeBigUInt64LE(1000n);
    writeFileSync(path, huge);
    assert.throws(() => SafetensorsFile.open(path), /header length 1000 exceeds the file/);
  });
});

test('Checkpoint: sharded with index, single file, and plain *.safetensors folders', () => {
  withDir((dir) => {
    const written = writeCheckpoint(dir, TENSORS, 2);
    assert.deepEqual(written, ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors', 'model.safetensors.index.json']);
    const index = JSON.parse(readFileSync(join(dir, 'model.safetensors.index.json'), 'utf8'));
    assert.equal(index.metadata.total_size, 33);
    const ck = Checkpoint.open(dir);
    assert.deepEqual(ck.tensorNames().sort(), ['a', 'b', 'c', 'd']);
    assert.deepEqual(Array.from(ck.read('c').bytes), [0x38, 0x40, 0xb8]);
    assert.equal(ck.totalBytes, 33);
    ck.close();
  });
  withDir((dir) => {
    writeCheckpoint(dir, TENSORS, 1);
    const ck = Checkpoint.open(dir);
    assert.equal(ck.info('a')?.file, join(dir, 'model.safetensors'));
    ck.close();
  });
  withDir((dir) => {
    writeFileSync(join(dir, 'x.safetensors'), encodeSafetensors(TENSORS.slice(0, 2)));
    writeFileSync(join(dir, 'y.safetensors'), encodeSafetensors(TENSORS.slice(1)));
    assert.throws(() => Checkpoint.open(dir), /tensor 'b' appears in both/);
  });
  withDir((dir) => {
    assert.throws(() => Checkpoint.open(dir), /no model\.safetensors/);
    writeFileSync(join(dir, 'model.safetensors.index.json'), '{"weight_map": 3}');
    assert.throws(() => Checkpoint.open(dir), /'weight_map' must map tensor names to file names/);
  });
});

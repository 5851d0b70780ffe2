import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Rng } from '../common/index.js';
import { decodeJsonBody, detectJsonEncoding } from './json_body.js';

const b = (...bytes: number[]) => Buffer.from(bytes);
const units = (s: string | null) => (s === null ? null : Array.from({ length: s.length }, (_, i) => s.charCodeAt(i)));

test('detectJsonEncoding follows CPython json.detect_encoding', () => {
  const cases: [Buffer, string][] = [
    [Buffer.from('{"a":1}'), 'utf-8'], [b(0xef, 0xbb, 0xbf, 0x7b), 'utf-8-sig'], [b(0xff, 0xfe, 0x7b, 0), 'utf-16'],
    [b(0xfe, 0xff, 0, 0x7b), 'utf-16'], [b(0xff, 0xfe, 0, 0, 0x7b, 0, 0, 0), 'utf-32'], [b(0, 0, 0xfe, 0xff), 'utf-32'],
    [b(0x7b, 0, 0x7d, 0), 'utf-16-le'], [b(0, 0x7b, 0, 0x7d), 'utf-16-be'], [b(0x7b, 0, 0, 0), 'utf-32-le'],
    [b(0, 0, 0, 0x7b), 'utf-32-be'], [b(0x31, 0), 'utf-16-le'], [b(0, 0x31), 'utf-16-be'], [b(0x31, 0, 0x32), 'utf-8'], [b(), 'utf-8'],
  ];
  for (const [bytes, want] of cases) assert.equal(detectJsonEncoding(bytes), want, bytes.toString('hex'));
});

test('decodeJsonBody: valid UTF-8 as is; invalid bytes → null; encoded surrogates pass; BOMs and UTF-16/32 decoded', () => {
  assert.equal(decodeJsonBody(Buffer.from('{"t": "é🌍 ☀"}')), '{"t": "é🌍 ☀"}');
  assert.equal(decodeJsonBody(Buffer.concat([Buffer.from('{"t": "'), b(0xff), Buffer.from('"}')])), null);
  assert.equal(decodeJsonBody(b(0x7b, 0x22, 0xc0, 0x80, 0x22)), null); // overlong NUL
  assert.equal(decodeJsonBody(b(0x22, 0xf4, 0x90, 0x80, 0x80, 0x22)), null); // above U+10FFFF
  assert.equal(decodeJsonBody(b(0x22, 0x61, 0xe2, 0x82)), null); // truncated
  assert.deepEqual(units(decodeJsonBody(b(0x22, 0xed, 0xa0, 0x80, 0xc3, 0xa9, 0x22))), [0x22, 0xd800, 0xe9, 0x22]);
  assert.equal(decodeJsonBody(b(0x22, 0xed, 0xa0, 0x41, 0x22)), null);
  assert.equal(decodeJsonBody(Buffer.concat([b(0xef, 0xbb, 0xbf), Buffer.from('{"a":1}')])), '{"a":1}');
  assert.equal(decodeJsonBody(Buffer.concat([b(0xff, 0xfe), Buffer.from('{"a":1}', 'utf16le')])), '{"a":1}');
  assert.equal(decodeJsonBody(Buffer.from('{"a":"é"}', 'utf16le')), '{"a":"é"}');
  assert.equal(decodeJsonBody(b(0x7b, 0, 0x7d)), '{\u0000}'); // three bytes: UTF-8 (NUL is valid UTF-8)
  assert.equal(decodeJsonBody(b(0x7b, 0, 0x7d, 0, 0x20)), null); // UTF-16-LE with an odd byte count
  assert.equal(decodeJsonBody(b(0, 0, 0, 0x7b, 0, 0, 0, 0x7d)), '{}');
  assert.deepEqual(units(decodeJsonBody(b(0x22, 0, 0, 0, 0x0d, 0xf3, 1, 0))), [0x22, 0xd83c, 0xdf0d]);
  assert.equal(decodeJsonBody(b(0x22, 0, 0, 0, 0, 0, 0x11, 0)), null); // U+110000
});

test('decodeJsonBody agrees with CPython bytes.decode(json.detect_encoding(b), "surrogatepass") on random bodies', {
  skip: spawnSync('python3', ['-c', '0']).status === 0 ? false : 'python3 not available',
}, () => {
  const rng = new Rng(11);
  const pieces = [
    [0x7b], [0x22], [0x61], [0], [0xff], [0xfe], [0xef, 0xbb, 0xbf], [0xc3, 0xa9], [0xc3], [0xe2, 0x98, 0x83], [0xe2, 0x98], [0xed, 0xa0, 0x80],
    [0xed, 0xbf, 0xbf], [0xed, 0x9f, 0xbf], [0xf0, 0x9f, 0x8c, 0x8d], [0xf4, 0x8f, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xe0, 0x80, 0x80],
    [0xc0, 0x80], [0x80], [0x00, 0xd8], [0x00, 0xdc], [0x3d, 0xd8, 0x0d, 0xdf], [0x11, 0x00], [0x00, 0x00],
  ];
  const bodies: Buffer[] = [];
  for (let i = 0; i < 2000; i++) {
    const parts: number[] = [];
    const n = rng.nextInt(8);
    for (let k = 0; k < n; k++) parts.push(...pieces[rng.nextInt(pieces.length)]);
    bodies.push(Buffer.from(parts));
  }
  const script = [
    'import json, sys',
    'for line in sys.stdin.read().split():',
    '  b = bytes.fromhex(line[1:])',
    '  try: s = b.decode(json.detect_encoding(b), "surrogatepass")',
    '  except UnicodeDecodeError: print("null"); continue',
    '  print(",".join(str(u) for u in memoryview(s.encode("utf-16-le", "surrogatepass")).cast("H")))',
  ].join('\n');
  const py = spawnSync('python3', ['-c', script], { input: bodies.map((x) => 'x' + x.toString('hex')).join('\n'), encoding: 'utf8' });
  assert.equal(py.status, 0, py.stderr);
  const lines = py.stdout.split('\n');
  bodies.forEach((body, i) => {
    const got = decodeJsonBody(body);
    assert.equal(got === null ? 'null' : units(got)!.join(','), lines[i], body.toString('hex'));
  });
});

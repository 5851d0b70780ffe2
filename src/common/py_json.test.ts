import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { PyFloat, PyJsonDecodeError, pyFloatRepr, pyJsonDumps, pyJsonLoads } from './py_json.js';
import { Rng } from './rng.js';

test('pyFloatRepr matches CPython repr(float) on known values', () => {
  const cases: [number, string][] = [
    [1, '1.0'], [0.1, '0.1'], [-2.5, '-2.5'], [1e16, '1e+16'], [1e15, '1000000000000000.0'], [123456789012345680000, '1.2345678901234568e+20'],
    [0.0001, '0.0001'], [0.00001, '1e-05'], [1.5e-7, '1.5e-07'], [-0, '-0.0'], [0, '0.0'], [1e308, '1e+308'], [5e-324, '5e-324'],
    [Infinity, 'Infinity'], [NaN, 'NaN'], [3.14159, '3.14159'], [100, '100.0'], [2 ** 53, '9007199254740992.0'],
  ];
  for (const [x, want] of cases) assert.equal(pyFloatRepr(x), want, String(x));
});

test('pyJsonDumps: separators, key order, escapes, ensure_ascii, ints vs floats, indent', () => {
  const v = pyJsonLoads('{"b": 1, "a": [1.0, 2, -0.5e1, 12345678901234567890], "s": "é\\n\\u0001\\"\\\\/ ☀ 🌍", "n": null, "t": true}');
  assert.equal(
    pyJsonDumps(v, { ensureAscii: false }),
    '{"b": 1, "a": [1.0, 2, -5.0, 12345678901234567890], "s": "é\\n\\u0001\\"\\\\/ ☀ 🌍", "n": null, "t": true}',
  );
  assert.equal(pyJsonDumps('é🌍\x7f'), '"\\u00e9\\ud83c\\udf0d\\u007f"');
  assert.equal(pyJsonDumps({ a: [1, { b: [] }], c: {} }, { indent: 2 }), '{\n  "a": [\n    1,\n    {\n      "b": []\n    }\n  ],\n  "c": {}\n}');
  assert.equal(pyJsonDumps({ a: 1, b: 2 }, { separators: [',', ':'] }), '{"a":1,"b":2}');
  assert.equal(pyJsonDumps({ b: 1, a: 2 }, { sortKeys: true }), '{"a": 2, "b": 1}');
  assert.equal(pyJsonDumps(1e21), '1000000000000000000000'); // integral JS number → Python int
});

test('pyJsonLoads: Python semantics and errors', () => {
  assert.ok(pyJsonLoads('1.0') instanceof PyFloat);
  assert.equal(pyJsonLoads('  -0 '), 0);
  assert.equal(typeof pyJsonLoads('123456789012345678901234567890'), 'bigint');
  const dup = pyJsonLoads('{"a": 1, "b": 2, "a": 3}') as Record<string, unknown>;
  assert.deepEqual(Object.keys(dup), ['a', 'b']);
  assert.equal(dup.a, 3);
  assert.equal((pyJsonLoads('NaN') as PyFloat).value, NaN);
  assert.throws(() => pyJsonLoads('{"a": 1} x'), (e: unknown) => e instanceof PyJsonDecodeError && /Extra data: line 1 column 10 \(char 9\)/.test(e.message));
  assert.throws(() => pyJsonLoads('"a\nb"'), PyJsonDecodeError);
  assert.throws(() => pyJsonLoads('{a: 1}'), /Expecting property name enclosed in double quotes/);
  assert.throws(() => pyJsonLoads(''), /Expecting value/);
  const proto = pyJsonLoads('{"__proto__": {"x": 1}}') as Record<string, unknown>;
  assert.deepEqual(Object.keys(proto), ['__proto__']);
});

test('cross-check against CPython json.dumps(json.loads(x)) on random values', { skip: spawnSync('python3', ['-c', '0']).status === 0 ? false : 'python3 not available' }, () => {
  const rng = new Rng(7);
  const texts: string[] = [];
  for (let i = 0; i < 300; i++) {
    const e = rng.nextInt(40) - 20;
    const x = (rng.nextFloat() - 0.5) * 10 ** e;
    const s = String.fromCharCode(...Array.from({ length: 6 }, () => [0x41, 0xe9, 0x0a, 0x22, 0x2603, 0x01, 0x5c][rng.nextInt(7)]));
    texts.push(JSON.stringify({ x, i: Math.round(x), f: `${rng.nextInt(100)}.0`, s, l: [x / 3, 1e-7 * i] }).replace(/"f":"(\d+\.0)"/, '"f":$1'));
  }
  const py = spawnSync('python3', ['-c', 'import json,sys\nfor l in sys.stdin.read().splitlines():\n  v=json.loads(l); print(json.dumps(v)); print(json.dumps(v, ensure_ascii=False))'], {
    input: texts.join('\n'),
    encoding: 'utf8',
  });
  assert.equal(py.status, 0, py.stderr);
  const lines = py.stdout.split('\n');
  texts.forEach((t, i) => {
    const v = pyJsonLoads(t);
    assert.equal(pyJsonDumps(v), lines[2 * i], t);
    assert.equal(pyJsonDumps(v, { ensureAscii: false }), lines[2 * i + 1], t);
  });
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pyIntRepr, pyListRepr, pyStrRepr } from './py_repr.js';

test('pyStrRepr matches CPython repr(str): quote choice, escapes, non-printables, printable non-ASCII kept', () => {
  // expected values printed by CPython 3 (repr of each string)
  const cases: [string, string][] = [
    ['x', "'x'"],
    ["it's", `"it's"`],
    ['say "hi"', `'say "hi"'`],
    [`both ' and "`, `'both \\' and "'`],
    ['a\\b', "'a\\\\b'"],
    ['tab\tnl\nr\r', "'tab\\tnl\\nr\\r'"],
    ['\x01\x7f\x85\xa0', "'\\x01\\x7f\\x85\\xa0'"],
    ['é☀🌍', "'é☀🌍'"],
    ['\u200b\u2028\ue000', "'\\u200b\\u2028\\ue000'"],
    ['\u{e0001}', "'\\U000e0001'"],
    ['\ud800', "'\\ud800'"],
    [' ', "' '"],
    ['', "''"],
  ];
  for (const [s, want] of cases) assert.equal(pyStrRepr(s), want, JSON.stringify(s));
});

test('pyListRepr / pyIntRepr: lists of str and int as Python prints them', () => {
  assert.equal(pyListRepr(['x', "y'"]), `['x', "y'"]`);
  assert.equal(pyListRepr([1, 600, 128815]), '[1, 600, 128815]');
  assert.equal(pyListRepr([]), '[]');
  assert.equal(pyIntRepr(1e21), '1000000000000000000000');
});

/**
 * JSON.* library (src/kv/json) against a real redis-server: every command, legacy and JSONPath
 * forms, reply shapes and error texts as RedisJSON 2.x gives them (RESP2).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startRedis, type Reply, type TestRedis } from './json-helpers.js';

let r: TestRedis;
let n = 0;
const key = (): string => `jc:${++n}`;
const json = (...a: Array<string | number>): Promise<Reply> => r.json(...a);
const get = async (k: string, ...paths: string[]): Promise<unknown> => {
  const reply = await json('JSON.GET', k, ...paths);
  return typeof reply === 'string' ? JSON.parse(reply) : reply;
};
const doc = async (value: unknown): Promise<string> => {
  const k = key();
  assert.equal(await json('JSON.SET', k, '$', JSON.stringify(value)), 'OK');
  return k;
};

before(async () => {
  r = await startRedis();
});
after(async () => {
  await r.close();
});

describe('JSON.SET / JSON.GET', () => {
  test('creates at the root only, legacy and JSONPath roots', async () => {
    const k = key();
    assert.equal(errorOf(await json('JSON.SET', k, '$.a', '1')), 'ERR new objects must be created at the root');
    assert.equal(errorOf(await json('JSON.SET', k, '.a', '1')), 'ERR new objects must be created at the root');
    assert.equal(await json('JSON.SET', k, '.', '{"a":1}'), 'OK');
    assert.deepEqual(await get(k), { a: 1 });
    assert.equal(await json('JSON.SET', k, '$', '[1,2]'), 'OK');
    assert.deepEqual(await get(k), [1, 2]);
  });

  test('NX / XX at the root and below', async () => {
    const k = key();
    assert.equal(await json('JSON.SET', k, '$', '{"a":1}', 'XX'), null);
    assert.equal(await json('JSON.SET', k, '$', '{"a":1}', 'NX'), 'OK');
    assert.equal(await json('JSON.SET', k, '$', '{"a":2}', 'NX'), null);
    assert.equal(await json('JSON.SET', k, '$.a', '5', 'NX'), null);
    assert.equal(await json('JSON.SET', k, '$.b', '5', 'XX'), null);
    assert.equal(await json('JSON.SET', k, '$.b', '6', 'NX'), 'OK');
    assert.equal(await json('JSON.SET', k, '$.a', '7', 'xx'), 'OK');
    assert.deepEqual(await get(k), { a: 7, b: 6 });
    assert.equal(errorOf(await json('JSON.SET', k, '$', '1', 'NX', 'XX')), 'ERR syntax error');
  });

  test('updates every JSONPath match; adds a new key to an existing object only', async () => {
    const k = await doc({ a: { x: 1 }, b: { x: 2 }, c: [1, 2] });
    assert.equal(await json('JSON.SET', k, '$..x', '"y"'), 'OK');
    assert.deepEqual(await get(k, '$..x'), ['y', 'y']);
    assert.equal(await json('JSON.SET', k, '$.a.new', '{"deep":true}'), 'OK');
    assert.equal(await json('JSON.SET', k, '$.missing.new', '1'), null);
    assert.equal(await json('JSON.SET', k, '$.c[1]', '9'), 'OK');
    assert.equal(errorOf(await json('JSON.SET', k, '$.c[5]', '9')), 'ERR array index out of range');
    assert.equal(errorOf(await json('JSON.SET', k, '$..nope', '9')), 'ERR wrong static path');
    assert.deepEqual(await get(k), { a: { x: 'y', new: { deep: true } }, b: { x: 'y' }, c: [1, 9] });
  });

  test('GET: legacy single value, JSONPath array, several paths as an object', async () => {
    const k = await doc({ a: 2, b: 3, nested: { a: 4, b: null } });
    assert.deepEqual(await get(k, '$..b'), [3, null]);
    assert.deepEqual(await get(k, '.nested'), { a: 4, b: null });
    assert.deepEqual(await get(k, 'nested.a'), 4);
    assert.deepEqual(await get(k, '$.nope'), []);
    assert.equal(errorOf(await json('JSON.GET', k, '.nope')), "ERR Path '$.nope' does not exist");
    assert.deepEqual(await get(k, '..a', '$..b'), { '..a': [2, 4], '$..b': [3, null] });
    assert.deepEqual(await get(k, '.a', '.b'), { '.a': 2, '.b': 3 });
    assert.deepEqual(await get(k, 'nested'), { a: 4, b: null });
    assert.deepEqual(await get(k, '.nested["a"]'), 4);
    assert.deepEqual(await get(k, "['nested'].b"), null);
    assert.deepEqual(await get(k, '.'), { a: 2, b: 3, nested: { a: 4, b: null } });
    assert.equal(await json('JSON.GET', 'jc:missing'), null);
  });

  test('GET formatting: INDENT / NEWLINE / SPACE', async () => {
    const k = await doc({ a: [1, { b: 'c' }], e: {}, f: [] });
    assert.equal(
      await json('JSON.GET', k, 'INDENT', '\t', 'NEWLINE', '\n', 'SPACE', ' '),
      '{\n\t"a": [\n\t\t1,\n\t\t{\n\t\t\t"b": "c"\n\t\t}\n\t],\n\t"e": {},\n\t"f": []\n}',
    );
    assert.equal(await json('JSON.GET', k, 'SPACE', ' ', '$.a[1]'), '[{"b": "c"}]');
    assert.equal(await json('JSON.GET', k, 'NOESCAPE', '.e'), '{}');
  });

  test('invalid JSON values are rejected with a position', async () => {
    const k = key();
    assert.match(errorOf(await json('JSON.SET', k, '$', '{"a":}')), /^ERR expected value at line 1 column 6$/);
    assert.match(errorOf(await json('JSON.SET', k, '$', '[1,]')), /^ERR expected value/);
    assert.match(errorOf(await json('JSON.SET', k, '$', '{"a":1} x')), /^ERR trailing characters/);
    assert.match(errorOf(await json('JSON.SET', k, '$', '01')), /^ERR invalid number/);
    assert.match(errorOf(await json('JSON.SET', k, '$', "{'a':1}")), /^ERR key must be a string/);
    assert.match(errorOf(await json('JSON.SET', k, '$', '"abc')), /^ERR EOF while parsing a string/);
    assert.match(errorOf(await json('JSON.SET', k, '$', '"\\x"')), /^ERR invalid escape/);
    for (const bad of ['-', '1.', '.5', '1e', '+1', '-01', 'tru', 'nul', 'falsey', '[1 2]', '{"a" 1}', '{"a":1,}', '', ' ', '1 2', 'NaN', 'Infinity', '1e999']) {
      assert.match(errorOf(await json('JSON.SET', k, '$', bad)), /^ERR (expected|invalid number|trailing|EOF|key must|number out of range)/, JSON.stringify(bad));
    }
    for (const good of ['0', '-0', '1e5', '1E+5', '-1.5e-3', '0.0', '"\\u0000"', '[[],{}]', 'null', 'true', '""']) {
      assert.equal(await json('JSON.SET', k, '$', good), 'OK', good);
      assert.equal(await json('JSON.GET', k), good);
    }
    await r.client.call('DEL', k);
    assert.equal(await r.client.call('EXISTS', k), 0);
  });
});

describe('JSON.MGET / JSON.MSET / JSON.MERGE / JSON.DEL', () => {
  test('MGET: JSONPath arrays, legacy values, nil for missing and non-JSON keys', async () => {
    const k1 = await doc({ a: 1, nested: { a: 3 } });
    const k2 = await doc({ a: 4, nested: { a: 6 } });
    await r.client.call('SET', 'jc:plain', 'x');
    const res = (await json('JSON.MGET', k1, k2, 'jc:missing', 'jc:plain', '$..a')) as Reply[];
    assert.deepEqual(res.slice(0, 2).map((x) => JSON.parse(x as string)), [[1, 3], [4, 6]]);
    assert.deepEqual(res.slice(2), [null, null]);
    assert.deepEqual(await json('JSON.MGET', k1, k2, '.nested.a'), ['3', '6']);
    assert.deepEqual(await json('JSON.MGET', k1, '.nope'), [null]);
  });

  test('MSET: several keys atomically; a bad triplet writes nothing', async () => {
    const k1 = key();
    const k2 = await doc({ a: 1 });
    assert.equal(await json('JSON.MSET', k1, '$', '{"x":1}', k2, '$.b', '2', k2, '$.c', '[]'), 'OK');
    assert.deepEqual(await get(k1), { x: 1 });
    assert.deepEqual(await get(k2), { a: 1, b: 2, c: [] });
    // as RedisJSON without auto-creation: a new key needs a root triplet (checked before any write)
    const k4 = key();
    assert.equal(errorOf(await json('JSON.MSET', k4, '$', '{}', k4, '$.y', '1')), 'ERR new objects must be created at the root');
    assert.equal(await r.client.call('EXISTS', k4), 0);
    const k3 = key();
    assert.equal(errorOf(await json('JSON.MSET', k2, '$.c', '3', k3, '$.a', '1')), 'ERR new objects must be created at the root');
    assert.match(errorOf(await json('JSON.MSET', k2, '$.c', '3', k3, '$', '{')), /^ERR EOF/);
    assert.deepEqual(await get(k2), { a: 1, b: 2, c: [] });
    assert.equal(await r.client.call('EXISTS', k3), 0);
  });

  test('MERGE: RFC 7386 at the root and at a path; null deletes', async () => {
    const k = await doc({ a: { b: 1, c: 2 }, d: [1], e: 'x' });
    assert.equal(await json('JSON.MERGE', k, '$', '{"a":{"c":null,"n":{"z":null,"y":1}},"d":[2],"f":true}'), 'OK');
    assert.deepEqual(await get(k), { a: { b: 1, n: { y: 1 } }, d: [2], e: 'x', f: true });
    assert.equal(await json('JSON.MERGE', k, '$.a', '{"b":5}'), 'OK');
    assert.equal(await json('JSON.MERGE', k, '$.e', 'null'), 'OK');
    assert.equal(await json('JSON.MERGE', k, '$.g', '{"h":null,"i":1}'), 'OK'); // new leaf: as given
    assert.deepEqual(await get(k), { a: { b: 5, n: { y: 1 } }, d: [2], f: true, g: { h: null, i: 1 } });
    const k2 = key();
    assert.equal(await json('JSON.MERGE', k2, '$', '{"a":1,"b":null}'), 'OK');
    assert.deepEqual(await get(k2), { a: 1, b: null });
    assert.equal(await json('JSON.MERGE', k2, '$', '[1]'), 'OK');
    assert.deepEqual(await get(k2), [1]);
    assert.equal(errorOf(await json('JSON.MERGE', key(), '$.a', '1')), 'ERR new objects must be created at the root');
  });

  test('DEL / FORGET: counts, nested matches, array indexes, root deletes the key', async () => {
    const k = await doc({ a: 1, nested: { a: 2, b: { a: 3 } }, arr: [0, 1, 2, 3, 4] });
    assert.equal(await json('JSON.DEL', k, '$..a'), 3);
    assert.equal(await json('JSON.DEL', k, '$.arr[1,3]'), 2);
    assert.deepEqual(await get(k, '$.arr'), [[0, 2, 4]]);
    assert.equal(await json('JSON.FORGET', k, '$.nested'), 1);
    assert.equal(await json('JSON.DEL', k, '$.nested'), 0);
    assert.equal(await json('JSON.DEL', k, '$..*'), 1);
    assert.deepEqual(await get(k), {});
    assert.equal(await json('JSON.DEL', k), 1);
    assert.equal(await r.client.call('EXISTS', k), 0);
    assert.equal(await json('JSON.DEL', k), 0);
  });
});

describe('JSON.TYPE / STRLEN / STRAPPEND / OBJKEYS / OBJLEN / RESP', () => {
  test('TYPE', async () => {
    const k = await doc({ a: 1, b: 1.5, c: 's', d: true, e: null, f: [], g: {} });
    assert.deepEqual(await json('JSON.TYPE', k, '$.*'), ['integer', 'number', 'string', 'boolean', 'null', 'array', 'object']);
    assert.equal(await json('JSON.TYPE', k), 'object');
    assert.equal(await json('JSON.TYPE', k, '.f'), 'array');
    assert.equal(await json('JSON.TYPE', k, '.nope'), null);
    assert.deepEqual(await json('JSON.TYPE', k, '$.nope'), []);
    assert.equal(await json('JSON.TYPE', 'jc:missing'), null);
  });

  test('STRLEN and STRAPPEND', async () => {
    const k = await doc({ a: 'foo', n: { a: 'héllo' }, b: 1 });
    assert.deepEqual(await json('JSON.STRLEN', k, '$..a'), [3, 6]);
    assert.equal(await json('JSON.STRLEN', k, '.a'), 3);
    assert.deepEqual(await json('JSON.STRLEN', k, '$.b'), [null]);
    assert.equal(errorOf(await json('JSON.STRLEN', k, '.b')), 'WRONGTYPE wrong type of path value - expected string but found integer');
    assert.deepEqual(await json('JSON.STRAPPEND', k, '$..a', '"!"'), [4, 7]);
    assert.equal(await json('JSON.STRAPPEND', k, '.a', '"?"'), 5);
    assert.deepEqual(await json('JSON.STRAPPEND', k, '$.*', '"x"'), [6, null, null]);
    assert.equal(errorOf(await json('JSON.STRAPPEND', k, '.b', '"x"')), 'ERR Path does not exist or not a string');
    assert.match(errorOf(await json('JSON.STRAPPEND', k, '.a', 'x')), /^ERR expected value/);
    assert.deepEqual(await get(k, '$..a'), ['foo!?x', 'héllo!']);
    const k2 = await doc('abc');
    assert.equal(await json('JSON.STRAPPEND', k2, '"d"'), 4);
    assert.equal(await json('JSON.STRLEN', k2), 4);
    assert.equal(errorOf(await json('JSON.STRAPPEND', 'jc:missing', '$', '"x"')), "ERR could not perform this operation on a key that doesn't exist");
    assert.equal(await json('JSON.STRLEN', 'jc:missing'), null);
  });

  test('OBJKEYS and OBJLEN', async () => {
    const k = await doc({ a: { x: 1, y: 2 }, b: { z: {} }, c: 3 });
    assert.deepEqual(await json('JSON.OBJKEYS', k), ['a', 'b', 'c']);
    assert.deepEqual(await json('JSON.OBJKEYS', k, '$.*'), [['x', 'y'], ['z'], null]);
    assert.deepEqual(await json('JSON.OBJKEYS', k, '$.b.z'), [[]]);
    assert.equal(errorOf(await json('JSON.OBJKEYS', k, '.c')), 'ERR Path does not exist or not an object');
    assert.equal(await json('JSON.OBJKEYS', k, '.nope'), null);
    assert.equal(await json('JSON.OBJLEN', k), 3);
    assert.deepEqual(await json('JSON.OBJLEN', k, '$.*'), [2, 1, null]);
    assert.equal(errorOf(await json('JSON.OBJLEN', k, '.c')), 'WRONGTYPE wrong type of path value - expected object but found integer');
    assert.equal(await json('JSON.OBJLEN', 'jc:missing'), null);
  });

  test('RESP', async () => {
    const k = await doc({ s: 'x', i: 7, f: 64.99, t: true, n: null, a: [1, 'b'], o: { p: false } });
    assert.deepEqual(await json('JSON.RESP', k), [
      '{', 's', 'x', 'i', 7, 'f', '64.99', 't', 'true', 'n', null, 'a', ['[', 1, 'b'], 'o', ['{', 'p', 'false'],
    ]);
    assert.deepEqual(await json('JSON.RESP', k, '$.a'), [['[', 1, 'b']]);
    assert.equal(await json('JSON.RESP', k, '.i'), 7);
    assert.equal(errorOf(await json('JSON.RESP', k, '.nope')), "ERR Path '$.nope' does not exist");
    assert.equal(await json('JSON.RESP', 'jc:missing'), null);
  });
});

describe('numbers, booleans, CLEAR', () => {
  test('NUMINCRBY / NUMMULTBY keep integers integral, floats in serde form', async () => {
    const k = await doc({ a: 'b', b: [{ a: 2 }, { a: 5 }, { a: 'c' }], f: 1.5 });
    assert.equal(await json('JSON.NUMINCRBY', k, '$.a', '2'), '[null]');
    assert.equal(await json('JSON.NUMINCRBY', k, '$..a', '2'), '[null,4,7,null]');
    assert.equal(await json('JSON.NUMMULTBY', k, '$..a', '2'), '[null,8,14,null]');
    assert.equal(await json('JSON.NUMINCRBY', k, '$.f', '0.5'), '[2.0]');
    assert.equal(await json('JSON.NUMMULTBY', k, '.f', '1e20'), '2e20');
    assert.equal(await json('JSON.NUMINCRBY', k, '.b[0].a', '0.1'), '8.1');
    assert.equal(await json('JSON.NUMINCRBY', k, '.b[1].a', '-14'), '0');
    assert.equal(errorOf(await json('JSON.NUMINCRBY', k, '.a', '1')), 'ERR Path does not exist or does not contains a number');
    assert.match(errorOf(await json('JSON.NUMINCRBY', k, '.f', 'x')), /^ERR expected value/);
    assert.equal(errorOf(await json('JSON.NUMINCRBY', 'jc:missing', '$', '1')), "ERR could not perform this operation on a key that doesn't exist");
    assert.deepEqual(await get(k, '$.b[*].a'), [8.1, 0, 'c']);
  });

  test('integers beyond 2^53 stay exact, overflow of i64 falls back to float', async () => {
    const k = key();
    const text = '{"big":9007199254740993,"huge":123456789012345678901234567890,"max":9223372036854775806}';
    assert.equal(await json('JSON.SET', k, '$', text), 'OK');
    assert.equal(await json('JSON.GET', k), text);
    assert.equal(await json('JSON.NUMINCRBY', k, '$.big', '2'), '[9007199254740995]');
    assert.equal(await json('JSON.NUMMULTBY', k, '.big', '3'), '27021597764222985');
    assert.equal(await json('JSON.NUMINCRBY', k, '.max', '1'), '9223372036854775807');
    assert.equal(await json('JSON.NUMINCRBY', k, '.max', '1'), '9.223372036854776e18');
    assert.equal(await json('JSON.GET', k, '.huge'), '123456789012345678901234567890');
    assert.equal(await json('JSON.TYPE', k, '.huge'), 'integer');
  });

  test('float results print like serde_json/ryu (shortest round-trip digits)', async () => {
    // ryu form of a double, from JS's shortest digits: fixed for 1e-5 <= |x| < 1e16, else d.ddde[-]X
    const ryu = (x: number): string => {
      const [mant, exp] = x.toExponential().split('e');
      const e = Number(exp);
      const neg = mant.startsWith('-');
      const digits = mant.replace(/^-/, '').replace('.', '');
      let out: string;
      if (e >= -5 && e <= 15) {
        if (e >= 0) out = digits.length <= e + 1 ? `${digits.padEnd(e + 1, '0')}.0` : `${digits.slice(0, e + 1)}.${digits.slice(e + 1)}`;
        else out = `0.${'0'.repeat(-e - 1)}${digits}`;
      } else out = `${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}e${e}`;
      return (neg ? '-' : '') + out;
    };
    const k = await doc({ x: 0.5 });
    let seed = 99;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 150; i++) {
      const x = (rand() < 0.5 ? -1 : 1) * (rand() * 10) * 10 ** (Math.floor(rand() * 50) - 25);
      assert.equal(await json('JSON.SET', k, '$.x', String(x)), 'OK');
      assert.equal(await json('JSON.NUMMULTBY', k, '.x', '1.0'), ryu(x), String(x));
    }
    for (const [x, want] of [[1e16, '1e16'], [1e15, '1000000000000000.0'], [0.00001, '0.00001'], [0.000001, '1e-6'], [2, '2.0']] as const) {
      assert.equal(await json('JSON.SET', k, '$.x', String(x)), 'OK');
      assert.equal(await json('JSON.NUMMULTBY', k, '.x', '1.0'), want);
    }
  });

  test('integer NUMINCRBY / NUMMULTBY are exact across the 64-bit range (checked with BigInt)', async () => {
    const k = await doc({ x: 0 });
    let seed = 7;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const big = (digits: number): bigint => {
      let s = String(1 + Math.floor(rand() * 9));
      for (let i = 1; i < digits; i++) s += String(Math.floor(rand() * 10));
      return (rand() < 0.3 ? -1n : 1n) * BigInt(s);
    };
    const MAX = 9223372036854775807n;
    for (let i = 0; i < 120; i++) {
      const mult = i % 2 === 1;
      const a = big(1 + Math.floor(rand() * (mult ? 10 : 19)));
      const b = big(1 + Math.floor(rand() * (mult ? 10 : 19)));
      const exact = mult ? a * b : a + b;
      assert.equal(await json('JSON.SET', k, '$.x', String(a)), 'OK');
      const got = await json(mult ? 'JSON.NUMMULTBY' : 'JSON.NUMINCRBY', k, '.x', String(b));
      if (exact <= MAX && exact >= -MAX - 1n) assert.equal(got, String(exact), `${a} ${mult ? '*' : '+'} ${b}`);
      else assert.equal(Number(got), mult ? Number(a) * Number(b) : Number(a) + Number(b));
    }
  });

  test('TOGGLE', async () => {
    const k = await doc({ a: true, b: { a: false }, c: 1 });
    assert.deepEqual(await json('JSON.TOGGLE', k, '$..a'), [0, 1]);
    assert.deepEqual(await json('JSON.TOGGLE', k, '$.c'), [null]);
    assert.equal(await json('JSON.TOGGLE', k, '.a'), 'true');
    assert.equal(errorOf(await json('JSON.TOGGLE', k, '.c')), 'ERR Path does not exist or not a bool');
    assert.deepEqual(await get(k), { a: true, b: { a: true }, c: 1 });
  });

  test('CLEAR empties containers and zeroes numbers, counting only changed values', async () => {
    const k = await doc({ obj: { a: 1 }, arr: [1, 2], n: 5, f: 1.5, z: 0, s: 'str', b: true, e: [] });
    assert.equal(await json('JSON.CLEAR', k, '$.*'), 4);
    assert.deepEqual(await get(k), { obj: {}, arr: [], n: 0, f: 0, z: 0, s: 'str', b: true, e: [] });
    const k2 = await doc({ a: { b: [1] } });
    assert.equal(await json('JSON.CLEAR', k2), 1);
    assert.deepEqual(await get(k2), {});
    assert.equal(errorOf(await json('JSON.CLEAR', 'jc:missing')), "ERR could not perform this operation on a key that doesn't exist");
  });
});

/**
 * JSON.* library: the Lua pitfalls (empty array vs object, key order, number text, unicode,
 * nesting depth), the storage format seen by plain Redis commands, WRONGTYPE, read-only access
 * (FCALL_RO / ACL), MULTI/EXEC, concurrency, and the JSON.X -> FCALL translation.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KvError } from '../../src/kv/errors.js';
import { JSON_LIBRARY, JSON_READ_COMMANDS, translateJsonCommand } from '../../src/kv/json/index.js';
import { RespClient, RespError, errorOf, runJson, startRedis, type Reply, type TestRedis } from './json-helpers.js';

let r: TestRedis;
let n = 0;
const key = (): string => `js:${++n}`;
const json = (...a: Array<string | number>): Promise<Reply> => r.json(...a);
const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

before(async () => {
  r = await startRedis();
});
after(async () => {
  await r.close();
});

describe('document fidelity', () => {
  test('empty arrays and objects, key order and number text survive a round trip', async () => {
    const k = key();
    const text = '{"z":[],"a":{},"m":[{},[]],"n":{"e":[]},"x":1.50,"y":1E5,"w":-0,"v":0.1,"u":[1e-7]}';
    assert.equal(await json('JSON.SET', k, '$', text), 'OK');
    assert.equal(await json('JSON.GET', k), text);
    assert.deepEqual(await json('JSON.TYPE', k, '$.*'), ['array', 'object', 'array', 'object', 'number', 'number', 'integer', 'number', 'array']);
    assert.equal(await json('JSON.SET', k, '$.b', 'true'), 'OK');
    assert.equal(await json('JSON.DEL', k, '$.z'), 1);
    assert.equal(await json('JSON.SET', k, '$.z', 'null'), 'OK');
    assert.deepEqual(await json('JSON.OBJKEYS', k), ['a', 'm', 'n', 'x', 'y', 'w', 'v', 'u', 'b', 'z']);
  });

  test('whitespace in input is dropped, the stored text is compact', async () => {
    const k = key();
    assert.equal(await json('JSON.SET', k, '$', ' {\n\t"a" : [ 1 , 2 ] ,"b":{ } }\r\n'), 'OK');
    assert.equal(await json('JSON.GET', k), '{"a":[1,2],"b":{}}');
  });

  test('unicode and escapes: \\u escapes become UTF-8, control characters stay escaped', async () => {
    const k = key();
    const input = '{"e":"\\u00e9t\\u00E9","raw":"été","emoji":"\\ud83d\\ude00","c":"\\u0001\\b\\f\\n\\r\\t","q":"\\"\\\\\\/","k\\u00e9y":1}';
    assert.equal(await json('JSON.SET', k, '$', input), 'OK');
    const out = (await json('JSON.GET', k)) as string;
    assert.equal(out, '{"e":"été","raw":"été","emoji":"😀","c":"\\u0001\\b\\f\\n\\r\\t","q":"\\"\\\\/","kéy":1}');
    assert.deepEqual(JSON.parse(out), JSON.parse(input));
    assert.deepEqual(await json('JSON.STRLEN', k, '$.e'), [5]); // bytes, as RedisJSON
    assert.equal(await json('JSON.GET', k, '$["kéy"]'), '[1]');
    assert.match(errorOf(await json('JSON.SET', k, '$', '"\\ud83d"')), /^ERR lone leading surrogate/);
    assert.match(errorOf(await json('JSON.SET', k, '$', '"a\tb"')), /^ERR control character/);
  });

  test('nesting: input limited to 128 levels, deeper documents built by paths still work', async () => {
    const k = key();
    const nest = (d: number): string => '['.repeat(d) + ']'.repeat(d);
    assert.equal(await json('JSON.SET', k, '$', nest(128)), 'OK');
    assert.equal(errorOf(await json('JSON.SET', k, '$', nest(129))), 'ERR recursion limit exceeded');
    assert.equal(await json('JSON.SET', k, '$', `{"a":${nest(120)}}`), 'OK');
    const deep = '.a' + '[0]'.repeat(119); // the innermost (empty) array
    assert.equal(await json('JSON.ARRAPPEND', k, deep, nest(100)), 1); // now 221 levels deep
    assert.equal(await json('JSON.GET', k), `{"a":${'['.repeat(120)}${nest(100)}${']'.repeat(120)}}`);
    assert.equal(await json('JSON.ARRLEN', k, deep), 1);
  });
});

describe('storage format and other key types', () => {
  test('a document is a hash with one marker field; plain commands see that', async () => {
    const k = key();
    assert.equal(await json('JSON.SET', k, '$', '{"a":1}'), 'OK');
    assert.equal(await r.client.call('TYPE', k), 'hash');
    assert.deepEqual(await r.client.call('HGETALL', k), ['\0svcjson:1', '{"a":1}']);
    assert.equal(errorOf(await r.client.call('GET', k)), WRONGTYPE);
    assert.equal(await r.client.call('EXPIRE', k, 1000), 1);
    assert.equal(await json('JSON.SET', k, '$.b', '2'), 'OK');
    assert.ok(((await r.client.call('TTL', k)) as number) > 900, 'TTL kept by JSON writes');
    assert.equal(await r.client.call('SET', k, 'plain'), 'OK');
    assert.equal(errorOf(await json('JSON.GET', k)), WRONGTYPE);
  });

  test('a failing write changes nothing (no partial update, parsed-document cache flushed)', async () => {
    const k = key();
    await json('JSON.SET', k, '$', '{"b":[1,2,3],"a":[1]}');
    assert.equal(await json('JSON.GET', k, '$.a'), '[[1]]'); // cached now
    assert.equal(errorOf(await json('JSON.ARRINSERT', k, '$.*', '3', '"x"')), 'ERR index out of bounds');
    assert.equal(await json('JSON.GET', k), '{"b":[1,2,3],"a":[1]}');
    assert.equal(errorOf(await json('JSON.MSET', k, '$.b[0]', '0', k, '$.c', '{')), 'ERR EOF while parsing an object at line 1 column 2');
    assert.equal(await json('JSON.GET', k), '{"b":[1,2,3],"a":[1]}');
  });

  test('the stored text is the truth: a document rewritten by HSET is read back as written', async () => {
    const k = key();
    await json('JSON.SET', k, '$', '{"a":1}');
    assert.equal(await json('JSON.GET', k, '.a'), '1');
    await r.client.call('HSET', k, '\0svcjson:1', '{"a":2}');
    assert.equal(await json('JSON.GET', k, '.a'), '2');
    await r.client.call('HSET', k, '\0svcjson:1', 'not json');
    assert.match(errorOf(await json('JSON.GET', k)), /^ERR expected value/);
  });

  test('JSON.* on strings, lists and ordinary hashes gives WRONGTYPE', async () => {
    await r.client.call('SET', 'js:str', '{"a":1}');
    await r.client.call('RPUSH', 'js:list', 'x');
    await r.client.call('HSET', 'js:hash', 'f', 'v');
    for (const k of ['js:str', 'js:list', 'js:hash']) {
      for (const cmd of [['JSON.GET', k], ['JSON.SET', k, '$', '1'], ['JSON.DEL', k], ['JSON.TYPE', k], ['JSON.NUMINCRBY', k, '$', '1'],
        ['JSON.ARRAPPEND', k, '$', '1'], ['JSON.MERGE', k, '$', '{}'], ['JSON.MSET', k, '$', '1']]) {
        assert.equal(errorOf(await json(...cmd)), WRONGTYPE, cmd.join(' '));
      }
    }
    assert.equal(await r.client.call('GET', 'js:str'), '{"a":1}');
  });
});

describe('read-only access, transactions, concurrency', () => {
  test('reads are FCALL_RO (no-writes functions); writes are refused there and for a read-only ACL user', async () => {
    const k = key();
    await json('JSON.SET', k, '$', '{"a":[1]}');
    for (const name of JSON_READ_COMMANDS) {
      const args = [name, k, '$', ...(name === 'JSON.ARRINDEX' ? ['1'] : [])].map((a) => Buffer.from(a));
      const fcall = translateJsonCommand(args);
      assert.equal(fcall?.[0].toString(), 'FCALL_RO', name);
      assert.ok(!((await r.client.call(...fcall)) instanceof RespError), name);
    }
    assert.match(errorOf(await r.client.call('FCALL_RO', 'svcjson_set', 1, k, '$', '1')), /write flag/);
    // the functions' own HGET/EXISTS run with the caller's ACL: a read-only user has +@read
    await r.client.call('ACL', 'SETUSER', 'jsro', 'on', '>pw', '~*', '-@all', '+@read', '+fcall_ro', '+auth');
    const ro = await RespClient.connect(r.socket);
    try {
      assert.equal(await ro.call('AUTH', 'jsro', 'pw'), 'OK');
      assert.equal(await runJson(ro, 'JSON.GET', k, '$.a'), '[[1]]');
      assert.deepEqual(await runJson(ro, 'JSON.ARRLEN', k, '$.a'), [1]);
      assert.match(errorOf(await runJson(ro, 'JSON.ARRAPPEND', k, '$.a', '2')), /^NOPERM/);
      assert.match(errorOf(await ro.call('FCALL_RO', 'svcjson_arrappend', 1, k, '$.a', '2')), /write flag|NOPERM/);
    } finally {
      ro.close();
    }
    assert.equal(await json('JSON.GET', k), '{"a":[1]}');
  });

  test('JSON commands inside MULTI/EXEC', async () => {
    const k = key();
    const c = r.client;
    assert.equal(await c.call('MULTI'), 'OK');
    const queued = [
      runJson(c, 'JSON.SET', k, '$', '{"n":1,"l":[]}'),
      runJson(c, 'JSON.NUMINCRBY', k, '$.n', '41'),
      runJson(c, 'JSON.ARRAPPEND', k, '$.l', '"x"'),
      runJson(c, 'JSON.SET', k, '$.nope.x', '1'),
      runJson(c, 'JSON.GET', k),
    ];
    assert.deepEqual(await Promise.all(queued), ['QUEUED', 'QUEUED', 'QUEUED', 'QUEUED', 'QUEUED']);
    const res = (await c.call('EXEC')) as Reply[];
    assert.deepEqual(res, ['OK', '[42]', [1], null, '{"n":42,"l":["x"]}']);
  });

  test('50 concurrent clients incrementing the same number get the exact total', async () => {
    const k = key();
    await json('JSON.SET', k, '$', '{"count":0,"f":0}');
    const clients = await Promise.all(Array.from({ length: 50 }, () => RespClient.connect(r.socket)));
    try {
      await Promise.all(clients.map(async (c) => {
        for (let i = 0; i < 20; i++) {
          const reply = await runJson(c, 'JSON.NUMINCRBY', k, '$.count', '3');
          assert.ok(typeof reply === 'string' && /^\[\d+\]$/.test(reply), String(reply));
        }
      }));
    } finally {
      for (const c of clients) c.close();
    }
    assert.equal(await json('JSON.GET', k, '.count'), '3000');
  });

  test('under maxmemory pressure, growing writes are refused, deletes still work (as RedisJSON)', async () => {
    const k = key();
    await json('JSON.SET', k, '$', '{"a":[1,2],"b":1}');
    assert.equal(await r.client.call('CONFIG', 'SET', 'maxmemory', '1'), 'OK');
    try {
      assert.match(errorOf(await json('JSON.SET', k, '$.c', '1')), /^OOM/);
      assert.match(errorOf(await json('JSON.ARRAPPEND', k, '$.a', '3')), /^OOM/);
      assert.equal(await json('JSON.GET', k, '$.b'), '[1]');
      assert.equal(await json('JSON.DEL', k, '$.b'), 1);
      assert.equal(await json('JSON.ARRPOP', k, '.a'), '2');
    } finally {
      await r.client.call('CONFIG', 'SET', 'maxmemory', '0');
    }
    assert.equal(await json('JSON.GET', k), '{"a":[1]}');
  });

  test('the library reloads with FUNCTION LOAD REPLACE (as after a backend restart)', async () => {
    assert.equal(await r.client.call('FUNCTION', 'LOAD', 'REPLACE', JSON_LIBRARY), 'svcjson');
    assert.ok(JSON_LIBRARY.startsWith('#!lua name=svcjson\n'));
    assert.equal(await json('JSON.SET', key(), '$', '1'), 'OK');
  });
});

describe('translateJsonCommand', () => {
  const t = (...a: string[]): string[] | undefined => translateJsonCommand(a.map((x) => Buffer.from(x)))?.map(String);

  test('layouts: one key, MGET keys + path, MSET triplets; any case', () => {
    assert.deepEqual(t('json.set', 'k', '$', '1', 'NX'), ['FCALL', 'svcjson_set', '1', 'k', '$', '1', 'NX']);
    assert.deepEqual(t('JSON.Get', 'k'), ['FCALL_RO', 'svcjson_get', '1', 'k']);
    assert.deepEqual(t('JSON.MGET', 'a', 'b', 'c', '$.x'), ['FCALL_RO', 'svcjson_mget', '3', 'a', 'b', 'c', '$.x']);
    assert.deepEqual(t('JSON.MSET', 'a', '$', '1', 'b', '$.x', '2'), ['FCALL', 'svcjson_mset', '2', 'a', 'b', '$', '1', '$.x', '2']);
    assert.deepEqual(t('JSON.FORGET', 'k', '$.a'), ['FCALL', 'svcjson_forget', '1', 'k', '$.a']);
  });

  test('non-JSON and unknown JSON commands are left alone', () => {
    assert.equal(t('GET', 'k'), undefined);
    assert.equal(t('JSON.DEBUG', 'MEMORY', 'k'), undefined);
    assert.equal(translateJsonCommand([]), undefined);
  });

  test('wrong arity throws the catalogue error wrongArity with the Redis text', () => {
    const cases: string[][] = [['JSON.GET'], ['JSON.SET', 'k', '$'], ['JSON.MSET', 'a', '$', '1', 'b'], ['JSON.MGET', 'k'],
      ['JSON.NUMINCRBY', 'k', '$'], ['JSON.TOGGLE', 'k'], ['JSON.ARRTRIM', 'k', '$', '0'], ['JSON.CLEAR', 'k', '$', 'x'],
      ['JSON.ARRAPPEND', 'k', '$'], ['JSON.ARRINSERT', 'k', '$', '0']];
    for (const c of cases) {
      assert.throws(() => t(...c), (e: unknown) => e instanceof KvError && e.code === 'wrongArity' &&
        e.message === `ERR wrong number of arguments for '${c[0].toLowerCase()}' command`, c.join(' '));
    }
  });

  test('read set', () => {
    assert.deepEqual([...JSON_READ_COMMANDS].sort(), ['JSON.ARRINDEX', 'JSON.ARRLEN', 'JSON.GET', 'JSON.MGET', 'JSON.OBJKEYS', 'JSON.OBJLEN', 'JSON.RESP', 'JSON.STRLEN', 'JSON.TYPE']);
  });
});


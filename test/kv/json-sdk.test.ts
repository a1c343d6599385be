/**
 * JSON.* end to end: `@upstash/redis` (`redis.json.*`) against svc's kv area (Redis 7 without a
 * JSON module, so the svcjson function library), in single, pipeline and multi-exec form, the
 * read-only token, and 50 concurrent clients incrementing one number.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { closeTopology, topologyEnv } from './topology-helpers.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
let redis: Redis;
let readonly: Redis;
let n = 0;
/** A fresh key; keys built from one (`${k}:n`) share its Redis Cluster slot (`{hash tag}`). */
const key = (): string => `sdkjson:{${++n}}`;

before(async () => {
  // SVC_TEST_KV_TOPOLOGY=cluster|sentinel: the same suite on a Redis Cluster / Sentinel setup
  svc = await startTestSvc(['kv'], { env: await topologyEnv() });
  const url = svc.urls.kv!;
  redis = new Redis({ url, token: svc.ctx.credentials.get('kv.token'), enableTelemetry: false });
  readonly = new Redis({ url, token: svc.ctx.credentials.get('kv.readonlyToken'), enableTelemetry: false });
});
after(async () => {
  await svc?.close();
  await closeTopology();
});

describe('redis.json.* (single commands)', () => {
  test('set / get with legacy and JSONPath paths, options', async () => {
    const k = key();
    assert.equal(await redis.json.set(k, '$', { a: 2, b: 3, nested: { a: 4, b: null }, e: [], o: {} }), 'OK');
    assert.deepEqual(await redis.json.get(k, '$..b'), [3, null]);
    assert.deepEqual(await redis.json.get(k, '$..a', '$..b'), { '$..a': [2, 4], '$..b': [3, null] });
    assert.deepEqual(await redis.json.get(k, '.nested'), { a: 4, b: null });
    assert.deepEqual(await redis.json.get(k), { a: 2, b: 3, nested: { a: 4, b: null }, e: [], o: {} });
    assert.deepEqual(await redis.json.get(k, { indent: '  ', newline: '\n', space: ' ' }, '$.e'), [[]]);
    assert.equal(await redis.json.set(k, '$.a', 9, { nx: true }), null);
    assert.equal(await redis.json.set(k, '$.z', '"str"', { nx: true }), 'OK'); // strings go as JSON text
    await assert.rejects(redis.json.set(k, '$.w', 'str'), /ERR expected value at line 1 column 1/);
    assert.equal(await redis.json.set(k, '$.y', 1, { xx: true }), null);
    assert.equal(await redis.json.get('sdkjson:missing'), null);
    await assert.rejects(redis.json.set(key(), '$.a', 1), /new objects must be created at the root/);
  });

  test('mset / mget / merge / del / forget / type', async () => {
    const base = key();
    const [k1, k2] = [`${base}:1`, `${base}:2`]; // one slot: JSON.MSET / JSON.MGET on a Redis Cluster
    // redis.json.mset's typing says one array, but its (...args) wrapper hands that array to
    // JsonMSetCommand as one element: the triplets must be passed as separate arguments.
    const mset = redis.json.mset as unknown as (...t: Array<{ key: string; path: string; value: unknown }>) => Promise<unknown>;
    assert.equal(await mset({ key: k1, path: '$', value: { a: 1, nested: { a: 3 } } },
      { key: k2, path: '$', value: { a: 4, nested: { a: 6 } } }), 'OK');
    assert.deepEqual(await redis.json.mget([k1, k2], '$..a'), [[1, 3], [4, 6]]);
    assert.equal(await redis.json.merge(k1, '$', { b: { c: 1 }, a: null }), 'OK');
    assert.deepEqual(await redis.json.get(k1), { nested: { a: 3 }, b: { c: 1 } });
    assert.deepEqual(await redis.json.type(k1, '$.*'), ['object', 'object']);
    assert.equal(await redis.json.type(k1), 'object');
    assert.equal(await redis.json.del(k1, '$..a'), 1);
    assert.equal(await redis.json.forget(k2, '$.nested'), 1);
    assert.equal(await redis.json.del(k2), 1);
    assert.equal(await redis.exists(k2), 0);
  });

  test('strings, numbers, booleans, clear', async () => {
    const k = key();
    await redis.json.set(k, '$', { s: 'ab', n: 1, f: 1.5, t: true, big: 1, arr: [1, 2] });
    assert.deepEqual(await redis.json.strlen(k, '$.s'), [2]);
    assert.deepEqual(await redis.json.strappend(k, '$.s', '"cd"'), [4]);
    assert.deepEqual(await redis.json.numincrby(k, '$.n', 2), [3]);
    assert.deepEqual(await redis.json.nummultby(k, '$.f', 2), [3]);
    assert.deepEqual(await redis.json.numincrby(k, '$.*', 1), [null, 4, 4, null, 2, null]);
    assert.deepEqual(await redis.json.toggle(k, '$.t'), [0]);
    assert.equal(await redis.json.clear(k, '$.arr'), 1);
    assert.deepEqual(await redis.json.get(k), { s: 'abcd', n: 4, f: 4, t: false, big: 2, arr: [] });
  });

  test('arrays and objects', async () => {
    const k = key();
    await redis.json.set(k, '$', { max_level: [80, 90, 100, 120], o: { x: 1, y: 2 } });
    assert.deepEqual(await redis.json.arrappend(k, '$.max_level', 130), [5]);
    assert.deepEqual(await redis.json.arrindex(k, '$.max_level', 100), [2]);
    assert.deepEqual(await redis.json.arrinsert(k, '$.max_level', 1, 85), [6]);
    assert.deepEqual(await redis.json.arrlen(k, '$.max_level'), [6]);
    assert.deepEqual(await redis.json.arrpop(k, '$.max_level', 0), [80]);
    assert.deepEqual(await redis.json.arrtrim(k, '$.max_level', 1, 2), [2]);
    assert.deepEqual(await redis.json.get(k, '$.max_level'), [[90, 100]]);
    assert.deepEqual(await redis.json.objkeys(k, '$.o'), [['x', 'y']]);
    assert.deepEqual(await redis.json.objlen(k, '$.o'), [2]);
    assert.equal((await redis.json.resp(k)).length, 5);
  });

  test('a plain string key gives WRONGTYPE; GET of a document gives WRONGTYPE', async () => {
    const [k1, k2] = [key(), key()];
    await redis.set(k1, 'plain');
    await assert.rejects(redis.json.get(k1), /WRONGTYPE/);
    await redis.json.set(k2, '$', { a: 1 });
    await assert.rejects(redis.get(k2), /WRONGTYPE/);
  });
});

describe('pipeline and multi-exec', () => {
  test('pipeline mixes JSON with other commands and keeps per-command errors', async () => {
    const k = key();
    const p = redis.pipeline();
    p.json.set(k, '$', { n: 1, l: [] });
    p.json.numincrby(k, '$.n', 41);
    p.set(`${k}:plain`, 'x');
    p.json.arrappend(k, '$.l', 'null');
    p.json.get(k, '$.nope');
    p.json.get(k);
    assert.deepEqual(await p.exec(), ['OK', [42], 'OK', [1], [], { n: 42, l: [null] }]);
    const bad = redis.pipeline();
    bad.json.get(k, '$.n');
    bad.json.get(`${k}:plain`);
    const res = await bad.exec({ keepErrors: true });
    assert.deepEqual(res[0], { result: [42], error: undefined });
    assert.match(String(res[1].error), /WRONGTYPE/);
  });

  test('multi-exec runs JSON atomically with other commands', async () => {
    const k = key();
    const m = redis.multi();
    m.json.set(k, '$', { count: 0, tags: ['a'] });
    m.json.numincrby(k, '$.count', 5);
    m.json.arrinsert(k, '$.tags', 0, '"z"');
    m.incr(`${k}:n`);
    m.json.mget([k], '$.tags');
    assert.deepEqual(await m.exec(), ['OK', [5], [2], 1, [[['z', 'a']]]]);
  });
});

describe('read-only token', () => {
  test('allows JSON reads, refuses JSON writes', async () => {
    const k = key();
    await redis.json.set(k, '$', { a: [1, 2], s: 'x' });
    assert.deepEqual(await readonly.json.get(k, '$.a'), [[1, 2]]);
    assert.deepEqual(await readonly.json.arrlen(k, '$.a'), [2]);
    assert.deepEqual(await readonly.json.mget([k], '$.s'), [['x']]);
    assert.equal(await readonly.json.type(k, '.a'), 'array');
    await assert.rejects(readonly.json.set(k, '$.a', 1), /NOPERM|read-?only|permission/i);
    await assert.rejects(readonly.json.arrappend(k, '$.a', 3), /NOPERM|read-?only|permission/i);
    await assert.rejects(readonly.json.del(k), /NOPERM|read-?only|permission/i);
    const p = readonly.pipeline();
    p.json.get(k, '$.s');
    p.json.numincrby(k, '$.a[0]', 1);
    const res = await p.exec({ keepErrors: true });
    assert.deepEqual(res[0].result, ['x']);
    assert.match(String(res[1].error), /NOPERM|read-?only|permission/i);
    assert.deepEqual(await redis.json.get(k), { a: [1, 2], s: 'x' });
  });
});

describe('concurrency', () => {
  test('50 clients x 10 NUMINCRBY on one number give the exact total', async () => {
    const k = key();
    await redis.json.set(k, '$', { count: 0 });
    const clients = Array.from({ length: 50 }, () =>
      new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token'), enableTelemetry: false, enableAutoPipelining: false }));
    await Promise.all(clients.map(async (c) => {
      for (let i = 0; i < 10; i++) await c.json.numincrby(k, '$.count', 1);
    }));
    assert.deepEqual(await redis.json.get(k, '$.count'), [500]);
  });
});

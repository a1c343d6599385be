/**
 * The request shapes of the official Python SDK (upstash-redis), sent as raw HTTP because no Python
 * SDK runs here. Its `sync_execute`/`async_execute` (`upstash_redis/http.py`) POST the command as a
 * JSON array to the base URL (pipelines and transactions to `/pipeline` and `/multi-exec`),
 * keeping `str`, `int` and `float` elements as they are and `json.dumps`-ing any other one: so a
 * Python int goes as a JSON number with all its digits (`9007199254740993`, a 64-bit id), a float
 * as Python's `repr` (`1e-07`, `1.5`), a bool as `true`/`false`, and `Upstash-Encoding: base64`
 * when the client decodes base64 results. svc must give Redis each number as written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startKv, type KvUnderTest } from './helpers.js';

describe('upstash-redis (Python) request shapes (raw HTTP)', () => {
  let kv: KvUnderTest;
  before(async () => {
    kv = await startKv();
  });
  after(async () => {
    await kv?.close();
  });
  /** POSTs `text` (JSON as Python's `json.dumps` writes it) as the body. */
  const send = (path: string, text: string, headers: Record<string, string> = {}) =>
    call(kv.base, path, { method: 'POST', token: kv.token, body: text, headers: { 'content-type': 'application/json', ...headers } });

  test('redis.set(k, 2**53 + 1) and redis.incrby(k, big): integers beyond 2^53 reach Redis with every digit', async () => {
    assert.deepEqual((await send('/', '["SET", "py:id", 9007199254740993]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["GET", "py:id"]')).json, { result: '9007199254740993' });
    // a snowflake id and an int beyond 64 bits (Redis keeps it as a string)
    assert.deepEqual((await send('/', '["SET", "py:snow", 1795821964144123456]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["GET", "py:snow"]')).json, { result: '1795821964144123456' });
    assert.deepEqual((await send('/', '["SET", "py:huge", 123456789012345678901234567890]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["GET", "py:huge"]')).json, { result: '123456789012345678901234567890' });
    assert.equal((await send('/', '["INCRBY", "py:ctr", 9007199254740993]')).text, '{"result":9007199254740993}');
    assert.equal((await send('/', '["INCRBY", "py:ctr", -9007199254740995]')).text, '{"result":-2}');
  });

  test('floats as Python writes them; bools; numbers among strings keep their places', async () => {
    assert.deepEqual((await send('/', '["SET", "py:f", 1e-07]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["GET", "py:f"]')).json, { result: '1e-07' });
    assert.deepEqual((await send('/', '["SET", "py:neg0", -0.0]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["GET", "py:neg0"]')).json, { result: '-0.0' });
    assert.deepEqual((await send('/', '["SET", "py:t", true]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["GET", "py:t"]')).json, { result: 'true' });
    // redis.zadd("py:z", {"a": 1.5, "b": 2}) -> ZADD key score member ...; a string holding digits is not a number
    assert.deepEqual((await send('/', '["ZADD", "py:z", 1.5, "a", 2, "b", 18014398509481985, "c\\"1.5"]')).json, { result: 3 });
    assert.deepEqual((await send('/', '["ZRANGE", "py:z", 0, -1, "WITHSCORES"]')).json, { result: ['a', '1.5', 'b', '2', 'c"1.5', '18014398509481984'] });
    // redis.set("py:ex", "v", ex=10)
    assert.deepEqual((await send('/', '["SET", "py:ex", "v", "EX", 10]')).json, { result: 'OK' });
    assert.equal((await send('/', '["TTL", "py:ex"]')).json.result > 0, true);
    // a bad element after a big number is still named
    const bad = await send('/', '["SET", 9007199254740993, null]');
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /argument 2 must be a string, number or boolean, got null/);
  });

  test('pipeline and transaction (redis.pipeline() / redis.multi()): numbers as written in every command', async () => {
    const p = await send('/pipeline', '[["SET", "py:p", 9007199254740993], ["INCRBYFLOAT", "py:pf", 1e-07], ["GET", "py:p"], ["SET", "py:p2", 5]]');
    assert.deepEqual(p.json, [{ result: 'OK' }, { result: '0.0000001' }, { result: '9007199254740993' }, { result: 'OK' }]);
    const m = await send('/multi-exec', '[["SET", "py:m", 18446744073709551615], ["GET", "py:m"]]');
    assert.deepEqual(m.json, [{ result: 'OK' }, { result: '18446744073709551615' }]);
  });

  test('Upstash-Encoding: base64 (the Python client decodes every string but OK); json.dumps-ed JSON values', async () => {
    await send('/', '["SET", "py:b", 9007199254740993]');
    const r = await send('/', '["GET", "py:b"]', { 'Upstash-Encoding': 'base64' });
    assert.equal(Buffer.from(r.json.result as string, 'base64').toString(), '9007199254740993');
    // redis.json.set("py:j", "$", {"id": 9007199254740993}) sends the value json.dumps-ed: a string
    assert.deepEqual((await send('/', '["JSON.SET", "py:j", "$", "{\\"id\\": 9007199254740993}"]')).json, { result: 'OK' });
    assert.deepEqual((await send('/', '["JSON.GET", "py:j", "$.id"]')).json, { result: '[9007199254740993]' });
  });
});

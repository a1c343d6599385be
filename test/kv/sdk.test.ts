/**
 * End-to-end with the official `@upstash/redis` SDK in its DEFAULT configuration (auto-pipelining,
 * base64 response encoding, read-your-writes) against svc's kv area and a real supervised
 * redis-server: one test per command group of the spec's table. With `SVC_TEST_KV_TOPOLOGY=cluster`
 * (or `sentinel`) the same suite runs on a Redis Cluster (Sentinel setup) the test starts; the
 * keys of each multi-key command share a `{hash tag}`, as Redis Cluster requires.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { closeTopology, topologyEnv } from './topology-helpers.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
let redis: Redis;

before(async () => {
  // SVC_TEST_KV_TOPOLOGY=cluster|sentinel: the same suite on a Redis Cluster / Sentinel setup
  svc = await startTestSvc(['kv'], { env: await topologyEnv() });
  redis = new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token'), enableTelemetry: false });
});
after(async () => {
  await svc?.close();
  await closeTopology();
});

describe('@upstash/redis default config', () => {
  test('strings', async () => {
    assert.equal(await redis.set('s:a', 'hello'), 'OK');
    assert.equal(await redis.get('s:a'), 'hello');
    assert.equal(await redis.set('s:ok', 'OK'), 'OK');
    assert.equal(await redis.get('s:ok'), 'OK'); // stored "OK" round-trips in base64 mode
    assert.equal(await redis.set('s:8', '8'), 'OK');
    assert.equal(await redis.get('s:8'), 8);
    await redis.set('s:obj', { a: 1, b: 'x' });
    assert.deepEqual(await redis.get('s:obj'), { a: 1, b: 'x' });
    assert.equal(await redis.incr('s:n'), 1);
    assert.equal(await redis.incrby('s:n', 10), 11);
    assert.equal(await redis.incrbyfloat('s:n', 0.5), 11.5);
    assert.equal(await redis.decr('s:d'), -1);
    assert.equal(await redis.append('s:a', ' world'), 11);
    assert.equal(await redis.strlen('s:a'), 11);
    assert.equal(await redis.getrange('s:a', 0, 4), 'hello');
    assert.deepEqual(await redis.mget('s:a', 's:missing'), ['hello world', null]);
    assert.equal(await redis.mset({ 's:m1': 'v1', 's:m2': 'v2' }), 'OK');
    assert.equal(await redis.setnx('s:m1', 'x'), 0);
    assert.equal(await redis.getdel('s:m2'), 'v2');
    assert.equal(await redis.set('s:ex', 'v', { ex: 100 }), 'OK');
    const ttl = await redis.ttl('s:ex');
    assert.ok(ttl > 90 && ttl <= 100);
    assert.equal(await redis.set('s:unicode', 'héllo 🌍'), 'OK');
    assert.equal(await redis.get('s:unicode'), 'héllo 🌍');
  });

  test('concurrent mixed commands are auto-pipelined and read-your-writes', async () => {
    const before = redis.readYourWritesSyncToken;
    const [a, b, c] = await Promise.all([redis.set('ap:1', 'x'), redis.incr('ap:c'), redis.get('ap:missing')]);
    assert.deepEqual([a, b, c], ['OK', 1, null]);
    assert.notEqual(redis.readYourWritesSyncToken, before);
    assert.ok(redis.readYourWritesSyncToken);
    const values = await Promise.all(Array.from({ length: 50 }, (_, i) => redis.set(`ap:k${i}`, i)));
    assert.equal(values.length, 50);
    assert.equal(await redis.get('ap:k49'), 49);
  });

  test('bitmaps', async () => {
    assert.equal(await redis.setbit('{b}:1', 7, 1), 0);
    assert.equal(await redis.getbit('{b}:1', 7), 1);
    assert.equal(await redis.bitcount('{b}:1', 0, -1), 1);
    assert.equal(await redis.bitpos('{b}:1', 1), 7);
    await redis.setbit('{b}:2', 0, 1);
    assert.equal(await redis.bitop('or', '{b}:3', '{b}:1', '{b}:2'), 1);
    assert.equal(await redis.bitcount('{b}:3', 0, -1), 2);
  });

  test('hashes', async () => {
    assert.equal(await redis.hset('h:1', { f1: 'v1', f2: 2 }), 2);
    assert.equal(await redis.hget('h:1', 'f1'), 'v1');
    assert.deepEqual(await redis.hgetall('h:1'), { f1: 'v1', f2: 2 });
    assert.deepEqual(await redis.hmget('h:1', 'f1', 'nope'), { f1: 'v1', nope: null });
    assert.equal(await redis.hincrby('h:1', 'f2', 3), 5);
    assert.equal(await redis.hexists('h:1', 'f1'), 1);
    assert.deepEqual((await redis.hkeys('h:1')).sort(), ['f1', 'f2']);
    assert.equal(await redis.hlen('h:1'), 2);
    assert.equal(await redis.hdel('h:1', 'f1'), 1);
    const [cursor, fields] = await redis.hscan('h:1', 0);
    assert.equal(String(cursor), '0');
    assert.deepEqual(fields, ['f2', 5]);
  });

  test('lists', async () => {
    assert.equal(await redis.rpush('{l}:1', 'a', 'b', 'c'), 3);
    assert.equal(await redis.lpush('{l}:1', 'z'), 4);
    assert.deepEqual(await redis.lrange('{l}:1', 0, -1), ['z', 'a', 'b', 'c']);
    assert.equal(await redis.lpop('{l}:1'), 'z');
    assert.equal(await redis.rpop('{l}:1'), 'c');
    assert.equal(await redis.llen('{l}:1'), 2);
    assert.equal(await redis.lindex('{l}:1', 1), 'b');
    assert.equal(await redis.lmove('{l}:1', '{l}:2', 'left', 'right'), 'a');
    assert.equal(await redis.lpos('{l}:1', 'b'), 0);
    assert.equal(await redis.ltrim('{l}:1', 0, 0), 'OK');
    await assert.rejects(redis.exec(['BLPOP', '{l}:1', '1']), /blocking commands are not available/);
  });

  test('sets', async () => {
    assert.equal(await redis.sadd('{st}:1', 'a', 'b', 'c'), 3);
    assert.equal(await redis.sadd('{st}:2', 'b', 'c', 'd'), 3);
    assert.deepEqual((await redis.sinter('{st}:1', '{st}:2')).sort(), ['b', 'c']);
    assert.deepEqual((await redis.sunion('{st}:1', '{st}:2')).sort(), ['a', 'b', 'c', 'd']);
    assert.deepEqual(await redis.sdiff('{st}:1', '{st}:2'), ['a']);
    assert.equal(await redis.sismember('{st}:1', 'a'), 1);
    assert.equal(await redis.scard('{st}:1'), 3);
    assert.deepEqual((await redis.smembers('{st}:2')).sort(), ['b', 'c', 'd']);
    assert.equal(await redis.srem('{st}:1', 'a'), 1);
    assert.deepEqual(await redis.smismember('{st}:1', ['a', 'b']), [0, 1]);
  });

  test('sorted sets', async () => {
    assert.equal(await redis.zadd('z:1', { score: 1, member: 'one' }, { score: 2, member: 'two' }, { score: 3, member: 'three' }), 3);
    assert.deepEqual(await redis.zrange('z:1', 0, -1), ['one', 'two', 'three']);
    assert.deepEqual(await redis.zrange('z:1', 0, 0, { withScores: true }), ['one', 1]);
    assert.equal(await redis.zscore('z:1', 'two'), 2);
    assert.equal(await redis.zincrby('z:1', 2.5, 'one'), 3.5);
    assert.equal(await redis.zrank('z:1', 'one'), 2);
    assert.equal(await redis.zcard('z:1'), 3);
    assert.equal(await redis.zcount('z:1', 2, 3), 2);
    assert.deepEqual(await redis.zpopmin('z:1', 1), ['two', 2]);
    assert.deepEqual(await redis.zrange('z:1', '(3', '+inf', { byScore: true }), ['one']);
    assert.equal(await redis.zrem('z:1', 'three'), 1);
  });

  test('geo', async () => {
    assert.equal(await redis.geoadd('g:1', { longitude: 13.361389, latitude: 38.115556, member: 'Palermo' }, { longitude: 15.087269, latitude: 37.502669, member: 'Catania' }), 2);
    const d = await redis.geodist('g:1', 'Palermo', 'Catania', 'KM');
    assert.ok(d !== null && Math.abs(d - 166.2742) < 0.01);
    const pos = await redis.geopos('g:1', 'Palermo');
    assert.ok(Math.abs(pos[0].lng - 13.361389) < 1e-4);
    const found = await redis.geosearch('g:1', { type: 'FROMLONLAT', coordinate: { lon: 15, lat: 37 } }, { type: 'BYRADIUS', radius: 200, radiusType: 'KM' }, 'ASC');
    assert.deepEqual(found.map((f) => f.member), ['Catania', 'Palermo']);
    assert.equal((await redis.geohash('g:1', 'Palermo'))[0], 'sqc8b49rny0');
  });

  test('hyperloglog', async () => {
    assert.equal(await redis.pfadd('{hll}:1', 'a', 'b', 'c'), 1);
    assert.equal(await redis.pfadd('{hll}:2', 'c', 'd'), 1);
    assert.equal(await redis.pfcount('{hll}:1'), 3);
    assert.equal(await redis.pfmerge('{hll}:3', '{hll}:1', '{hll}:2'), 'OK');
    assert.equal(await redis.pfcount('{hll}:3'), 4);
  });

  test('streams', async () => {
    const id1 = await redis.xadd('x:1', '*', { field: 'v1' });
    const id2 = await redis.xadd('x:1', '*', { field: 'v2', n: 2 });
    assert.match(id1, /^\d+-\d+$/);
    assert.equal(await redis.xlen('x:1'), 2);
    const range = await redis.xrange('x:1', '-', '+');
    assert.deepEqual(range[id2], { field: 'v2', n: 2 });
    assert.equal(await redis.xgroup('x:1', { type: 'CREATE', group: 'g', id: '0' }), 'OK');
    const read = (await redis.xreadgroup('g', 'c1', 'x:1', '>', { count: 1 })) as unknown[];
    assert.equal(JSON.stringify(read).includes('v1'), true);
    assert.equal(await redis.xack('x:1', 'g', id1), 1);
    const plain = (await redis.xread('x:1', '0')) as unknown[];
    assert.equal(JSON.stringify(plain).includes('v2'), true);
    assert.equal(await redis.xdel('x:1', id1), 1);
    assert.equal(await redis.xtrim('x:1', { strategy: 'MAXLEN', threshold: 0 }), 1);
  });

  test('scripting: eval, evalsha with fallback to eval, script load/exists', async () => {
    assert.equal(await redis.eval('return ARGV[1]', [], ['hi']), 'hi');
    assert.equal(await redis.eval("return redis.call('incr', KEYS[1])", ['sc:n'], []), 1);
    const script = redis.createScript<number>("return redis.call('incrby', KEYS[1], ARGV[1])");
    await redis.scriptFlush();
    // EVALSHA fails with NOSCRIPT first; the SDK falls back to EVAL (needs the error verbatim)
    assert.equal(await script.exec(['sc:m'], ['5']), 5);
    assert.equal(await script.exec(['sc:m'], ['5']), 10);
    const sha = await redis.scriptLoad('return 42');
    assert.deepEqual(await redis.scriptExists(sha, 'ffffffffffffffffffffffffffffffffffffffff'), [1, 0]);
    assert.equal(await redis.evalsha(sha, [], []), 42);
    await assert.rejects(redis.evalsha('ffffffffffffffffffffffffffffffffffffffff', [], []), /NOSCRIPT/);
    assert.equal(await redis.evalRo('return ARGV[1]', [], ['ro']), 'ro');
  });

  test('functions', async () => {
    const lib = "#!lua name=svctestlib\nredis.register_function('svc_echo', function(keys, args) return args[1] end)\n" +
      "redis.register_function{function_name='svc_get', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    assert.equal(await redis.functions.load({ code: lib, replace: true }), 'svctestlib');
    assert.equal(await redis.functions.call('svc_echo', [], ['yo']), 'yo');
    await redis.set('fn:k', 'val');
    assert.equal(await redis.functions.callRo('svc_get', ['fn:k']), 'val');
    const list = await redis.functions.list({ libraryName: 'svctestlib' });
    assert.equal(list[0].libraryName, 'svctestlib');
    assert.equal(await redis.functions.delete('svctestlib'), 'OK');
  });

  test('pub/sub: publish through the SDK reaches an SDK subscriber', async () => {
    const sub = redis.subscribe<string>(['sdk:chan']);
    const got: unknown[] = [];
    let subscribed = false;
    sub.on('subscribe', () => (subscribed = true));
    sub.on('message', (m) => got.push(m.message));
    const deadline = Date.now() + 5000;
    while (!subscribed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.ok(subscribed, 'subscribe confirmation received');
    assert.equal(await redis.publish('sdk:chan', 'hello'), 1);
    assert.equal(await redis.publish('sdk:chan', { a: 1 }), 1);
    while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(got, ['hello', { a: 1 }]);
    await sub.unsubscribe();
    // the Redis side of the stream is released: the channel loses its subscriber
    const d2 = Date.now() + 5000;
    let n = 1;
    while (n !== 0 && Date.now() < d2) {
      n = await redis.publish('sdk:chan', 'x');
      if (n) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(n, 0);
  });

  test('generic', async () => {
    await redis.set('{gen}:a', 1);
    assert.equal(await redis.exists('{gen}:a', '{gen}:nope'), 1);
    assert.equal(await redis.type('{gen}:a'), 'string');
    assert.equal(await redis.expire('{gen}:a', 100), 1);
    assert.ok((await redis.pttl('{gen}:a')) > 90_000);
    assert.equal(await redis.persist('{gen}:a'), 1);
    assert.equal(await redis.rename('{gen}:a', '{gen}:b'), 'OK');
    assert.deepEqual(await redis.keys('{gen}:*'), ['{gen}:b']);
    // on a Redis Cluster the cursor walks every primary in turn: scan until it is 0 again
    const keys: string[] = [];
    let cursor: string | number = 0;
    do {
      const [next, batch]: [string | number, string[]] = await redis.scan(cursor, { match: '{gen}:*', count: 1000 });
      keys.push(...batch);
      cursor = next;
    } while (String(cursor) !== '0');
    assert.deepEqual(keys, ['{gen}:b']);
    assert.equal(await redis.copy('{gen}:b', '{gen}:c'), 'COPIED');
    assert.equal(await redis.touch('{gen}:b', '{gen}:c'), 2);
    assert.equal(await redis.unlink('{gen}:c'), 1);
    assert.equal(await redis.del('{gen}:b'), 1);
    assert.ok(typeof (await redis.randomkey()) === 'string');
  });

  test('server and connection', async () => {
    assert.equal(await redis.ping(), 'PONG');
    assert.equal(await redis.echo('hi there'), 'hi there');
    assert.ok((await redis.dbsize()) > 0);
    const [sec] = await redis.time();
    assert.ok(Math.abs(sec - Date.now() / 1000) < 60);
    assert.equal(typeof (await redis.exec<number>(['LASTSAVE'])), 'number');
    await assert.rejects(redis.exec(['CONFIG', 'GET', 'maxmemory']), /not allowed: 'config get'/);
    await assert.rejects(redis.exec(['MEMORY', 'DOCTOR']), /not allowed: 'memory doctor'/);
    await assert.rejects(redis.exec(['BGSAVE']), /not allowed: 'bgsave'/);
    await assert.rejects(redis.exec(['SELECT', '1']), /only PING and ECHO/);
    await assert.rejects(redis.exec(['CONFIG', 'SET', 'maxmemory', '1']), /not allowed/);
    assert.equal(await redis.flushdb(), 'OK');
    assert.equal(await redis.dbsize(), 0);
  });

  test('transactions with multi-exec and explicit pipelines', async () => {
    const tx = redis.multi();
    tx.set('tx:a', 1);
    tx.incr('tx:a');
    tx.get('tx:a');
    assert.deepEqual(await tx.exec(), ['OK', 2, 2]);
    const p = redis.pipeline();
    p.set('p:a', 'x');
    p.hget('p:a', 'f');
    p.get('p:a');
    const res = await p.exec({ keepErrors: true });
    assert.equal(res[0].result, 'OK');
    assert.match(String(res[1].error), /WRONGTYPE/);
    assert.equal(res[2].result, 'x');
  });
});

/**
 * kv on a real Redis Cluster (3 primaries + 3 replicas started by the test): routing by slot,
 * MOVED/ASK-free SDK use over every slot range, /pipeline of 1,000 commands in order, values and
 * pipelines larger than one socket read (the router's framing of split commands and replies), CROSSSLOT
 * transactions that run nothing, whole-database commands (SCAN, DBSIZE, KEYS, FLUSHDB), scripts,
 * the JSON group, the read-only token, ACL RESTTOKEN, pub/sub, and a primary SIGKILLed under load.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fs from 'node:fs';
import path from 'node:path';
import { Redis } from '@upstash/redis';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { keySlot } from '../../src/kv/redis/keys.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import { RespError } from '../../src/kv/resp.js';
import { ACL_ALLOWED_COMMANDS, call, startKv, until, type KvUnderTest } from './helpers.js';
import { nodeCommand, replyText, startRedisCluster, type RedisClusterUnderTest } from './topology-helpers.js';

let cluster: RedisClusterUnderTest;
let kv: KvUnderTest;

before(async () => {
  cluster = await startRedisCluster();
  kv = await startKv({ SVC_KV_REDIS_CLUSTER: cluster.seeds });
});
after(async () => {
  await kv?.close();
  await cluster?.close();
});

/**
 * A second svc on the same deployment with `env`: it shares `first`'s credentials (svc instances on
 * one database must: each sets the read-only ACL user's password), so `first`'s tokens stay valid.
 */
async function startSecond(first: KvUnderTest, env: Record<string, string>): Promise<{ base: string; token: string; redis: Redis; close(): Promise<void> }> {
  const dir = tempDir();
  fs.copyFileSync(path.join(first.svc.dataDir, 'credentials.json'), path.join(dir.dir, 'credentials.json'));
  const svc = await startTestSvc(['kv'], { env, dataDir: dir.dir });
  const token = svc.ctx.credentials.get('kv.token');
  return {
    base: svc.urls.kv!,
    token,
    redis: new Redis({ url: svc.urls.kv!, token, enableTelemetry: false }),
    close: async () => {
      await svc.close();
      dir.cleanup();
    },
  };
}

/** An SSE stream of the gateway (standard token): its text so far, and close. */
async function openStream(path: string): Promise<{ readonly text: string; close(): Promise<void> }> {
  const ctrl = new AbortController();
  const res = await fetch(`${kv.base}${path}`, { headers: { authorization: `Bearer ${kv.token}` }, signal: ctrl.signal });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  let text = '';
  const reading = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      text += Buffer.from(value).toString();
    }
  })().catch(() => undefined);
  return {
    get text() {
      return text;
    },
    close: async () => {
      ctrl.abort();
      await reading;
    },
  };
}

/** `n` keys whose slots cover the whole range 0..16383 in steps (every primary's ranges). */
function spreadKeys(prefix: string, n: number): string[] {
  const keys: string[] = [];
  const seen = new Set<number>();
  for (let i = 0; keys.length < n; i++) {
    const k = `${prefix}${i}`;
    const bucket = Math.floor((keySlot(k) * n) / 16384);
    if (seen.has(bucket) && i < n * 50) continue;
    seen.add(bucket);
    keys.push(k);
  }
  return keys;
}

describe('kv on Redis Cluster', () => {
  test('the SDK reads and writes keys of every slot range; multi-key commands over several slots are split', async () => {
    const keys = spreadKeys('k:', 64);
    assert.ok(new Set(keys.map((k) => Math.floor(keySlot(k) / 2048))).size === 8, 'keys in all eight slot ranges');
    for (const k of keys) assert.equal(await kv.redis.set(k, `v-${k}`), 'OK');
    for (const k of keys) assert.equal(await kv.redis.get(k), `v-${k}`);
    assert.deepEqual(await kv.redis.mget(...keys, 'k:missing'), [...keys.map((k) => `v-${k}`), null]);
    assert.equal(await kv.redis.exists(...keys), keys.length);
    assert.equal(await kv.redis.mset({ 'm:a': 1, 'm:b': 2, 'm:c': 3 }), 'OK');
    assert.deepEqual(await kv.redis.mget('m:a', 'm:b', 'm:c'), [1, 2, 3]);
    assert.equal(await kv.redis.del(...keys), keys.length);
    assert.equal(await kv.redis.exists(...keys), 0);
    // a command over two slots that cannot be split: Redis Cluster's answer, nothing run
    const r = await kv.post('/', ['SUNIONSTORE', 'dst', 'a', 'b']);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /^CROSSSLOT/);
    assert.equal(await kv.redis.sadd('{t}a', 'x'), 1);
    assert.equal(await kv.redis.sadd('{t}b', 'y'), 1);
    assert.equal(await kv.redis.sunionstore('{t}dst', '{t}a', '{t}b'), 2);
  });

  test('a /pipeline of 1,000 commands over many slots answers in request order', async () => {
    // a split MSET, a whole-database command and the reads after them keep their order too
    const mixed = await kv.post('/pipeline', [['MSET', 'o:a', '1', 'o:b', '2', 'o:c', '3'], ['GET', 'o:c'], ['DEL', 'o:a', 'o:b'], ['EXISTS', 'o:a', 'o:b', 'o:c'], ['DBSIZE'], ['INCR', 'o:c'], ['GET', 'o:c']]);
    assert.deepEqual(mixed.json.map((r: { result: unknown }) => r.result).filter((_: unknown, i: number) => i !== 4), ['OK', '3', 2, 1, 4, '4']);
    const p = kv.redis.pipeline();
    for (let i = 0; i < 500; i++) p.set(`p:${i}`, i);
    for (let i = 0; i < 500; i++) p.get(`p:${499 - i}`);
    const out = await p.exec();
    assert.equal(out.length, 1000);
    for (let i = 0; i < 500; i++) assert.equal(out[i], 'OK');
    for (let i = 0; i < 500; i++) assert.equal(out[500 + i], 499 - i);
    assert.ok(new Set(Array.from({ length: 500 }, (_, i) => keySlot(`p:${i}`))).size > 400);
  });

  test('a /pipeline of 1,000 commands over every node, error replies among them: each answer and each error in its place', async () => {
    // per group of 4 over one key: SET k x, INCR k (an error: not an integer), LPUSH k (WRONGTYPE), GET k;
    // several such pipelines at once on the gateway's connections to the router
    const keys = spreadKeys('e:', 250);
    const cmds = keys.flatMap((k, i) => [['SET', k, `x${i}`], ['INCR', k], ['LPUSH', k, 'v'], ['GET', k]]);
    assert.ok(new Set(keys.map((k) => keySlot(k))).size > 200);
    const runs = await Promise.all(Array.from({ length: 4 }, () => kv.post('/pipeline', cmds)));
    for (const r of runs) {
      assert.equal(r.status, 200);
      assert.equal(r.json.length, 1000);
      keys.forEach((k, i) => {
        assert.deepEqual(r.json[4 * i], { result: 'OK' }, `SET ${k}`);
        assert.match(r.json[4 * i + 1].error, /^ERR value is not an integer/, `INCR ${k}`);
        assert.match(r.json[4 * i + 2].error, /^WRONGTYPE/, `LPUSH ${k}`);
        assert.deepEqual(r.json[4 * i + 3], { result: `x${i}` }, `GET ${k}`);
      });
    }
  });

  test('values and pipelines larger than one socket read cross the router intact (commands and replies split over chunks)', async () => {
    // RESP-like bytes inside values must not confuse the router's framing of commands and replies
    const value = (i: number, n: number) => `v${i}:*3\r\n$3\r\nSET\r\n-MOVED 1 x\r\n:é€`.padEnd(n, String(i % 10));
    const keys = spreadKeys('big:', 200);
    const p = kv.redis.pipeline();
    keys.forEach((k, i) => p.set(k, value(i, 20_000)));
    keys.forEach((k) => p.get(k));
    p.mget(...keys.slice(0, 50));
    const out = await p.exec();
    assert.equal(out.length, 401);
    for (let i = 0; i < 200; i++) assert.equal(out[i], 'OK');
    for (let i = 0; i < 200; i++) assert.equal(out[200 + i], value(i, 20_000), `GET ${keys[i]}`);
    assert.deepEqual(out[400], keys.slice(0, 50).map((_, i) => value(i, 20_000)));
    const huge = value(7, 3_000_000);
    assert.equal(await kv.redis.set('big:huge', huge), 'OK');
    assert.equal(await kv.redis.get('big:huge'), huge);
    assert.equal(await kv.redis.strlen('big:huge'), Buffer.byteLength(huge));
  });

  test('multi-exec over two slots answers CROSSSLOT and runs nothing; one slot runs atomically', async () => {
    assert.notEqual(keySlot('tx:a'), keySlot('tx:b'));
    const r = await kv.post('/multi-exec', [['SET', 'tx:a', '1'], ['SET', 'tx:b', '2']]);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /^CROSSSLOT/);
    assert.equal(await kv.redis.get('tx:a'), null);
    assert.equal(await kv.redis.get('tx:b'), null);
    const tx = kv.redis.multi();
    tx.set('{tx}a', 1);
    tx.incr('{tx}a');
    tx.get('{tx}a');
    assert.deepEqual(await tx.exec(), ['OK', 2, 2]);
  });

  test('scripts run on their keys\' slot; keys of two slots: CROSSSLOT', async () => {
    assert.deepEqual(await kv.redis.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[2])", ['{s}1', '{s}2'], ['x']), null);
    assert.equal(await kv.redis.eval("return redis.call('GET', KEYS[1])", ['{s}1'], []), 'x');
    const r = await kv.post('/', ['EVAL', "return 1", '2', 'sa', 'sb']);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /^CROSSSLOT/);
    // SCRIPT LOAD reaches every primary: EVALSHA works on every slot
    const sha = await kv.redis.scriptLoad("return redis.call('GET', KEYS[1])");
    for (const k of spreadKeys('sl:', 12)) {
      await kv.redis.set(k, k);
      assert.equal(await kv.redis.evalsha(sha, [k], []), k);
    }
    assert.deepEqual(await kv.redis.scriptExists(sha), [1]);
  });

  test('SCAN walks every primary: each key exactly once; DBSIZE and KEYS cover every node', async () => {
    await kv.redis.flushdb();
    assert.equal(await kv.redis.dbsize(), 0);
    const keys = Array.from({ length: 600 }, (_, i) => `scan:${i}`);
    for (let i = 0; i < keys.length; i += 100) {
      const p = kv.redis.pipeline();
      for (const k of keys.slice(i, i + 100)) p.set(k, 1);
      await p.exec();
    }
    const seen: string[] = [];
    let cursor: string | number = 0;
    let calls = 0;
    do {
      const [next, batch]: [string | number, string[]] = await kv.redis.scan(cursor, { count: 50 });
      seen.push(...batch);
      cursor = next;
      calls++;
    } while (String(cursor) !== '0' && calls < 1000);
    assert.equal(seen.length, keys.length, 'no key twice');
    assert.deepEqual([...seen].sort(), [...keys].sort());
    // SCAN … WITHTYPE (svc runs it as a script) walks every primary too
    const typed: string[] = [];
    cursor = 0;
    do {
      const [next, batch]: [string | number, { key: string; type: string }[]] = await kv.redis.scan(cursor, { count: 100, withType: true });
      for (const e of batch) {
        assert.equal(e.type, 'string');
        typed.push(e.key);
      }
      cursor = next;
    } while (String(cursor) !== '0');
    assert.deepEqual(typed.sort(), [...keys].sort());
    assert.equal(await kv.redis.dbsize(), keys.length);
    assert.equal((await kv.redis.keys('scan:*')).length, keys.length);
    assert.ok(keys.includes((await kv.redis.randomkey())!));
    const info = await kv.post('/', ['INFO', 'keyspace']);
    assert.equal(info.status, 200);
    assert.equal(info.json.result.match(/# svc node/g).length, 3);
    assert.equal(await kv.redis.flushall(), 'OK');
    assert.equal(await kv.redis.dbsize(), 0);
  });

  test('JSON commands, the read-only token and ACL RESTTOKEN hold on every node', async () => {
    const keys = spreadKeys('j:', 12);
    for (const k of keys) assert.equal(await kv.redis.json.set(k, '$', { k, n: 1 }), 'OK');
    for (const k of keys) assert.deepEqual(await kv.redis.json.get(k), { k, n: 1 });
    const ro = new Redis({ url: kv.base, token: kv.svc.ctx.credentials.get('kv.readonlyToken'), enableTelemetry: false });
    for (const k of keys) assert.deepEqual(await ro.json.get(k), { k, n: 1 });
    await assert.rejects(ro.set(keys[0], 'x'), /NOPERM/);
    const setuser = await kv.post('/', ['ACL', 'SETUSER', 'alice', 'on', '>alicepw', '~*', ...ACL_ALLOWED_COMMANDS]);
    assert.equal(setuser.status, 200);
    const minted = await kv.post('/', ['ACL', 'RESTTOKEN', 'alice', 'alicepw']);
    assert.equal(minted.status, 200);
    const alice = new Redis({ url: kv.base, token: minted.json.result, enableTelemetry: false });
    for (const k of keys) assert.equal(await alice.set(`a:${k}`, 'x'), 'OK');
    const wrong = await kv.post('/', ['ACL', 'RESTTOKEN', 'alice', 'nope']);
    assert.equal(wrong.status, 400);
    // a new password stops the old token on every node at once
    assert.equal((await kv.post('/', ['ACL', 'SETUSER', 'alice', 'resetpass', '>newpw'])).status, 200);
    await assert.rejects(alice.get(keys[0]), /WRONGPASS/);
  });

  test('PUBLISH reaches a /subscribe stream (classic pub/sub is cluster-wide)', async () => {
    const s = await openStream('/subscribe/news');
    await until(() => s.text.includes('subscribe,news'));
    await until(async () => (await kv.redis.publish('news', 'hello')) >= 1 && s.text.includes('message,news,hello'));
    await s.close();
  });

  test('SPUBLISH goes to the primary of its channel\'s slot (its SSUBSCRIBE subscribers get it); SSUBSCRIBE as a command: 400', async () => {
    // a raw subscriber on the shard that owns the channel (other primaries answer MOVED)
    const channel = 'shard:news';
    const got: string[] = [];
    let sub: RedisConnection | undefined;
    for (const port of await cluster.primaries()) {
      const c = await RedisConnection.connect({ host: '127.0.0.1', port }, {}, 2000);
      const r = await c.send(['SSUBSCRIBE', channel]).catch((e: Error) => e);
      if (r instanceof Error || r instanceof RespError) c.close();
      else {
        sub = c;
        c.onPush = (m) => got.push((m as Buffer[]).map((x) => x.toString()).join(','));
      }
    }
    assert.ok(sub, 'one primary owns the channel');
    try {
      const r = await kv.post('/', ['SPUBLISH', channel, 'hello']);
      assert.equal(r.status, 200);
      assert.equal(r.json.result, 1);
      await until(() => got.includes(`smessage,${channel},hello`));
      const refused = await kv.post('/', ['SSUBSCRIBE', channel]);
      assert.equal(refused.status, 400);
      assert.match(refused.json.error, /SPUBLISH works/);
    } finally {
      sub.close();
    }
  });

  test('/monitor shows the commands of every primary', async () => {
    const s = await openStream('/monitor');
    // one key per primary's slot ranges (every 2048-slot range: each primary owns at least one)
    const keys = spreadKeys('mon:', 8);
    try {
      await until(async () => {
        for (const k of keys) await kv.redis.set(k, 'v');
        return keys.every((k) => s.text.toLowerCase().includes(`"set" "${k}" "v"`));
      }, 30_000);
    } finally {
      await s.close();
    }
  });

  test('a slot moved between primaries while in use: ASK during the migration, MOVED after it', async () => {
    const key = 'mig:{m}:1';
    const other = 'mig:{m}:2';
    const slot = keySlot(key);
    assert.equal(await kv.redis.set(key, 'before'), 'OK');
    assert.equal(await kv.redis.set(other, 'stays'), 'OK');
    const primaries = await cluster.primaries();
    const idOf = async (port: number) => replyText(await nodeCommand(port, ['CLUSTER', 'MYID']));
    const ownerPort = async () => {
      for (const p of primaries) if (Number(await nodeCommand(p, ['CLUSTER', 'COUNTKEYSINSLOT', String(slot)])) > 0) return p;
      throw new Error('no owner');
    };
    const from = await ownerPort();
    const to = primaries.find((p) => p !== from)!;
    const [fromId, toId] = [await idOf(from), await idOf(to)];
    assert.equal(replyText(await nodeCommand(to, ['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId])), 'OK');
    assert.equal(replyText(await nodeCommand(from, ['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId])), 'OK');
    // one key of the slot moves: the old owner answers ASK for it, svc follows with ASKING
    assert.equal(replyText(await nodeCommand(from, ['MIGRATE', '127.0.0.1', String(to), key, '0', '5000'])), 'OK');
    assert.equal(await kv.redis.get(key), 'before');
    assert.equal(await kv.redis.get(other), 'stays');
    assert.equal(replyText(await nodeCommand(from, ['MIGRATE', '127.0.0.1', String(to), other, '0', '5000'])), 'OK');
    // the migration ends: every node learns the new owner; the old one answers MOVED
    for (const p of primaries) await nodeCommand(p, ['CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
    assert.equal(await kv.redis.set(key, 'after'), 'OK');
    assert.equal(await kv.redis.get(key), 'after');
    assert.equal(replyText(await nodeCommand(to, ['GET', key])), 'after');
    assert.deepEqual(await kv.redis.mget(key, other), ['after', 'stays']);
  });

  test('a primary SIGKILLed under load: acknowledged replicated writes stay readable, the gateway recovers within 15 s, no request hangs', async () => {
    // a second svc on the same cluster that waits for one replica per write: acknowledged = replicated
    const waiting = await startSecond(kv, { SVC_KV_REDIS_CLUSTER: cluster.seeds, SVC_KV_WAIT_REPLICAS: '1', SVC_KV_WAIT_TIMEOUT_MS: '2000' });
    try {
      const acked = new Map<string, number>();
      const statuses = new Map<number, number>();
      const problems: string[] = [];
      let stop = false;
      let seq = 0;
      const worker = async (w: number) => {
        while (!stop) {
          const k = `load:${w}:${seq++ % 200}`;
          const v = seq;
          try {
            const r = await call(waiting.base, '/', {
              method: 'POST',
              token: waiting.token,
              body: JSON.stringify(['SET', k, String(v)]),
              signal: AbortSignal.timeout(10_000), // a hung request fails the test
            });
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
            if (r.status === 200) acked.set(k, v);
            else if (r.status !== 503 || !r.headers.get('retry-after')) problems.push(`${r.status} ${r.text}`);
          } catch (err) {
            problems.push(String(err));
          }
        }
      };
      const load = Array.from({ length: 6 }, (_, w) => worker(w));
      await until(() => acked.size > 100, 30_000);
      const primaries = await cluster.primaries();
      const victim = cluster.nodes.find((n) => n.port === primaries[0])!;
      const before = new Map(acked);
      const docs = spreadKeys('doc:', 24);
      for (const k of docs) assert.equal(await kv.redis.json.set(k, '$', { k }), 'OK');
      await victim.kill();
      const killedAt = Date.now();
      // keys of every slot (the killed primary's too) are served again
      const probe = spreadKeys('probe:', 64);
      await until(async () => {
        const r = await call(kv.base, '/', { method: 'POST', token: kv.token, body: JSON.stringify(['MSET', ...probe.flatMap((k) => [k, '1'])]), signal: AbortSignal.timeout(10_000) });
        return r.status === 200;
      }, 30_000);
      const recoveredMs = Date.now() - killedAt;
      stop = true;
      await Promise.all(load);
      assert.deepEqual(problems, []);
      assert.ok(recoveredMs < 15_000, `recovered after ${recoveredMs} ms`);
      // every write acknowledged (after WAIT 1) before the kill is readable with its value or a later one
      for (const [k, v] of before) {
        const got = Number(await waiting.redis.get<string>(k));
        assert.ok(got >= v, `${k}: ${got} < acknowledged ${v}`);
      }
      // the JSON library and the read-only user hold on the promoted replica too
      const ro = new Redis({ url: kv.base, token: kv.svc.ctx.credentials.get('kv.readonlyToken'), enableTelemetry: false });
      for (const k of docs) {
        assert.equal(await kv.redis.json.set(k, '$.n', 1), 'OK');
        assert.deepEqual(await kv.redis.json.get(k), { k, n: 1 });
      }
      for (const k of docs) assert.deepEqual(await ro.json.get(k), { k, n: 1 });
      console.log(`cluster failover: recovered ${recoveredMs} ms after SIGKILL; statuses ${JSON.stringify([...statuses])}`);
    } finally {
      await waiting.close();
    }
  });
});

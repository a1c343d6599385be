/**
 * kv on a real Sentinel deployment (1 primary + 1 replica + 3 sentinels started by the test):
 * the primary found through the sentinels, the SDK, transactions, the read-only token (ACL user
 * on the replica too), `SVC_KV_WAIT_REPLICAS`, the primary SIGKILLed under load, and a sentinel
 * that names another primary (outvoted by the others: svc never connects there).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { call, startKv, until, type KvUnderTest } from './helpers.js';
import { nodeCommand, replyText, startLyingSentinel, startRedisSentinel, type RedisSentinelUnderTest } from './topology-helpers.js';

let setup: RedisSentinelUnderTest;
let kv: KvUnderTest;
let waiting: KvUnderTest;

before(async () => {
  setup = await startRedisSentinel();
  const env = { SVC_KV_REDIS_SENTINELS: setup.addresses, SVC_KV_REDIS_SENTINEL_MASTER: setup.masterName };
  kv = await startKv(env);
});
after(async () => {
  await waiting?.close();
  await kv?.close();
  await setup?.close();
});

describe('kv on Redis Sentinel', () => {
  test('commands go to the primary the sentinels name; the SDK, transactions and the read-only token work', async () => {
    assert.equal(await kv.redis.set('a', 1), 'OK');
    assert.equal(await nodeCommand(setup.primary.port, ['EXISTS', 'a']), 1);
    const tx = kv.redis.multi();
    tx.set('b', 1);
    tx.incr('b');
    tx.get('a');
    assert.deepEqual(await tx.exec(), ['OK', 2, 1]);
    assert.equal(await kv.redis.json.set('j', '$', { x: 1 }), 'OK');
    assert.deepEqual(await kv.redis.json.get('j'), { x: 1 });
    const ro = new Redis({ url: kv.base, token: kv.svc.ctx.credentials.get('kv.readonlyToken'), enableTelemetry: false });
    assert.equal(await ro.get('a'), 1);
    await assert.rejects(ro.set('a', 2), /NOPERM/);
    // the read-only ACL user exists on the replica too (ACL rules are not replicated)
    const users = await nodeCommand(setup.replica.port, ['ACL', 'USERS']);
    assert.ok(Array.isArray(users) && users.some((u) => String(u) === 'svc-readonly'));
  });

  test('a lying sentinel listed first is outvoted: svc never uses (or connects to) the primary it names', async () => {
    const liar = await startLyingSentinel(setup.masterName);
    let lied: KvUnderTest | undefined;
    try {
      const named = await nodeCommand(liar.sentinel.port, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', setup.masterName]);
      assert.equal(Array.isArray(named) && replyText(named[1]), String(liar.foreign.port));
      lied = await startKv({ SVC_KV_REDIS_SENTINELS: `127.0.0.1:${liar.sentinel.port},${setup.addresses}`, SVC_KV_REDIS_SENTINEL_MASTER: setup.masterName });
      for (let i = 0; i < 20; i++) assert.equal(await lied.redis.set(`liar:${i}`, i), 'OK');
      assert.equal(await nodeCommand(setup.primary.port, ['EXISTS', 'liar:0', 'liar:19']), 2);
      assert.equal(await nodeCommand(liar.foreign.port, ['DBSIZE']), 0);
      // a token reaches the data nodes only: SENTINEL is an unknown command there
      const sentinelCmd = await call(lied.base, '/', { method: 'POST', token: lied.token, body: JSON.stringify(['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', setup.masterName]) });
      assert.equal(sentinelCmd.status, 400, sentinelCmd.text);
      assert.match(sentinelCmd.json.error, /unknown command/i);
      // no connection of svc reached the foreign node (only the lying sentinel's own and this one)
      const clients = replyText(await nodeCommand(liar.foreign.port, ['CLIENT', 'LIST']));
      assert.doesNotMatch(clients, /name=svc|cmd=role|cmd=acl/, clients);
    } finally {
      await lied?.close();
      await liar.close();
    }
  });

  test('SVC_KV_WAIT_REPLICAS=1: a write is answered once the replica has it', async () => {
    // a second svc on the same deployment (it re-creates the read-only ACL user with its own password)
    waiting = await startKv({ SVC_KV_REDIS_SENTINELS: setup.addresses, SVC_KV_REDIS_SENTINEL_MASTER: setup.masterName, SVC_KV_WAIT_REPLICAS: '1', SVC_KV_WAIT_TIMEOUT_MS: '2000' });
    assert.equal(await waiting.redis.set('w', 'x'), 'OK');
    assert.equal(String(await nodeCommand(setup.replica.port, ['GET', 'w'])), 'x');
  });

  test('the primary SIGKILLed under load: the gateway serves again within 15 s of the promotion, acknowledged writes survive', async () => {
    const acked = new Map<string, number>();
    const problems: string[] = [];
    const statuses = new Map<number, number>();
    let stop = false;
    let seq = 0;
    let killedAt = 0;
    const worker = async (w: number) => {
      while (!stop) {
        const k = `load:${w}:${seq++ % 100}`;
        const v = seq;
        try {
          const r = await call(waiting.base, '/', { method: 'POST', token: waiting.token, body: JSON.stringify(['SET', k, String(v)]), signal: AbortSignal.timeout(10_000) });
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          if (r.status === 200) acked.set(k, v);
          else if (r.status !== 503 || !r.headers.get('retry-after')) problems.push(`${r.status} ${r.text}`);
        } catch (err) {
          problems.push(`${String(err)} at ${Date.now() - (killedAt || Date.now())} ms after the kill`);
        }
      }
    };
    const load = Array.from({ length: 6 }, (_, w) => worker(w));
    await until(() => acked.size > 100, 30_000);
    const before = new Map(acked);
    const oldPort = setup.primary.port;
    await setup.primary.kill();
    killedAt = Date.now();
    await until(async () => (await setup.masterPort()) === setup.replica.port, 60_000);
    const promotedAt = Date.now();
    console.log(`promoted ${promotedAt - killedAt} ms after the kill`);
    await until(async () => (await call(kv.base, '/', { method: 'POST', token: kv.token, body: JSON.stringify(['SET', 'after', '1']), signal: AbortSignal.timeout(10_000) })).status === 200, 30_000);
    const servedMs = Date.now() - promotedAt;
    stop = true;
    await Promise.all(load);
    assert.deepEqual(problems, []);
    assert.ok(servedMs < 15_000, `served ${servedMs} ms after the promotion`);
    assert.notEqual(setup.replica.port, oldPort);
    for (const [k, v] of before) {
      const got = Number(await kv.redis.get<string>(k));
      assert.ok(got >= v, `${k}: ${got} < acknowledged ${v}`);
    }
    // the promoted primary has no replica: WAIT 1 cannot be met, the write is refused before it runs
    const r = await waiting.post('/', ['SET', 'nowait', '1']);
    assert.equal(r.status, 503);
    assert.match(r.json.error, /^NOREPLICAS/);
    assert.equal(await kv.redis.get('nowait'), null);
    console.log(`sentinel failover: served ${servedMs} ms after the promotion; statuses ${JSON.stringify([...statuses])}`);
  });
});

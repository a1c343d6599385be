/**
 * A node that holds its connections open but stops answering (its redis-server SIGSTOPped), in a
 * real Redis Cluster (3 primaries + 3 replicas) and a real Sentinel setup: the requests routed to
 * it answer 503 + Retry-After once `SVC_KV_NODE_TIMEOUT_MS` passed (never hang), requests to other
 * nodes keep being served, and after SIGCONT (cluster) or the promotion (sentinel) everything is
 * served again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { keySlot } from '../../src/kv/redis/keys.js';
import { call, startKv, until, type KvUnderTest, type Res } from './helpers.js';
import { nodeCommand, replyText, startRedisCluster, startRedisSentinel, type RedisClusterUnderTest, type RedisSentinelUnderTest } from './topology-helpers.js';

const NODE_TIMEOUT_MS = 1500;

/** One REST command; a request still unanswered after 30 s fails the test (it hangs). */
function command(kv: KvUnderTest, cmd: string[]): Promise<Res> {
  return call(kv.base, '/', { method: 'POST', token: kv.token, body: JSON.stringify(cmd), signal: AbortSignal.timeout(30_000) });
}

/** Asserts the 503 + Retry-After of a command the hung node left unanswered. */
function assertHung(r: Res, what: string): void {
  assert.equal(r.status, 503, `${what}: ${r.status} ${r.text}`);
  assert.ok(r.headers.get('retry-after'), `${what}: Retry-After`);
  assert.match(r.json.error, /did not answer within \d+ ms \(SVC_KV_NODE_TIMEOUT_MS\)/);
}

describe('kv: a node that stops answering (SIGSTOP)', () => {
  let cluster: RedisClusterUnderTest;
  let kv: KvUnderTest;

  before(async () => {
    cluster = await startRedisCluster();
    kv = await startKv({ SVC_KV_REDIS_CLUSTER: cluster.seeds, SVC_KV_NODE_TIMEOUT_MS: String(NODE_TIMEOUT_MS) });
  });
  after(async () => {
    for (const n of cluster?.nodes ?? []) if (n.proc.exitCode === null) n.proc.kill('SIGCONT');
    await kv?.close();
    await cluster?.close();
  });

  test('cluster: a stopped primary\'s slots answer 503 within the bound, other slots are served, SIGCONT heals', async () => {
    // the stopped primary keeps its slots (no failover) and the others keep serving theirs
    for (const n of cluster.nodes) {
      assert.equal(replyText(await nodeCommand(n.port, ['CONFIG', 'SET', 'cluster-require-full-coverage', 'no'])), 'OK');
      assert.equal(replyText(await nodeCommand(n.port, ['CONFIG', 'SET', 'cluster-replica-no-failover', 'yes'])), 'OK');
    }
    const primaries = await cluster.primaries();
    const victimPort = primaries[0];
    const victim = cluster.nodes.find((n) => n.port === victimPort)!;
    const ownsSlot = async (port: number, slot: number) => {
      const ranges = await nodeCommand(port, ['CLUSTER', 'SLOTS']);
      return (ranges as unknown[][]).some((r) => Number(r[0]) <= slot && slot <= Number(r[1]) && Number((r[2] as unknown[])[1]) === victimPort);
    };
    const onVictim: string[] = [];
    const elsewhere: string[] = [];
    for (let i = 0; onVictim.length < 3 || elsewhere.length < 12; i++) {
      const k = `hung:${i}`;
      ((await ownsSlot(primaries[1], keySlot(k))) ? onVictim : elsewhere).push(k);
    }
    for (const k of [...onVictim, ...elsewhere]) assert.equal(await kv.redis.set(k, `v-${k}`), 'OK');

    process.kill(victim.proc.pid!, 'SIGSTOP');
    try {
      // a read and a write to the stopped node, in flight together
      const t0 = Date.now();
      const read = command(kv, ['GET', onVictim[0]]);
      const write = command(kv, ['SET', onVictim[1], 'x']);
      // other nodes answer while those wait
      for (const k of elsewhere) {
        const r = await command(kv, ['GET', k]);
        assert.equal(r.status, 200, `${k}: ${r.text}`);
        assert.equal(r.json.result, `v-${k}`);
        assert.equal((await command(kv, ['SET', k, `w-${k}`])).status, 200);
      }
      const [r, w] = await Promise.all([read, write]);
      const waitedMs = Date.now() - t0;
      assertHung(r, 'GET');
      assertHung(w, 'SET');
      assert.match(w.json.error, /may or may not have been applied/);
      assert.ok(waitedMs >= NODE_TIMEOUT_MS, `answered after ${waitedMs} ms, before the bound`);
      // the next command to it opens a new connection, which hangs as well: 503 again, not a hang
      assertHung(await command(kv, ['GET', onVictim[2]]), 'GET on a new connection');
      assert.equal((await command(kv, ['GET', elsewhere[0]])).json.result, `w-${elsewhere[0]}`);
      console.log(`node timeout: the stopped primary's commands answered 503 after ${waitedMs} ms (bound ${NODE_TIMEOUT_MS} ms)`);
    } finally {
      process.kill(victim.proc.pid!, 'SIGCONT');
    }
    await until(async () => {
      const r = await command(kv, ['GET', onVictim[0]]);
      return r.status === 200 && r.json.result === `v-${onVictim[0]}`;
    }, 60_000);
    assert.equal((await command(kv, ['SET', onVictim[1], 'after'])).status, 200);
    assert.equal(await kv.redis.get(onVictim[1]), 'after');
    assert.equal(await kv.redis.get(elsewhere[1]), `w-${elsewhere[1]}`);
  });
});

describe('kv: a sentinel-managed primary that stops answering (SIGSTOP)', () => {
  let sentinel: RedisSentinelUnderTest;
  let kv: KvUnderTest;

  before(async () => {
    sentinel = await startRedisSentinel();
    kv = await startKv({ SVC_KV_REDIS_SENTINELS: sentinel.addresses, SVC_KV_REDIS_SENTINEL_MASTER: sentinel.masterName, SVC_KV_NODE_TIMEOUT_MS: String(NODE_TIMEOUT_MS) });
  });
  after(async () => {
    if (sentinel?.primary.proc.exitCode === null) sentinel.primary.proc.kill('SIGCONT');
    await kv?.close();
    await sentinel?.close();
  });

  test('a request in flight on the stopped primary answers 503, the promoted replica serves after', async () => {
    assert.equal(await kv.redis.set('s:a', '1'), 'OK');
    assert.equal(Number(await nodeCommand(sentinel.primary.port, ['WAIT', '1', '5000'])), 1, 'the write reached the replica');
    const stoppedPort = sentinel.primary.port;
    process.kill(sentinel.primary.proc.pid!, 'SIGSTOP');
    try {
      const r = await command(kv, ['GET', 's:a']);
      // the primary stopped: its connection answers nothing; a promotion may already have happened
      // for a command that came later, never for this one in flight
      assertHung(r, 'GET in flight');
      await until(async () => (await sentinel.masterPort()) !== stoppedPort, 60_000);
      await until(async () => (await command(kv, ['SET', 's:b', '2'])).status === 200, 60_000);
      const got = await command(kv, ['GET', 's:a']);
      assert.equal(got.status, 200);
      assert.equal(got.json.result, '1');
    } finally {
      process.kill(sentinel.primary.proc.pid!, 'SIGCONT');
    }
  });
});

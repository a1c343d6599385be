/**
 * Several active svc nodes on one PostgreSQL (`SVC_QUEUE_DATABASE_URL`): three real `svc`
 * processes on one real database (a throw-away cluster, or SVC_TEST_DATABASE_URL), publishers
 * spread over all of them.
 *
 * - one node killed with SIGKILL mid-load: every acknowledged message is delivered (duplicates
 *   counted and printed);
 * - a parallelism=1 queue fed through all nodes never has two deliveries in flight and keeps FIFO;
 * - a schedule fires once per due time whatever the node count;
 * - a flow-control rate of N per period holds across nodes;
 * - rotated signing keys and tokens take effect on every node, and survive a restart;
 * - a node cut off from the database (a TCP proxy the test cuts) answers 503 on publish, its
 *   in-flight messages are delivered by another node after the lease, and it resumes when the
 *   connection is back.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { Client, Receiver } from '@upstash/qstash';
import pg from 'pg';
import { tempDir } from '../helpers/env.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { spawnQueueSvc, startSink, waitFor } from './helpers.js';

const TOKEN = 'multinode-test-token';
const KEYS = { SVC_QUEUE_CURRENT_SIGNING_KEY: 'sig_multinode_current', SVC_QUEUE_NEXT_SIGNING_KEY: 'sig_multinode_next' };

let server: TestPostgres;
const children: ChildProcess[] = [];
const dirs: { cleanup(): void }[] = [];

before(async () => {
  server = await startTestPostgres();
});
after(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await server?.stop();
  for (const d of dirs) d.cleanup();
});

/** Concurrent deliveries per node: bounds the duplicates a killed node can cause. */
const MAX_CONCURRENT = 32;

interface Node {
  child: ChildProcess;
  url: string;
  client: Client;
  output: () => string;
}

/** Starts `n` queue nodes on `databaseUrl`, each with its own data dir and port. */
async function startNodes(databaseUrl: string, n: number, env: Record<string, string> = {}): Promise<Node[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const tmp = tempDir('svc-node-');
      dirs.push(tmp);
      const { child, url, output } = await spawnQueueSvc(tmp.dir, {
        SVC_QUEUE_DATABASE_URL: databaseUrl,
        SVC_QUEUE_DATABASE_SCHEMA: 'public',
        SVC_QUEUE_TOKEN: TOKEN,
        SVC_QUEUE_LEASE_MS: '5000',
        SVC_QUEUE_MAX_CONCURRENT_DELIVERIES: String(MAX_CONCURRENT),
        ...KEYS,
        ...env,
      });
      children.push(child);
      return { child, url, output, client: new Client({ baseUrl: url, token: TOKEN, retry: false }) };
    }),
  );
}

async function stopNodes(nodes: Node[]): Promise<void> {
  await Promise.all(
    nodes.map(async (n) => {
      if (n.child.exitCode !== null || n.child.signalCode !== null) return;
      n.child.kill('SIGTERM');
      await new Promise((r) => n.child.once('exit', r));
    }),
  );
}

test('three nodes, one killed with SIGKILL mid-load: every acknowledged message is delivered', async () => {
  const nodes = await startNodes(await server.newDatabase('svc_mn_kill'), 3);
  const deliveries = new Map<string, number>();
  const sink = await startSink((r) => {
    const id = r.headers['upstash-message-id'] as string;
    deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
    return { status: 200, delayMs: 30 };
  });
  try {
    const acked: string[] = [];
    const failures: string[] = [];
    const TOTAL = 600;
    let next = 0;
    let killed = false;
    const victim = nodes[1];
    const publisher = async (p: number) => {
      for (;;) {
        const i = next++;
        if (i >= TOTAL) return;
        if (i === TOTAL / 3 && !killed) {
          killed = true;
          victim.child.kill('SIGKILL');
        }
        const node = nodes[(i + p) % nodes.length];
        try {
          const r = await node.client.publish({ url: `${sink.url}/m/${i}`, body: `m${i}`, retries: 3, retryDelay: '200' });
          acked.push(r.messageId);
        } catch (err) {
          // not acknowledged: only the killed node may refuse
          if (node !== victim) failures.push(String(err));
        }
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, p) => publisher(p)));
    if (victim.child.signalCode === null) await new Promise((r) => victim.child.once('exit', r));
    assert.equal(victim.child.signalCode, 'SIGKILL');
    assert.deepEqual(failures, [], 'the live nodes acknowledge every publish');
    assert.ok(acked.length >= TOTAL / 3, `publishes acknowledged (${acked.length})`);
    await waitFor('every acknowledged message delivered', () => acked.every((id) => deliveries.has(id)), 60_000).catch((err) => {
      throw new Error(`${(err as Error).message}; missing ${acked.filter((id) => !deliveries.has(id)).length} of ${acked.length}`);
    });
    const dups = [...deliveries].filter(([, n]) => n > 1);
    console.log(`multinode kill -9: ${acked.length} acknowledged, ${deliveries.size} delivered, ${dups.length} delivered more than once${dups.length ? ': ' + dups.map(([id, n]) => `${id}x${n}`).join(', ') : ''}`);
    // At-least-once: a message is delivered again only when its delivery was under way on the
    // killed node (the destination got it, the outcome was never recorded): at most that node's
    // concurrent deliveries.
    assert.ok(dups.length <= MAX_CONCURRENT, `duplicates (${dups.length}) only from the killed node's deliveries in flight (at most ${MAX_CONCURRENT})`);
  } finally {
    await stopNodes(nodes);
    await sink.close();
  }
});

test('a parallelism=1 queue fed through three nodes: never two deliveries in flight, FIFO order', async () => {
  const nodes = await startNodes(await server.newDatabase('svc_mn_fifo'), 3);
  let inFlight = 0;
  let maxInFlight = 0;
  const order: number[] = [];
  const sink = await startSink((r) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    order.push(Number(r.body.toString()));
    setTimeout(() => inFlight--, 40);
    return { status: 200, delayMs: 40 };
  });
  try {
    await nodes[0].client.queue({ queueName: 'one' }).upsert({ parallelism: 1 });
    const N = 30;
    for (let i = 0; i < N; i++) await nodes[i % 3].client.queue({ queueName: 'one' }).enqueue({ url: `${sink.url}/q`, body: String(i) });
    await waitFor('every queued message delivered', () => order.length >= N, 60_000);
    assert.equal(maxInFlight, 1, 'never two deliveries of the queue at once');
    assert.deepEqual(order, Array.from({ length: N }, (_, i) => i), 'FIFO across nodes');
  } finally {
    await stopNodes(nodes);
    await sink.close();
  }
});

test('a schedule fires once per due time with three nodes', async () => {
  const dbUrl = await server.newDatabase('svc_mn_sched');
  const nodes = await startNodes(dbUrl, 3);
  const sink = await startSink(() => ({ status: 200 }));
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  try {
    // A cron that never comes due during the test (its own firing at a minute boundary would be
    // an extra delivery); the test makes three due times a second or so apart by moving next_time.
    const { scheduleId } = await nodes[2].client.schedules.create({ destination: `${sink.url}/tick`, cron: '0 0 1 1 *', body: 'tick' });
    for (let tick = 1; tick <= 3; tick++) {
      await db.query('UPDATE schedules SET next_time = $1 WHERE id = $2', [Date.now() + 1000, scheduleId]);
      await waitFor(`firing ${tick}`, () => sink.at('/tick').length >= tick, 15_000);
      await new Promise((r) => setTimeout(r, 1500)); // every node has looked at the schedule by now
      assert.equal(sink.at('/tick').length, tick, `tick ${tick} fired once`);
    }
    const ids = new Set(sink.at('/tick').map((r) => r.headers['upstash-message-id']));
    assert.equal(ids.size, 3);
  } finally {
    await db.end();
    await stopNodes(nodes);
    await sink.close();
  }
});

/**
 * The rate is counted in the database: an admission round counts and records its releases under
 * the admission lock, a claim starts the attempt in the same statement and the outcome's
 * transaction ends it, so a round on any node sees every attempt of the others.
 */
test('a flow-control rate of N per period holds across three nodes', async () => {
  const nodes = await startNodes(await server.newDatabase('svc_mn_rate'), 3);
  const times: number[] = [];
  const sink = await startSink(() => {
    times.push(Date.now());
    return { status: 200 };
  });
  try {
    const RATE = 3;
    const PERIOD_S = 1;
    const N = 15;
    await Promise.all(
      Array.from({ length: N }, (_, i) =>
        nodes[i % 3].client.publish({ url: `${sink.url}/r`, body: String(i), flowControl: { key: 'mn-rate', rate: RATE, period: PERIOD_S } }),
      ),
    );
    await waitFor('every rate-limited message delivered', () => times.length >= N, 60_000);
    times.sort((a, b) => a - b);
    for (let i = RATE; i < times.length; i++) {
      assert.ok(times[i] - times[i - RATE] >= PERIOD_S * 1000 - 50, `at most ${RATE} deliveries in any ${PERIOD_S} s window (delivery ${i}: ${times[i] - times[i - RATE]} ms after delivery ${i - RATE})`);
    }
  } finally {
    await stopNodes(nodes);
    await sink.close();
  }
});

/** The signing keys a node answers (`GET /v2/keys`, raw HTTP: the SDK has no call for it). */
async function keysOf(url: string, token: string): Promise<{ current: string; next: string }> {
  const r = await fetch(`${url}/v2/keys`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()) as { current: string; next: string };
}

test('a signing-key or token rotation on one node takes effect on every node, and survives a restart with the same env', async () => {
  const db = await server.newDatabase('svc_mn_keys');
  const MGMT = { user: 'admin', password: 'multinode-mgmt-password' };
  const env = { SVC_AREAS: 'queue,mgmt', SVC_MGMT_PORT: '0', SVC_MGMT_USER: MGMT.user, SVC_MGMT_PASSWORD: MGMT.password };
  const nodes = await startNodes(db, 2, env);
  const [a, b] = nodes;
  const sink = await startSink();
  try {
    const before = await keysOf(b.url, TOKEN);
    assert.deepEqual(before, { current: KEYS.SVC_QUEUE_CURRENT_SIGNING_KEY, next: KEYS.SVC_QUEUE_NEXT_SIGNING_KEY });

    // rotate on node A (queue API): node B answers the new pair
    const r = await fetch(`${a.url}/v2/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(r.status, 200);
    const rotated = (await r.json()) as { current: string; next: string };
    assert.equal(rotated.current, before.next);
    assert.notEqual(rotated.next, before.next);
    await waitFor('node B answers the rotated keys', async () => JSON.stringify(await keysOf(b.url, TOKEN)) === JSON.stringify(rotated), 15_000);

    // every node signs with the new current key: deliveries published through both nodes (and
    // delivered by either) verify with the new pair and fail with the old current key alone
    const N = 10;
    for (let i = 0; i < N; i++) await nodes[i % 2].client.publishJSON({ url: `${sink.url}/signed`, body: { i } });
    await waitFor('signed deliveries', () => sink.at('/signed').length >= N, 60_000);
    const fresh = new Receiver({ currentSigningKey: rotated.current, nextSigningKey: rotated.next });
    const stale = new Receiver({ currentSigningKey: before.current, nextSigningKey: before.current });
    for (const req of sink.at('/signed')) {
      const signature = String(req.headers['upstash-signature']);
      const body = req.body.toString();
      assert.equal(await fresh.verify({ signature, body, url: `${sink.url}/signed` }), true);
      await assert.rejects(stale.verify({ signature, body, url: `${sink.url}/signed` }), 'signed with the key that was current before the rotation');
    }

    // a token rotation through node A's management API: node B refuses the old token, accepts the new one
    const mgmtUrl = /^mgmt\s+(http:\/\/\S+)/m.exec(a.output())?.[1];
    assert.ok(mgmtUrl, a.output());
    const t = await fetch(`${mgmtUrl}/v2/credentials/queue/token/rotate`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${MGMT.user}:${MGMT.password}`).toString('base64')}` },
    });
    assert.equal(t.status, 200);
    const { token, warnings } = (await t.json()) as { token: string; warnings: string[] };
    assert.deepEqual(warnings, [], 'a shared credential survives restarts: no env-pin warning');
    const bNew = new Client({ baseUrl: b.url, token, retry: false });
    await waitFor('node B accepts the new token', () => bNew.schedules.list().then(() => true, () => false), 15_000);
    await assert.rejects(b.client.schedules.list(), /401|nauthori/);
    await bNew.publishJSON({ url: `${sink.url}/new-token`, body: { ok: true } });
    await waitFor('delivery of a message published with the new token', () => sink.at('/new-token').length === 1, 30_000);

    // node B restarted with the same env (the old token and keys): the rotated values stay in effect
    b.child.kill('SIGTERM');
    await new Promise((res) => b.child.once('exit', res));
    const [b2] = await startNodes(db, 1, env);
    nodes.push(b2);
    assert.deepEqual(await keysOf(b2.url, token), rotated);
    await assert.rejects(b2.client.schedules.list(), /401|nauthori/);
  } finally {
    await stopNodes(nodes);
    await sink.close();
  }
});

test('a node cut off from the database answers 503, its leases lapse to another node, and it resumes when the connection is back', async () => {
  const db = await server.newDatabase('svc_mn_cut');
  const target = new URL(db);
  const proxy = await startTcpProxy(target.hostname, Number(target.port));
  const viaProxy = new URL(db);
  viaProxy.port = String(proxy.port);
  const LEASE_MS = 3000;
  const M = 3;
  // first attempts to /held hang (the cut node's deliveries stay in flight); later ones succeed
  const sink = await startSink((r, nth) => (r.url === '/held' && nth <= M ? { delayMs: 60_000 } : undefined));
  const nodes: Node[] = [];
  try {
    // node A (through the proxy) alone first, so it claims every message
    const [a] = await startNodes(viaProxy.href, 1, { SVC_QUEUE_LEASE_MS: String(LEASE_MS) });
    nodes.push(a);
    const ids: string[] = [];
    for (let i = 0; i < M; i++) ids.push((await a.client.publishJSON({ url: `${sink.url}/held`, body: { i } })).messageId);
    await waitFor('node A delivering every message', () => sink.at('/held').length >= M, 30_000);
    const [b] = await startNodes(db, 1, { SVC_QUEUE_LEASE_MS: String(LEASE_MS) });
    nodes.push(b);

    // a partition: PostgreSQL keeps node A's sessions (and its liveness lock), so only the lapse
    // of the leases hands the messages over
    const cutAt = Date.now();
    proxy.cut('partition');
    // node A cannot commit: a publish is refused with 503 + Retry-After, never acknowledged
    await waitFor(
      'node A answering 503',
      async () => {
        const r = await fetch(`${a.url}/v2/publish/${sink.url}/refused`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: 'x' });
        if (r.status !== 503) return false;
        assert.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After on the 503');
        return true;
      },
      30_000,
    );
    // node B delivers node A's in-flight messages once their leases lapse
    await waitFor('every held message delivered again by node B', () => new Set(sink.at('/held').slice(M).map((r) => r.headers['upstash-message-id'])).size === M, 60_000);
    for (const r of sink.at('/held').slice(M)) {
      assert.ok(ids.includes(String(r.headers['upstash-message-id'])));
      assert.ok(r.time >= cutAt + LEASE_MS / 2, `redelivered only after the lease lapsed (${r.time - cutAt} ms after the cut)`);
    }

    // connection back: node A publishes (and its message is delivered) again
    proxy.restore();
    const again = await waitFor(
      'node A accepting publishes again',
      () => a.client.publishJSON({ url: `${sink.url}/after`, body: { ok: true } }).then((r) => r.messageId, () => undefined),
      60_000,
    );
    await waitFor('delivery of the message published on node A after the cut', () => sink.at('/after').some((r) => r.headers['upstash-message-id'] === again), 30_000);
    // node A's new LISTEN connection holds its liveness lock again (the partitioned session that
    // still held it is ended), instead of waiting for it forever
    const admin = new pg.Client({ connectionString: db });
    await admin.connect();
    try {
      await waitFor(
        'no LISTEN connection waiting for a lock',
        async () => (await admin.query<{ n: number }>(`SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE application_name = 'svc-queue-listen' AND wait_event_type = 'Lock'`)).rows[0].n === 0,
        15_000,
      );
    } finally {
      await admin.end();
    }
    assert.equal(sink.at('/refused').length, 0, 'nothing refused was delivered');
  } finally {
    await stopNodes(nodes);
    await sink.close();
    await proxy.close();
  }
});

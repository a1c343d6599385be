/**
 * Faults of the vector area on PostgreSQL (`SVC_VECTOR_DATABASE_URL`): a node killed with SIGKILL
 * under write load loses no acknowledged write; PostgreSQL stopped under load (writes 503 with
 * `Retry-After`, queries answered from memory, everything back by itself); a node cut off from
 * the database by a TCP proxy (not ready, no writes, catches up when the connection returns).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { Index } from '@upstash/vector';
import { startTestPostgres } from '../helpers/postgres.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';
import { randomVectors, serveVectorChild } from './helpers.js';

const D = 8;
const env = (url: string) => ({ SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: String(D) });

/** An in-process node with the vector and management areas (for `/v2/health`). */
async function pgNode(url: string, dataDir?: string) {
  const svc = await startTestSvc(['vector', 'mgmt'], { env: env(url), dataDir });
  const token = () => svc.ctx.credentials.get('vector.default.token');
  return {
    svc,
    url: svc.urls.vector!,
    client: () => new Index({ url: svc.urls.vector!, token: token(), retry: false, enableTelemetry: false }),
    token,
    health: async () => {
      const r = await fetch(`${svc.urls.mgmt}/v2/health`);
      return { status: r.status, retryAfter: r.headers.get('retry-after'), body: (await r.json()) as { areas: { vector?: string } } };
    },
  };
}

/**
 * A throw-away PostgreSQL cluster, one node connected to it directly (`direct`) and one through a
 * TCP proxy the test can cut (`cut`); `close` stops all of them.
 */
async function nodeBehindProxy() {
  const pg = await startTestPostgres();
  const url = await pg.newDatabase();
  const u = new URL(url);
  const proxy = await startTcpProxy(u.hostname, Number(u.port));
  const viaProxy = new URL(url);
  viaProxy.port = String(proxy.port);
  const direct = await pgNode(url);
  const cut = await pgNode(viaProxy.toString());
  return {
    direct,
    cut,
    proxy,
    async close() {
      await cut.svc.close();
      await direct.svc.close();
      await proxy.close();
      await pg.stop();
    },
  };
}

/** Raw upsert of `ids` (random vectors) on `url`; resolves to the HTTP status and the Retry-After header. */
async function upsert(url: string, token: string, ids: string[], seed: number): Promise<{ status: number; retryAfter: string | null }> {
  const vecs = randomVectors(ids.length, D, seed);
  try {
    const r = await fetch(`${url}/upsert`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(ids.map((id, i) => ({ id, vector: vecs[i] }))),
    });
    await r.arrayBuffer();
    return { status: r.status, retryAfter: r.headers.get('retry-after') };
  } catch {
    return { status: 0, retryAfter: null }; // connection refused or reset: not acknowledged
  }
}

/** Ids of `ids` that `url` does not serve (fetch in pages of 500). */
async function missing(url: string, token: string, ids: string[]): Promise<string[]> {
  const c = new Index({ url, token, retry: false, enableTelemetry: false });
  const out: string[] = [];
  for (let i = 0; i < ids.length; i += 500) {
    const page = ids.slice(i, i + 500);
    const got = await c.fetch(page);
    page.forEach((id, j) => got[j] === null && out.push(id));
  }
  return out;
}

test('SIGKILL of one node under write load on two: every acknowledged write is served by the survivors, the restarted node catches up and answers the same', { timeout: 240_000 }, async () => {
  const pg = await startTestPostgres();
  const dirs = tempDir();
  const url = await pg.newDatabase();
  const c = await pgNode(url);
  const token = c.token();
  const a = await serveVectorChild(path.join(dirs.dir, 'a'), env(url), 120_000);
  const b = await serveVectorChild(path.join(dirs.dir, 'b'), env(url), 120_000);
  let restarted: Awaited<ReturnType<typeof serveVectorChild>> | undefined;
  try {
    const acked: string[] = [];
    let killed = false;
    const writer = async (node: { url: string }, name: string, rounds: number) => {
      for (let r = 0; r < rounds; r++) {
        const ids = Array.from({ length: 10 }, (_, i) => `${name}-${r}-${i}`);
        const res = await upsert(node.url, token, ids, r);
        if (res.status === 200) acked.push(...ids);
        else if (name === 'b' || !killed) assert.fail(`write on ${name} answered ${res.status} before any kill`);
      }
    };
    const loadA = Promise.all([writer(a, 'a1', 80), writer(a, 'a2', 80)]);
    const loadB = Promise.all([writer(b, 'b1', 60), writer(b, 'b2', 60)]);
    await waitFor('writes acknowledged on a', () => acked.filter((id) => id.startsWith('a')).length >= 200, 60_000);
    killed = true;
    a.child.kill('SIGKILL');
    await a.exited();
    await Promise.all([loadA, loadB]);
    assert.ok(acked.length >= 1400, `${acked.length} acknowledged`);

    for (const u of [b.url, c.url]) await waitFor(`every acknowledged write on ${u}`, async () => (await missing(u, token, acked)).length === 0, 60_000);

    restarted = await serveVectorChild(path.join(dirs.dir, 'a'), env(url), 120_000);
    assert.deepEqual(await missing(restarted.url, token, acked), []);
    const total = (await c.client().info()).vectorCount;
    const clients = [restarted.url, b.url, c.url].map((u) => new Index({ url: u, token, retry: false, enableTelemetry: false }));
    for (const cl of clients) await waitFor('same count everywhere', async () => (await cl.info()).vectorCount === total && (await cl.info()).pendingVectorCount === 0, 60_000);
    for (const q of randomVectors(5, D, 99)) {
      const answers = await Promise.all(clients.map((cl) => cl.query({ vector: q, topK: 10 })));
      const ids = answers.map((x) => x.map((h) => h.id));
      assert.deepEqual(ids[0], ids[1]);
      assert.deepEqual(ids[0], ids[2]);
    }
  } finally {
    a.child.kill('SIGKILL');
    b.child.kill('SIGTERM');
    restarted?.child.kill('SIGTERM');
    await Promise.all([a.exited(), b.exited(), restarted?.exited()]);
    await c.svc.close();
    dirs.cleanup();
    await pg.stop();
  }
});

test('PostgreSQL stopped under load: writes 503 with Retry-After, queries answered from memory, the node not ready; all back by itself', { timeout: 240_000 }, async () => {
  const pg = await startTestPostgres({ own: true });
  const url = await pg.newDatabase();
  const n = await pgNode(url);
  try {
    const token = n.token();
    const acked: string[] = [];
    const statuses: { status: number; retryAfter: string | null }[] = [];
    let stop = false;
    let round = 0;
    const load = (async () => {
      while (!stop) {
        const ids = Array.from({ length: 5 }, (_, i) => `w${round}-${i}`);
        const r = await upsert(n.url, token, ids, round++);
        statuses.push(r);
        if (r.status === 200) acked.push(...ids);
        else await new Promise((res) => setTimeout(res, 20));
      }
    })();
    await waitFor('writes before the stop', () => acked.length >= 100, 30_000);
    const q = randomVectors(1, D, 7)[0];
    const before = (await n.client().query({ vector: q, topK: 5 })).map((h) => h.id);
    pg.kill();
    const from = statuses.length;
    await waitFor('writes refused with 503', () => statuses.slice(from).some((s) => s.status === 503), 30_000);
    const refused = statuses.slice(from).filter((s) => s.status === 503);
    assert.ok(refused.every((s) => s.retryAfter !== null), 'every 503 carries Retry-After');
    // queries keep being answered from memory
    for (let i = 0; i < 5; i++) assert.ok((await n.client().query({ vector: q, topK: 5 })).length === 5);
    assert.ok((await n.client().fetch([acked[0]]))[0] !== null);
    await waitFor('not ready while the database is down', async () => {
      const h = await n.health();
      return h.status === 503 && h.retryAfter !== null && h.body.areas.vector === 'down';
    }, 30_000);
    pg.start();
    await waitFor('ready again', async () => (await n.health()).status === 200, 60_000);
    const resumed = acked.length;
    await waitFor('writes acknowledged again', () => acked.length > resumed + 50, 60_000);
    stop = true;
    await load;
    assert.ok(!statuses.some((s) => s.status !== 200 && s.status !== 503), `statuses: ${[...new Set(statuses.map((s) => s.status))]}`);
    // every acknowledged write is in the database: a new node loading it from scratch serves them
    const fresh = await pgNode(url);
    try {
      assert.deepEqual(await missing(fresh.url, token, acked), []);
      assert.deepEqual((await fresh.client().query({ vector: q, topK: 5 })).length, 5);
    } finally {
      await fresh.svc.close();
    }
    assert.equal(before.length, 5);
  } finally {
    await n.svc.close();
    await pg.stop();
  }
});

test('a node cut off from PostgreSQL (TCP proxy) refuses writes and reports not ready; it catches up when the connection returns', { timeout: 240_000 }, async () => {
  const { direct, cut, proxy, close } = await nodeBehindProxy();
  try {
    const token = direct.token();
    assert.equal((await upsert(cut.url, token, ['before'], 1)).status, 200);
    assert.equal((await cut.health()).status, 200);
    proxy.cut('partition');
    await waitFor('a write on the cut node refused with 503', async () => (await upsert(cut.url, token, ['during-cut'], 2)).status === 503, 30_000);
    await waitFor('the cut node not ready', async () => (await cut.health()).status === 503, 30_000);
    // the other node keeps writing (a lock the cut node held ends with its session, at most ~10 s)
    const ids = Array.from({ length: 50 }, (_, i) => `while-cut-${i}`);
    await waitFor('writes on the connected node', async () => (await upsert(direct.url, token, ids, 3)).status === 200, 60_000);
    // the cut node still answers queries from memory
    assert.ok((await cut.client().fetch(['before']))[0] !== null);
    proxy.restore();
    await waitFor('the cut node ready again', async () => (await cut.health()).status === 200, 60_000);
    await waitFor('the cut node caught up', async () => (await missing(cut.url, token, ids)).length === 0, 60_000);
    assert.equal((await upsert(cut.url, token, ['after'], 4)).status, 200);
    await waitFor('the write of the restored node on the other', async () => (await missing(direct.url, token, ['after'])).length === 0, 30_000);
    assert.deepEqual(await missing(direct.url, token, ['during-cut']), ['during-cut'], 'a refused write is not stored');
  } finally {
    await close();
  }
});

test('a network that silently drops the packets to PostgreSQL: writes answer 503 within the statement limit, the node reports not ready; all resumes when it heals', { timeout: 240_000 }, async () => {
  const { direct, cut, proxy, close } = await nodeBehindProxy();
  try {
    const token = direct.token();
    assert.equal((await upsert(cut.url, token, ['before'], 1)).status, 200);
    proxy.cut('silent');
    const t0 = performance.now();
    const refused = await upsert(cut.url, token, ['during'], 2);
    assert.equal(refused.status, 503);
    assert.ok(refused.retryAfter !== null);
    // bounded by QUERY_TIMEOUT_MS (15 s), with room for the loaded machine
    assert.ok(performance.now() - t0 < 60_000, `refused after ${performance.now() - t0} ms`);
    await waitFor('the silent node not ready', async () => (await cut.health()).status === 503, 30_000);
    assert.ok((await cut.client().fetch(['before']))[0] !== null, 'reads from memory meanwhile');
    await waitFor('writes on the connected node', async () => (await upsert(direct.url, token, ['other'], 3)).status === 200, 60_000);
    proxy.restore();
    await waitFor('ready again', async () => (await cut.health()).status === 200, 60_000);
    await waitFor('caught up', async () => (await missing(cut.url, token, ['other'])).length === 0, 60_000);
    assert.equal((await upsert(cut.url, token, ['after'], 4)).status, 200);
    // the refused write may have reached the database late only if it was committed there; either
    // way every node serves the same
    const a = await missing(direct.url, token, ['during']);
    await waitFor('both nodes agree on the refused write', async () => JSON.stringify(await missing(cut.url, token, ['during'])) === JSON.stringify(a), 30_000);
  } finally {
    await close();
  }
});

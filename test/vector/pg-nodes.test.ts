/**
 * The vector area on PostgreSQL (`SVC_VECTOR_DATABASE_URL`): several svc nodes on one database,
 * each serving every index from its own memory, through the official `@upstash/vector` SDK —
 * writes spread over the nodes, a node joining late and one restarting on its cache, a
 * resumable query continued on other nodes, a token rotation reaching every node, conflicting
 * definitions and the start-up errors.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Index } from '@upstash/vector';
import { startTestPostgres, withPg, type TestPostgres } from '../helpers/postgres.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { account, basic, mgmt } from '../mgmt/helpers.js';
import { cli } from '../ops/backup-helpers.js';
import { randomVectors, raw, serveVectorChild, startVector } from './helpers.js';

let pg: TestPostgres;
before(async () => {
  pg = await startTestPostgres();
});
after(async () => {
  await pg?.stop();
});

type Node = Awaited<ReturnType<typeof startVector>>;

const BOOKS = { name: 'books', type: 'DENSE', dimension: 8, metric: 'EUCLIDEAN' };

/** A node on database `url` (schema public), dimension 8, with the `books` index too. */
function node(url: string, opts: { dataDir?: string; env?: Record<string, string> } = {}): Promise<Node> {
  return startVector([BOOKS], { dataDir: opts.dataDir, env: { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8', ...opts.env } });
}

/** Waits until `info()` of every node shows `count` vectors and no pending one. */
async function caughtUp(nodes: Node[], count: number, index = 'default'): Promise<void> {
  for (const n of nodes) {
    await waitFor(`${count} vectors on ${n.urls.vector}`, async () => {
      const i = await n.client(index).info();
      return i.vectorCount === count && i.pendingVectorCount === 0;
    }, 60_000);
  }
}

/** Ids of the exact top 10 on every node, asserted equal; returns them. */
async function sameAnswers(nodes: Node[], vector: number[], index = 'default', filter?: string): Promise<string[]> {
  const answers = await Promise.all(nodes.map((n) => n.client(index).query({ vector, topK: 10, filter })));
  const ids = answers.map((a) => a.map((r) => String(r.id)));
  for (let i = 1; i < ids.length; i++) assert.deepEqual(ids[i], ids[0], `node ${i} answers like node 0`);
  return ids[0];
}

test('three nodes: SDK writes spread over every node, the same answers everywhere once caught up, a late joiner and a restart on its cache', async () => {
  const url = await pg.newDatabase();
  const keep = tempDir();
  const nodes = [await node(url), await node(url), await node(url, { dataDir: keep.dir })];
  let late: Node | undefined;
  let restarted: Node | undefined;
  try {
    const vecs = randomVectors(400, 8, 1);
    // every node takes writes: upserts, updates, deletes, a namespace, and another index
    await Promise.all(vecs.map((v, i) => nodes[i % 3].client().upsert({ id: `v${i}`, vector: v, metadata: { i, even: i % 2 === 0 } })));
    await Promise.all(vecs.slice(0, 60).map((v, i) => nodes[(i + 1) % 3].client().upsert({ id: `b${i}`, vector: v }, { namespace: 'ns1' })));
    await Promise.all(vecs.slice(0, 30).map((v, i) => nodes[(i + 2) % 3].client('books').upsert({ id: `k${i}`, vector: v, data: `book ${i}` })));
    await nodes[1].client().delete(['v0', 'v1', 'v2']);
    await nodes[2].client().update({ id: 'v3', metadata: { i: 3, even: false, changed: true } });
    await caughtUp(nodes, 457); // every namespace: 397 + 60
    await caughtUp(nodes, 30, 'books');

    const queries = randomVectors(6, 8, 2);
    for (const q of queries) {
      await sameAnswers(nodes, q);
      await sameAnswers(nodes, q, 'default', 'even = true');
      await sameAnswers(nodes, q, 'books');
    }
    // the same positions everywhere: range pages agree record for record
    const ranges = await Promise.all(nodes.map((n) => n.client().range({ cursor: 0, limit: 1000, includeMetadata: true })));
    for (const r of ranges.slice(1)) assert.deepEqual(r, ranges[0]);
    const infos = await Promise.all(nodes.map((n) => n.client().info()));
    for (const i of infos.slice(1)) assert.deepEqual(i.namespaces, infos[0].namespaces);
    assert.equal(infos[0].namespaces.ns1.vectorCount, 60);
    for (const n of nodes) assert.deepEqual((await n.client().fetch(['v3'], { includeMetadata: true }))[0]?.metadata, { i: 3, even: false, changed: true });
    // vectors, metadata and data arrive bit for bit on the nodes that did not take the write
    for (const n of nodes) {
      const [r] = await n.client().fetch(['v7'], { includeVectors: true, includeMetadata: true });
      assert.deepEqual(r?.vector?.map((x) => Math.fround(x)), Array.from(Float32Array.from(vecs[7])));
      const [k] = await n.client('books').fetch(['k4'], { includeData: true });
      assert.equal(k?.data, 'book 4');
    }
    // reset and namespace deletion reach every node
    await nodes[0].client().deleteNamespace('ns1');
    await nodes[2].client('books').reset();
    for (const n of nodes) {
      await waitFor('namespace deleted and books reset everywhere', async () => {
        const [a, b] = await Promise.all([n.client().listNamespaces(), n.client('books').info()]);
        return !a.includes('ns1') && b.vectorCount === 0;
      }, 60_000);
    }

    // a node joining late, from an empty data dir, serves the same answers; it serves `books`
    // too, with the definition and tokens the database has, though its own definitions lack it
    late = await startVector([], { env: { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8' } });
    await caughtUp([late], 397);
    assert.equal(late.token('books'), nodes[0].token('books'));
    const books = await late.client('books').info();
    assert.deepEqual([books.dimension, books.similarityFunction, books.vectorCount], [8, 'EUCLIDEAN', 0]);
    for (const q of queries) await sameAnswers([nodes[0], late], q);

    // a node stopped, written around, and restarted on its data dir catches up from its cache
    await nodes[2].close();
    nodes.pop();
    await nodes[0].client().upsert(vecs.slice(0, 20).map((v, i) => ({ id: `after${i}`, vector: v })));
    restarted = await node(url, { dataDir: keep.dir });
    await caughtUp([nodes[0], nodes[1], late, restarted], 417);
    for (const q of queries) await sameAnswers([nodes[0], restarted], q);
    assert.deepEqual((await restarted.client().range({ cursor: 0, limit: 1000 })).vectors.map((r) => r.id), (await nodes[0].client().range({ cursor: 0, limit: 1000 })).vectors.map((r) => r.id));
  } finally {
    for (const n of [...nodes, late, restarted]) await n?.close();
    keep.cleanup();
  }
});

test('a write is visible to the next query on the node that took it; other nodes follow within a bound', async () => {
  const url = await pg.newDatabase();
  const [a, b] = [await node(url), await node(url)];
  try {
    const vecs = randomVectors(50, 8, 3);
    const lags: number[] = [];
    for (let i = 0; i < vecs.length; i++) {
      await a.client().upsert({ id: `r${i}`, vector: vecs[i] });
      const t = performance.now();
      assert.equal((await a.client().fetch([`r${i}`]))[0]?.id, `r${i}`, 'read-your-writes on the writing node');
      await waitFor(`r${i} on the other node`, async () => (await b.client().fetch([`r${i}`]))[0]?.id === `r${i}`, 30_000);
      lags.push(performance.now() - t);
    }
    lags.sort((x, y) => x - y);
    // bound-based: the follower is notified (LISTEN/NOTIFY), not waiting for the 1 s poll
    assert.ok(lags[Math.floor(lags.length / 2)] < 1000, `median follower lag ${lags[Math.floor(lags.length / 2)]} ms`);
  } finally {
    await a.close();
    await b.close();
  }
});

test('a resumable query started on one node is continued and ended on others (no sticky sessions), with index isolation', async () => {
  const url = await pg.newDatabase();
  const nodes = [await node(url), await node(url), await node(url)];
  try {
    const vecs = randomVectors(100, 8, 4);
    await nodes[0].client().upsert(vecs.map((v, i) => ({ id: `r${i}`, vector: v })));
    await caughtUp(nodes, 100);
    const q = randomVectors(1, 8, 5)[0];
    const started = await raw(`${nodes[0].indexUrl()}/resumable-query`, nodes[0].token(), JSON.stringify({ vector: q, topK: 5 }));
    assert.equal(started.status, 200);
    const { uuid, scores } = started.body.result;
    const seen = scores.map((r: { id: string }) => r.id);
    const next1 = await raw(`${nodes[1].indexUrl()}/resumable-query-next`, nodes[1].token(), JSON.stringify({ uuid, additionalK: 5 }));
    assert.equal(next1.status, 200);
    const next2 = await raw(`${nodes[2].indexUrl()}/resumable-query-next`, nodes[2].token(), JSON.stringify({ uuid, additionalK: 5 }));
    const all = [...seen, ...next1.body.result.map((r: { id: string }) => r.id), ...next2.body.result.map((r: { id: string }) => r.id)];
    assert.equal(all.length, 15);
    assert.equal(new Set(all).size, 15, 'no id twice across the nodes');
    // the same 15 as one query for the top 15
    const top15 = (await nodes[1].client().query({ vector: q, topK: 15 })).map((r) => r.id);
    assert.deepEqual(new Set(all), new Set(top15));
    // another index's token does not reach the session
    const other = await raw(`${nodes[1].indexUrl('books')}/resumable-query-next`, nodes[1].token('books'), JSON.stringify({ uuid, additionalK: 5 }));
    assert.equal(other.status, 400);
    const end = await raw(`${nodes[2].indexUrl()}/resumable-query-end`, nodes[2].token(), JSON.stringify({ uuid }));
    assert.deepEqual([end.status, end.body.result], [200, 'Success']);
    const gone = await raw(`${nodes[0].indexUrl()}/resumable-query-next`, nodes[0].token(), JSON.stringify({ uuid, additionalK: 5 }));
    assert.equal(gone.status, 400);
    // through the SDK behind a round-robin balancer: start, next and stop each on another node
    const served: string[] = [];
    let turn = 0;
    const lb = http.createServer(async (req, res) => {
      const target = nodes[turn++ % nodes.length].urls.vector!;
      served.push(target);
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const r = await fetch(target + req.url, { method: req.method, headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' }, body: chunks.length ? Buffer.concat(chunks) : undefined });
      res.writeHead(r.status, { 'content-type': 'application/json' });
      res.end(Buffer.from(await r.arrayBuffer()));
    });
    await new Promise<void>((r) => lb.listen(0, '127.0.0.1', r));
    try {
      const sdk = new Index({ url: `http://127.0.0.1:${(lb.address() as AddressInfo).port}`, token: nodes[0].token(), retry: false, enableTelemetry: false });
      const { result, fetchNext, stop } = await sdk.resumableQuery({ vector: q, topK: 5, maxIdle: 60 });
      const more = await fetchNext(5);
      const rest = await fetchNext(5);
      await stop();
      const ids = [...result, ...more, ...rest].map((r) => String(r.id));
      assert.deepEqual(new Set(ids), new Set(top15));
      assert.equal(new Set(served.slice(0, 4)).size, 3, 'the four calls went to all three nodes');
    } finally {
      lb.close();
    }
  } finally {
    for (const n of nodes) await n.close();
  }
});

test('a token rotation through the management API of one node is refused on every node; the tokens are shared', async () => {
  const url = await pg.newDatabase();
  const env = { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8' };
  const a = await startTestSvc(['vector', 'mgmt'], { env });
  const b = await node(url);
  const c = await node(url);
  try {
    // one token for every node, whatever each node generated for itself
    const token = a.ctx.credentials.get('vector.default.token');
    for (const n of [b, c]) await waitFor('the shared token on every node', () => n.token() === token, 10_000);
    await new Index({ url: b.indexUrl(), token, retry: false, enableTelemetry: false }).upsert({ id: 'x', vector: [1, 2, 3, 4, 5, 6, 7, 8] });
    const { user, password } = account(a);
    const res = await fetch(`${a.urls.mgmt}/v2/credentials/vector/default/rotate`, { method: 'POST', headers: { authorization: basic(user, password) } });
    assert.equal(res.status, 200);
    const rotated = (await res.json()) as { token: string };
    const t0 = performance.now();
    for (const n of [b, c]) {
      await waitFor('the old token refused on every node', async () => (await raw(`${n.indexUrl()}/info`, token, undefined, 'GET')).status === 401, 10_000);
      assert.equal((await raw(`${n.indexUrl()}/info`, rotated.token, undefined, 'GET')).status, 200);
    }
    // NOTIFY reaches the nodes at once; the re-read every 2 s is the fallback
    assert.ok(performance.now() - t0 < 5000, `rotation reached every node in ${performance.now() - t0} ms`);
  } finally {
    await a.close();
    await b.close();
    await c.close();
  }
});

test('a second node with a conflicting definition of an index stops at start-up with a clear error; nothing changed', async () => {
  const url = await pg.newDatabase();
  const a = await node(url);
  const dir = tempDir();
  try {
    await a.client('books').upsert({ id: 'k', vector: [1, 2, 3, 4, 5, 6, 7, 8] });
    const cfg = path.join(dir.dir, 'indexes.json');
    fs.writeFileSync(cfg, JSON.stringify([{ ...BOOKS, metric: 'COSINE' }]));
    await assert.rejects(
      serveVectorChild(path.join(dir.dir, 'data'), { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8', SVC_VECTOR_INDEXES: cfg }),
      (err: Error) => /svc exited 2/.test(err.message) && /index books/.test(err.message) && /SVC_VECTOR_INDEXES/.test(err.message),
    );
    const stored = await withPg(url, (c) => c.query("SELECT definition->>'metric' AS metric FROM vector_indexes WHERE name = 'books'"));
    assert.equal(stored.rows[0].metric, 'EUCLIDEAN');
    assert.equal((await a.client('books').info()).vectorCount, 1);
  } finally {
    await a.close();
    dir.cleanup();
  }
});

test('start-up errors name SVC_VECTOR_DATABASE_URL without its password (exit code 2); a newer schema is refused', async () => {
  const dir = tempDir();
  try {
    const good = new URL(await pg.newDatabase());
    const wrong = new URL(good);
    wrong.password = 'not-the-password-9f3a';
    await assert.rejects(serveVectorChild(path.join(dir.dir, 'a'), { SVC_VECTOR_DATABASE_URL: wrong.toString() }), (err: Error) => {
      assert.match(err.message, /svc exited 2/);
      assert.match(err.message, /SVC_VECTOR_DATABASE_URL/);
      assert.match(err.message, /authentication failed/);
      assert.doesNotMatch(err.message, /not-the-password-9f3a/);
      return true;
    });
    await assert.rejects(serveVectorChild(path.join(dir.dir, 'b'), { SVC_VECTOR_DATABASE_URL: 'mysql://x@y/z' }), /SVC_VECTOR_DATABASE_URL: expected a postgres:\/\/ or postgresql:\/\/ URL/);
    // migrated once, then marked as written by a newer svc
    const first = await serveVectorChild(path.join(dir.dir, 'c'), { SVC_VECTOR_DATABASE_URL: good.toString() }, 120_000);
    first.child.kill('SIGTERM');
    await first.exited();
    await withPg(good.toString(), (c) => c.query('INSERT INTO svc_vector_schema (version, applied_at) VALUES (999, 0)'));
    await assert.rejects(serveVectorChild(path.join(dir.dir, 'c'), { SVC_VECTOR_DATABASE_URL: good.toString() }), /svc exited 2.*vector database schema version 999 is newer than this svc supports/s);
  } finally {
    dir.cleanup();
  }
});

test('a data dir holding the SQLite store is neither emptied nor used as a cache: start-up stops (exit code 2) and the file is kept', async () => {
  const url = await pg.newDatabase();
  const dir = tempDir();
  try {
    const sqlite = await startVector([], { dataDir: dir.dir, env: { SVC_VECTOR_DATABASE_URL: '', SVC_VECTOR_DIMENSION: '8' } });
    await sqlite.client().upsert({ id: 'kept', vector: [1, 2, 3, 4, 5, 6, 7, 8] });
    await sqlite.close();
    await assert.rejects(
      serveVectorChild(dir.dir, { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DIMENSION: '8' }),
      (err: Error) => /svc exited 2/.test(err.message) && /holds the records of index default from the SQLite store/.test(err.message),
    );
    fs.rmSync(path.join(dir.dir, 'svc.lock'), { force: true });
    const again = await startVector([], { dataDir: dir.dir, env: { SVC_VECTOR_DATABASE_URL: '', SVC_VECTOR_DIMENSION: '8' } });
    try {
      assert.equal((await again.client().fetch(['kept']))[0]?.id, 'kept');
    } finally {
      await again.close();
    }
  } finally {
    dir.cleanup();
  }
});

test('svc env and the banner list the indexes created through the management API with the database\'s tokens; an unreachable database is said', async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  const env = { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8' };
  const a = await startTestSvc(['vector', 'mgmt'], { env });
  let b: Awaited<ReturnType<typeof serveVectorChild>> | undefined;
  try {
    const made = (
      await mgmt(a, '/v2/vector/index', { method: 'POST', body: JSON.stringify({ name: 'made-there', similarity_function: 'COSINE', dimension_count: 2 }), headers: { 'content-type': 'application/json' } })
    ).body as { id: string; token: string };
    // another data dir (a node that never ran): the database's indexes and tokens
    const out = await cli(['env'], { SVC_DATA_DIR: path.join(dirs.dir, 'env'), SVC_AREAS: 'vector', SVC_VECTOR_PORT: '8099', ...env });
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, new RegExp(`^SVC_VECTOR_MADE_THERE_URL=http://[^/]+:8099/${made.id}$`, 'm'));
    assert.match(out.stdout, new RegExp(`^SVC_VECTOR_MADE_THERE_TOKEN=${made.token}$`, 'm'));
    assert.match(out.stdout, new RegExp(`^UPSTASH_VECTOR_REST_TOKEN=${a.ctx.credentials.get('vector.default.token')}$`, 'm'));
    // the banner of a second node lists it too
    b = await serveVectorChild(path.join(dirs.dir, 'b'), env, 120_000);
    assert.match(b.stdout(), new RegExp(`index made-there: ${b.url}/${made.id} \\(DENSE, COSINE, dimension 2\\) token ${made.token} `));
    // an unreachable database: said on stderr (without the password), the configured indexes still printed
    const down = new URL(url);
    down.port = String(await closedPort());
    down.password = 'secret-pw';
    const bad = await cli(['env'], { SVC_DATA_DIR: path.join(dirs.dir, 'env2'), SVC_AREAS: 'vector', ...env, SVC_VECTOR_DATABASE_URL: down.toString() });
    assert.equal(bad.code, 0, bad.stderr);
    assert.match(bad.stderr, /vector: the indexes created through the management API are not listed .*SVC_VECTOR_DATABASE_URL .*unreachable/);
    assert.doesNotMatch(bad.stderr + bad.stdout, /secret-pw/);
    assert.match(bad.stdout, /^UPSTASH_VECTOR_REST_URL=/m);
  } finally {
    b?.child.kill('SIGTERM');
    await b?.exited();
    await a.close();
    dirs.cleanup();
  }
});

/** A local TCP port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

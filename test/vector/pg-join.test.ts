/**
 * A node joining the PostgreSQL store (`SVC_VECTOR_DATABASE_URL`) with an empty data dir starts
 * from the copy of the cache another node published (`SVC_VECTOR_PUBLISH_MS`, store-pg.ts
 * `publish`/`download`) instead of rebuilding the graphs, and applies the changes after it; a
 * publication of another incarnation of the index, of an older namespace generation (a reset), or
 * one that is incomplete or damaged (a chunk missing, as a publisher killed mid-upload leaves it; a
 * chunk altered or cut short, a row whose recorded expectations — dimension, namespace ids and
 * generations, against which the joiner loads each graph while the SQLite copy still downloads —
 * disagree with the graph files or the SQLite copy) is not loaded: the joiner rebuilds and
 * answers the same (the same vectors too). The
 * downloaded files are fsynced after the node is ready: a cache whose fsync did not complete (its
 * marker `<index>.unsynced` still there) is discarded at the next start and downloaded again.
 * Real svc processes, a real PostgreSQL cluster.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Index } from '@upstash/vector';
import pgLib from 'pg';
import Database from 'better-sqlite3';
import { FILL_LOCK_CLASS, PUBLISH_LOCK_CLASS } from '../../src/vector/engine/store-pg.js';
import { startTestPostgres, withPg, type TestPostgres } from '../helpers/postgres.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { mgmt } from '../mgmt/helpers.js';
import { postBackup } from '../ops/backup-helpers.js';
import { waitFor } from '../helpers/wait.js';
import { randomVectors, serveVectorChild } from './helpers.js';

let pg: TestPostgres;
before(async () => {
  pg = await startTestPostgres();
});
after(async () => {
  await pg?.stop();
});

const TOKEN = 'join-test-token';
type Child = Awaited<ReturnType<typeof serveVectorChild>>;

/** A node on database `url` (dimension 8, info logs), publishing every `publishMs` (0 = never); `env` added. */
function node(dir: string, url: string, publishMs: number, env: Record<string, string> = {}): Promise<Child> {
  return serveVectorChild(
    dir,
    {
      SVC_VECTOR_DATABASE_URL: url,
      SVC_VECTOR_DATABASE_SCHEMA: 'public',
      SVC_VECTOR_DIMENSION: '8',
      SVC_VECTOR_TOKEN: TOKEN,
      SVC_VECTOR_PUBLISH_MS: String(publishMs),
      SVC_LOG_LEVEL: 'info',
      ...env,
    },
    120_000,
  );
}

const client = (n: Child) => new Index({ url: n.url, token: TOKEN, retry: false, enableTelemetry: false });

/** The log lines (pino JSON) of `n` with message `msg` for index `index`. */
function lines(n: Child, msg: string, index = 'default'): Record<string, unknown>[] {
  return n
    .log()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg && l.index === index);
}

/** Waits until the database holds a publication of `index` covering the index's sequence number. */
async function published(url: string, index = 'default'): Promise<number> {
  let seq = 0;
  await waitFor('a publication covering every change', () =>
    withPg(url, async (c) => {
      const r = await c.query<{ p: string | null; s: string }>(
        'SELECT (SELECT p.seq FROM vector_publications p WHERE p.index_name = i.name AND p.incarnation = i.incarnation) AS p, i.seq AS s FROM vector_indexes i WHERE i.name = $1',
        [index],
      );
      seq = Number(r.rows[0].p ?? -1);
      return r.rows[0].p !== null && Number(r.rows[0].p) >= Number(r.rows[0].s);
    }),
  120_000);
  return seq;
}

/** Waits until `n` shows `count` vectors, none pending. */
async function caughtUp(n: Child, count: number): Promise<void> {
  await waitFor(`${count} vectors on ${n.url}`, async () => {
    const i = await client(n).info();
    return i.vectorCount === count && i.pendingVectorCount === 0;
  }, 60_000);
}

/** The exact top-10 ids of `q` on every node (namespaces '' and 'ns1'), asserted equal. */
async function sameAnswers(nodes: Child[], queries: number[][]): Promise<void> {
  for (const q of queries) {
    for (const namespace of ['', 'ns1']) {
      const answers = await Promise.all(nodes.map((n) => client(n).namespace(namespace).query({ vector: q, topK: 10, includeMetadata: true })));
      const ids = answers.map((a) => a.map((r) => `${r.id}:${JSON.stringify(r.metadata)}`));
      for (let i = 1; i < ids.length; i++) assert.deepEqual(ids[i], ids[0], `node ${i} answers like node 0 (namespace '${namespace}')`);
    }
  }
}

/** Asserts how `n` loaded index default: from the published snapshot (graphs loaded) or not (rebuilt). */
async function assertJoined(n: Child, fromPublication: boolean): Promise<void> {
  // the log (stderr) may arrive after the banner (stdout): two pipes, no order between them
  await waitFor('the index loaded (log)', () => lines(n, 'vector index loaded').length > 0, 30_000);
  const loaded = lines(n, 'vector index loaded');
  assert.equal(loaded.length, 1, n.log());
  const fetched = lines(n, 'vector index fetched from the published snapshot');
  if (fromPublication) {
    assert.equal(fetched.length, 1, `the joiner downloaded the publication: ${n.log()}`);
    assert.equal(loaded[0].rebuilt, 0, `no graph rebuilt: ${JSON.stringify(loaded[0])}`);
    assert.equal(loaded[0].fromSnapshot, 2, `both namespaces' graphs loaded: ${JSON.stringify(loaded[0])}`);
    // each graph was read as soon as its files were downloaded, while the SQLite copy still
    // downloaded and then the record heads were read
    assert.equal(fetched[0].graphsLoading, 2, JSON.stringify(fetched[0]));
    await waitFor('the graphs loaded (log)', () => lines(n, 'vector index published graphs loaded').length === 1, 30_000);
    assert.equal(lines(n, 'vector index published graphs loaded')[0].graphsLoaded, 2);
    assert.equal(loaded[0].loadedWhileDownloading, 2, JSON.stringify(loaded[0]));
  } else {
    assert.ok(Number(loaded[0].rebuilt) >= 1, `the graph was rebuilt: ${JSON.stringify(loaded[0])}`);
  }
}

/** Holds the publication lock of index `default` (no node publishes) until the returned function is called. */
async function holdPublishLock(url: string): Promise<() => Promise<void>> {
  const c = new pgLib.Client({ connectionString: url });
  c.on('error', () => undefined); // the cluster stopping at the end of a failed test
  await c.connect();
  await c.query("SELECT pg_advisory_lock($1, hashtext('default'))", [PUBLISH_LOCK_CLASS]);
  let ended: Promise<void> | undefined;
  return () => (ended ??= c.end());
}

/** Holds the fill lock of `index` (every node's background fill of its vectors pauses) until the returned function is called. */
async function holdFillLock(url: string, index = 'default'): Promise<() => Promise<void>> {
  const c = new pgLib.Client({ connectionString: url });
  c.on('error', () => undefined); // the cluster stopped by the test
  await c.connect();
  await c.query('SELECT pg_advisory_lock($1, hashtext($2))', [FILL_LOCK_CLASS, index]);
  let ended: Promise<void> | undefined;
  return () => (ended ??= c.end().catch(() => undefined));
}

type Stored = { vector?: number[]; metadata?: unknown };

/** Every record of `namespace` on `n` with vectors and metadata (range, pages of 100), by id. */
async function allRecords(n: Child, namespace: string): Promise<Map<string, Stored>> {
  const out = new Map<string, Stored>();
  let cursor: string | number = 0;
  do {
    const page: { nextCursor: string; vectors: { id: string | number; vector?: number[]; metadata?: unknown }[] } = await client(n)
      .namespace(namespace)
      .range({ cursor, limit: 100, includeVectors: true, includeMetadata: true });
    for (const r of page.vectors) out.set(String(r.id), { vector: r.vector, metadata: r.metadata });
    cursor = page.nextCursor;
  } while (cursor !== '');
  return out;
}

/** Asserts that `b` serves the same records, vectors and metadata as `a` in namespaces '' and 'ns1'. */
async function sameRecords(a: Child, b: Child, what: string): Promise<void> {
  for (const namespace of ['', 'ns1']) {
    const [ra, rb] = [await allRecords(a, namespace), await allRecords(b, namespace)];
    assert.ok([...ra.values()].every((r) => r.vector?.length === 8), `every record has its vector on the serving node (${what})`);
    assert.deepEqual(rb, ra, `${what}, namespace '${namespace}'`);
  }
}

/**
 * The SQLite copy of the current publication of `default` (assembled from its chunks into `dir`),
 * opened read-only, and the sequence number each published graph snapshot covers, by namespace id.
 */
async function publishedCopy(url: string, dir: string): Promise<{ name: string; db: Database.Database; graphs: Map<number, number> }> {
  return withPg(url, async (c) => {
    const p = (await c.query<{ id: string; files: { name: string }[] }>("SELECT id, files FROM vector_publications WHERE index_name = 'default'")).rows[0];
    const file = async (name: string) =>
      Buffer.concat((await c.query<{ data: Buffer }>('SELECT data FROM vector_publication_chunks WHERE publication = $1 AND file = $2 ORDER BY no', [p.id, name])).rows.map((r) => r.data));
    const name = p.files.map((f) => f.name).find((f) => f.startsWith('cache'))!;
    const graphs = new Map<number, number>();
    for (const f of p.files.map((x) => x.name).filter((x) => /^snapshots\/ns-\d+\.json$/.test(x))) {
      graphs.set(Number(/\d+/.exec(f)![0]), (JSON.parse((await file(f)).toString('utf8')) as { seq: number }).seq);
    }
    const copy = path.join(dir, 'copy.sqlite');
    fs.writeFileSync(copy, await file(name));
    return { name, db: new Database(copy, { readonly: true }), graphs };
  });
}

async function stop(...nodes: (Child | undefined)[]): Promise<void> {
  for (const n of nodes) {
    if (!n) continue;
    n.child.kill('SIGTERM');
    await n.exited();
  }
}

/** Writes `vecs` as `<prefix><i>` into namespaces '' and 'ns1' (every third), deletes a few. */
async function write(n: Child, vecs: number[][], prefix: string): Promise<void> {
  const c = client(n);
  for (let b = 0; b < vecs.length; b += 50) {
    await c.upsert(vecs.slice(b, b + 50).map((v, i) => ({ id: `${prefix}${b + i}`, vector: v, metadata: { i: b + i, prefix } })));
  }
  await c.namespace('ns1').upsert(vecs.filter((_, i) => i % 3 === 0).map((v, i) => ({ id: `${prefix}n${i}`, vector: v })));
  await c.delete([`${prefix}0`, `${prefix}1`]);
}

test('a node joining with an empty data dir starts from the published snapshot and applies the changes after it', async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  let a: Child | undefined;
  let b: Child | undefined;
  try {
    a = await node(path.join(dirs.dir, 'a'), url, 300);
    await write(a, randomVectors(600, 8, 1), 'v');
    const at = await published(url);
    assert.ok(at > 0);
    // changes after the publication: the joiner applies them from the change log
    await write(a, randomVectors(90, 8, 2), 'late');
    await client(a).update({ id: 'v5', metadata: { changed: true } });
    b = await node(path.join(dirs.dir, 'b'), url, 0);
    await assertJoined(b, true);
    const fetched = lines(b, 'vector index fetched from the published snapshot')[0];
    assert.ok(Number(fetched.seq) >= at && Number(fetched.bytes) > 0, JSON.stringify(fetched));
    const count = 598 + 200 + 88 + 30;
    await caughtUp(a, count);
    await caughtUp(b, count);
    await sameAnswers([a, b], randomVectors(8, 8, 3));
    assert.deepEqual((await client(b).fetch(['v5'], { includeMetadata: true }))[0]?.metadata, { changed: true });
    // the same vectors: records from the copy, from the changes after it, in both namespaces
    const sample: [string, string[]][] = [['', ['v2', 'v5', 'v333', 'v599', 'late3', 'late89']], ['ns1', ['vn0', 'vn57', 'vn199', 'laten29']]];
    for (const [namespace, ids] of sample) {
      const fa: ({ vector?: number[] } | null)[] = await client(a).namespace(namespace).fetch(ids, { includeVectors: true, includeMetadata: true });
      const fb: typeof fa = await client(b).namespace(namespace).fetch(ids, { includeVectors: true, includeMetadata: true });
      assert.ok(fa.every((r) => r?.vector?.length === 8), JSON.stringify(fa));
      assert.deepEqual(fb, fa, `namespace '${namespace}'`);
    }
    // both nodes keep taking writes
    await client(b).upsert({ id: 'from-b', vector: randomVectors(1, 8, 4)[0] });
    await caughtUp(a, count + 1);

    // the download is fsynced after the node became ready; its marker is then removed
    const marker = path.join(dirs.dir, 'b', 'vector', 'default.unsynced');
    await waitFor('the downloaded cache synced to disk', () => lines(b!, 'vector index download synced to disk').length === 1, 60_000);
    assert.equal(fs.existsSync(marker), false);
    await stop(b);
    // a restart on a synced cache uses it (no download)
    b = await node(path.join(dirs.dir, 'b'), url, 0);
    await waitFor('the index loaded (log)', () => lines(b!, 'vector index loaded').length > 0, 30_000);
    assert.equal(lines(b, 'vector index fetched from the published snapshot').length, 0, b.log());
    assert.equal(lines(b, 'vector index cache caught up from PostgreSQL').length, 1, b.log());
    await caughtUp(b, count + 1);
    await stop(b);
    // a cache whose fsync did not complete (the process stopped before: the marker is still
    // there) is not trusted: discarded and downloaded again
    fs.writeFileSync(marker, '');
    b = await node(path.join(dirs.dir, 'b'), url, 0);
    await assertJoined(b, true);
    assert.equal(lines(b, 'vector: the downloaded cache was not synced to disk before the process stopped: discarded').length, 1, b.log());
    await caughtUp(b, count + 1);
    await sameAnswers([a, b], randomVectors(4, 8, 5));
  } finally {
    await stop(a, b);
    dirs.cleanup();
  }
});

test('a publication of another incarnation, of an older generation (reset), with a chunk missing, altered or cut short is not loaded; the next complete one is', async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  const joiners: Child[] = [];
  let a: Child | undefined;
  const queries = randomVectors(6, 8, 13);
  let release = async () => undefined as void;
  const join = async (name: string, fromPublication: boolean, count: number) => {
    const j = await node(path.join(dirs.dir, name), url, 0);
    joiners.push(j);
    await assertJoined(j, fromPublication);
    await caughtUp(j, count);
    await sameAnswers([a!, j], queries);
    return j;
  };
  /** One more write on `a`, then waits for a publication that has it and keeps it current (the publish lock held). */
  const republish = async (id: string, seed: number) => {
    await release();
    await client(a!).upsert({ id, vector: randomVectors(1, 8, seed)[0] });
    await published(url);
    release = await holdPublishLock(url);
  };
  try {
    a = await node(path.join(dirs.dir, 'a'), url, 300);
    await write(a, randomVectors(300, 8, 11), 'v');
    let count = 298 + 100;
    await published(url);
    release = await holdPublishLock(url);

    // 1. a publication of another incarnation of the index (deleted and created again)
    await withPg(url, (c) => c.query("UPDATE vector_publications SET incarnation = 'another' WHERE index_name = 'default'"));
    const other = await join('j1', false, count);
    assert.match(lines(other, 'vector: the published snapshot is not usable: reloading the records from PostgreSQL')[0]?.reason as string, /incarnation another/);
    await stop(other);

    // 2. torn: the last chunk of the SQLite copy missing (a publisher killed mid-upload never
    // switches the row; here the row names a chunk that is not there)
    await republish('x', 12);
    count++;
    await withPg(url, (c) =>
      c.query(
        "DELETE FROM vector_publication_chunks WHERE (publication, file, no) = (SELECT publication, file, max(no) FROM vector_publication_chunks WHERE index_name = 'default' AND file LIKE 'cache%.sqlite' GROUP BY publication, file)",
      ),
    );
    // an upload that stopped half-way: chunks of a publication no row names
    await withPg(url, (c) => c.query("INSERT INTO vector_publication_chunks (index_name, publication, file, no, data) VALUES ('default', 'half-written', 'cache.sqlite', 0, '\\x00')"));
    const torn = await join('j2', false, count);
    assert.match(lines(torn, 'vector: the published snapshot is not usable: reloading the records from PostgreSQL')[0]?.reason as string, /chunk \d+ of \d+ is missing/);
    await stop(torn);

    // 2b. a byte of a chunk of the graph file altered, then a chunk of the SQLite copy cut short
    for (const [what, sql] of [
      ['altered', "UPDATE vector_publication_chunks SET data = set_byte(data, 5, (get_byte(data, 5) + 1) % 256) WHERE index_name = 'default' AND no = 0 AND file = (SELECT min(file) FROM vector_publication_chunks WHERE index_name = 'default' AND file LIKE 'snapshots/%.hnsw')"],
      ['cut short', "UPDATE vector_publication_chunks SET data = substring(data from 1 for length(data) - 1) WHERE index_name = 'default' AND file LIKE 'cache%.sqlite' AND no = 0"],
      ['renamed out of the directory', "UPDATE vector_publications SET files = jsonb_set(files, '{0,name}', '\"snapshots/..\"') WHERE index_name = 'default'"],
      // the row's expectations (what the graphs are loaded against while the SQLite copy
      // downloads) disagreeing with the graph files, or with the SQLite copy
      ['generation altered', "UPDATE vector_publications SET expectations = jsonb_set(expectations, '{namespaces,0,generation}', to_jsonb((expectations #>> '{namespaces,0,generation}')::int + 1)) WHERE index_name = 'default'"],
      ['namespace added', "UPDATE vector_publications SET expectations = jsonb_set(expectations, '{namespaces}', (expectations -> 'namespaces') || '[{\"id\": 999, \"generation\": 0}]'::jsonb) WHERE index_name = 'default'"],
    ] as const) {
      await republish(`z${what.length}`, 16 + what.length);
      count++;
      const changed = await withPg(url, (c) => c.query(sql));
      assert.equal(changed.rowCount, 1, `one chunk ${what}`);
      const damaged = await join(`j2${what.length}`, false, count);
      assert.match(lines(damaged, 'vector: the published snapshot is not usable: reloading the records from PostgreSQL')[0]?.reason as string, /size or checksum differs|unexpected file name snapshots\/\.\.|not what the publication expects|differs from the publication's expectations/, what);
      await stop(damaged);
    }

    // 3. an older generation: the namespaces were reset after the publication (the joiner applies
    // the reset to the copy, and the graph snapshots of the old generation are not loaded)
    await republish('y', 14);
    count++;
    await client(a).reset({ all: true });
    await write(a, randomVectors(120, 8, 15), 'r');
    count = 118 + 40;
    const reset = await join('j3', false, count);
    assert.equal(lines(reset, 'vector index fetched from the published snapshot').length, 1, 'the copy was used, its old graphs were not');
    await stop(reset);

    // 4. the next complete publication is loaded (and the half-written upload's chunks are gone)
    await release();
    await published(url);
    await join('j4', true, count);
    const left = await withPg(url, (c) => c.query("SELECT count(*)::int AS n FROM vector_publication_chunks WHERE publication = 'half-written'"));
    assert.equal(left.rows[0].n, 0);
  } finally {
    await release().catch(() => undefined);
    await stop(a, ...joiners);
    dirs.cleanup();
  }
});

/** Waits until `n` has inserted every queued point into its graphs (`indexingVectorCount`, not in the SDK's info). */
async function indexed(n: Child): Promise<void> {
  await waitFor(`graph insertion done on ${n.url}`, async () => {
    const r = await fetch(`${n.url}/info`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return ((await r.json()) as { result: { indexingVectorCount: number } }).result.indexingVectorCount === 0;
  }, 60_000);
}

/**
 * Asserts that `n` joined from a publication without the vectors its graphs carry, with at least
 * one graph loaded (a namespace whose snapshot was being rewritten when the publisher staged its
 * files is published without a graph, and with its vectors: rebuilt, as before).
 */
async function assertJoinedVectorless(n: Child, index = 'default'): Promise<void> {
  await waitFor('the index loaded (log)', () => lines(n, 'vector index loaded', index).length > 0, 30_000);
  const fetched = lines(n, 'vector index fetched from the published snapshot', index);
  assert.equal(fetched.length, 1, n.log());
  assert.equal(fetched[0].vectorless, true, JSON.stringify(fetched[0]));
  assert.ok(Number(lines(n, 'vector index loaded', index)[0].fromSnapshot) >= 1, n.log());
}

/** Loads 600 + 200 vectors (ids `<prefix><i>`) on a new node publishing every 300 ms, and waits for a publication made once they are all in its graphs. */
async function loadAndPublish(dir: string, url: string, seed: number, env: Record<string, string> = {}, prefix = 'v'): Promise<{ a: Child; vecs: number[][] }> {
  const a = await node(dir, url, 300, env);
  const vecs = randomVectors(600, 8, seed);
  await write(a, vecs, prefix);
  await caughtUp(a, 598 + 200);
  await indexed(a);
  // one more write: the next publication's graphs cover every record but (perhaps) this one
  await client(a).upsert({ id: 'last', vector: vecs[599] });
  await published(url);
  return { a, vecs };
}

/**
 * Joins a node on `dir` to `url` with every node's fill paused (its lock held): resolves once it
 * joined from a publication without vectors and its fill started; `release` lets the fill go on.
 */
async function joinWithFillPaused(dir: string, url: string, env: Record<string, string> = {}): Promise<{ n: Child; release: () => Promise<void> }> {
  const release = await holdFillLock(url);
  const n = await node(dir, url, 0, env);
  await assertJoinedVectorless(n);
  await waitFor('the fill started (log)', () => lines(n, 'vector vectors filling from PostgreSQL').length === 1, 30_000);
  return { n, release };
}

/** Asserts that the stopped node's local copy in `dir` holds every vector and no fill marker (and `records` records, when given). */
function assertFilledLocally(dir: string, records?: number): void {
  const local = new Database(path.join(dir, 'vector', 'default.sqlite'), { readonly: true });
  try {
    if (records !== undefined) assert.equal(local.prepare('SELECT count(*) FROM records').pluck().get(), records, 'no record of a deleted or reset namespace is left or brought back');
    assert.equal(local.prepare('SELECT count(*) FROM records WHERE vector IS NULL').pluck().get(), 0, 'every vector filled');
    assert.equal(local.prepare("SELECT count(*) FROM meta WHERE key = 'vectors_to_fill'").pluck().get(), 0, 'the marker removed');
  } finally {
    local.close();
  }
}

test('the publication leaves out the vectors its graphs carry; a joiner fills them from PostgreSQL after ready and answers with the same vectors during and after the fill; writes meanwhile are kept', { timeout: 600_000 }, async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  let a: Child | undefined;
  let b: Child | undefined;
  let release = async () => undefined as void;
  try {
    const loaded = await loadAndPublish(path.join(dirs.dir, 'a'), url, 21);
    a = loaded.a;
    const vecs = loaded.vecs;
    // the copy: no dense vector bytes for the records the graph snapshots cover, and the marker
    const copy = await publishedCopy(url, dirs.dir);
    try {
      assert.equal(copy.name, 'cache.vectorless.sqlite', 'a file name nodes of earlier releases refuse (they reload from PostgreSQL)');
      const total = copy.db.prepare('SELECT count(*) FROM records').pluck().get() as number;
      assert.equal(total, 799);
      assert.ok(copy.graphs.size >= 1, 'a graph snapshot is published');
      // no record a published graph covers keeps its vector's bytes
      for (const [ns, seq] of copy.graphs) {
        const kept = copy.db.prepare('SELECT count(*) AS n, coalesce(sum(length(vector)), 0) AS bytes FROM records WHERE ns = ? AND seq <= ? AND vector IS NOT NULL').get(ns, seq);
        assert.deepEqual(kept, { n: 0, bytes: 0 }, `namespace ${ns}`);
      }
      const withVector = copy.db.prepare('SELECT count(*) FROM records WHERE vector IS NOT NULL').pluck().get() as number;
      assert.ok(withVector <= total / 2, `most records without their vector: ${withVector} of ${total} keep it`);
      assert.equal(copy.db.prepare("SELECT value FROM meta WHERE key = 'vectors_to_fill'").pluck().get(), '1');
    } finally {
      copy.db.close();
    }
    const before = await allRecords(a, '');

    // the fill paused (its lock held): what the joiner serves now is read on demand
    ({ n: b, release } = await joinWithFillPaused(path.join(dirs.dir, 'b'), url));

    // writes on the joiner before its records' vectors are filled: never overwritten by the fill
    const fresh = randomVectors(2, 8, 24);
    await client(b).upsert({ id: 'v10', vector: fresh[0], metadata: { rewritten: true } });
    await client(b).delete('v11');
    assert.deepEqual(await client(b).update({ id: 'v12', metadata: { changed: true } }), { updated: 1 });
    await client(b).upsert({ id: 'fresh', vector: fresh[1] });
    await client(b).namespace('ns1').reset();
    const [v12] = await client(b).fetch(['v12'], { includeVectors: true, includeMetadata: true });
    assert.deepEqual(v12?.vector, before.get('v12')!.vector, 'a metadata-only update keeps the vector');
    assert.deepEqual(v12?.metadata, { changed: true });
    await caughtUp(a, 599);

    // reads during the fill: the same vectors as the serving node
    const ids = ['v2', 'v10', 'v77', 'v598', 'nope'];
    assert.deepEqual(await client(b).fetch(ids, { includeVectors: true, includeMetadata: true }), await client(a).fetch(ids, { includeVectors: true, includeMetadata: true }));
    assert.deepEqual(await client(b).fetch({ prefix: 'v3' }, { includeVectors: true }), await client(a).fetch({ prefix: 'v3' }, { includeVectors: true }));
    const page = { cursor: 0, limit: 25, includeVectors: true, includeMetadata: true };
    assert.deepEqual(await client(b).range(page), await client(a).range(page));
    for (const q of randomVectors(3, 8, 23)) {
      const qa: unknown = await client(a!).query({ vector: q, topK: 5, includeVectors: true });
      const qb: unknown = await client(b!).query({ vector: q, topK: 5, includeVectors: true });
      assert.deepEqual(qb, qa, 'query with vectors during the fill');
    }
    // a near-duplicate's score is computed from its stored vector (read on demand): 1 for itself
    const [dup] = await client(b).query({ vector: vecs[30], topK: 1 });
    assert.deepEqual(dup, (await client(a).query({ vector: vecs[30], topK: 1 }))[0]);
    const resumable = await client(b).resumableQuery({ vector: vecs[40], topK: 3, includeVectors: true, maxIdle: 60 });
    const next = await resumable.fetchNext(3);
    await resumable.stop();
    for (const r of [...resumable.result, ...next]) assert.deepEqual(r.vector, before.get(String(r.id))?.vector, `resumable query, ${r.id}`);
    assert.equal(lines(b, 'vector vectors filled from PostgreSQL').length, 0, 'the fill is still paused');

    await release();
    await waitFor('the fill done (log)', () => lines(b!, 'vector vectors filled from PostgreSQL').length === 1, 120_000);
    assert.ok(Number(lines(b, 'vector vectors filled from PostgreSQL')[0].filled) >= 100, 'the background fill filled vectors');
    await caughtUp(b, 599);
    await sameRecords(a, b, 'after the fill');
    const after = await allRecords(b, '');
    assert.notDeepEqual(after.get('v10')!.vector, before.get('v10')!.vector, 'the rewritten vector stays');
    assert.deepEqual(after.get('v10')!.metadata, { rewritten: true });
    assert.equal(after.has('v11'), false);
    assert.deepEqual(after.get('v12')!.vector, before.get('v12')!.vector);
    assert.equal((await allRecords(b, 'ns1')).size, 0);
    await sameAnswers([a, b], randomVectors(4, 8, 25));
    await stop(b);
    assertFilledLocally(path.join(dirs.dir, 'b'));
  } finally {
    await release();
    await stop(a, b);
    dirs.cleanup();
  }
});

test('a joiner restarted before its fill ends resumes it; with PostgreSQL stopped, a vector not filled yet answers 503 with Retry-After, and the fill completes once it is back', { timeout: 600_000 }, async () => {
  const own = await startTestPostgres({ own: true });
  const url = await own.newDatabase();
  const dirs = tempDir();
  let a: Child | undefined;
  let c: Child | undefined;
  let release = async () => undefined as void;
  try {
    a = (await loadAndPublish(path.join(dirs.dir, 'a'), url, 31)).a;
    ({ n: c, release } = await joinWithFillPaused(path.join(dirs.dir, 'c'), url));
    await waitFor('the downloaded cache synced to disk', () => lines(c!, 'vector index download synced to disk').length === 1, 60_000);
    await stop(c);
    assert.equal(lines(c, 'vector vectors filled from PostgreSQL').length, 0);

    c = await node(path.join(dirs.dir, 'c'), url, 0);
    await waitFor('the index loaded (log)', () => lines(c!, 'vector index loaded').length > 0, 30_000);
    assert.equal(lines(c, 'vector index fetched from the published snapshot').length, 0, 'the local copy is used');
    await waitFor('the fill resumed (log)', () => lines(c!, 'vector vectors filling from PostgreSQL').length === 1, 30_000);

    // the database stopped (the lock's session with it): a vector not filled yet cannot be read
    own.kill();
    const r = await fetch(`${c.url}/fetch`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ ids: ['v7'], includeVectors: true }) });
    const text = await r.text();
    assert.equal(r.status, 503, text);
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    assert.match((JSON.parse(text) as { error: string }).error, /still being copied/);
    // without vectors: answered from memory
    const q = await fetch(`${c.url}/query`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ vector: randomVectors(1, 8, 32)[0], topK: 3, includeMetadata: true }) });
    assert.equal(q.status, 200);
    own.start();
    await waitFor('the fill done (log)', () => lines(c!, 'vector vectors filled from PostgreSQL').length === 1, 180_000);
    assert.ok(Number(lines(c, 'vector vectors filled from PostgreSQL')[0].filled) >= 100, 'the resumed fill filled the vectors');
    await sameRecords(a, c, 'after the fill');
  } finally {
    await release();
    await stop(a, c);
    dirs.cleanup();
    await own.stop();
  }
});

test('a namespace deleted and the default namespace reset on the serving node during the fill: the joiner applies both, the fill ends without restoring any old vector', { timeout: 600_000 }, async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  let a: Child | undefined;
  let b: Child | undefined;
  let release = async () => undefined as void;
  try {
    a = (await loadAndPublish(path.join(dirs.dir, 'a'), url, 41)).a;
    ({ n: b, release } = await joinWithFillPaused(path.join(dirs.dir, 'b'), url));

    // while the fill waits: ns1 deleted, '' reset and two of its ids written again with new vectors
    assert.equal(await client(a).deleteNamespace('ns1'), 'Success');
    await client(a).reset();
    const fresh = randomVectors(2, 8, 42);
    await client(a).upsert([{ id: 'v5', vector: fresh[0] }, { id: 'v6', vector: fresh[1], metadata: { again: true } }]);
    await caughtUp(b, 2);
    assert.deepEqual((await client(b).listNamespaces()).sort(), (await client(a).listNamespaces()).sort());

    await release();
    await waitFor('the fill done (log)', () => lines(b!, 'vector vectors filled from PostgreSQL').length === 1, 120_000);
    const got = await client(b).fetch(['v5', 'v6', 'v7'], { includeVectors: true, includeMetadata: true });
    assert.deepEqual(got, await client(a).fetch(['v5', 'v6', 'v7'], { includeVectors: true, includeMetadata: true }));
    assert.deepEqual(got[0]?.vector?.map(Math.fround), fresh[0].map(Math.fround), 'the new vector, not the published one');
    assert.equal(got[2], null, 'a record of the reset namespace stays deleted');
    assert.deepEqual(await allRecords(b, ''), await allRecords(a, ''));
    assert.equal((await client(b).info()).vectorCount, 2);
    await stop(b);
    assertFilledLocally(path.join(dirs.dir, 'b'), 2);
  } finally {
    await release();
    await stop(a, b);
    dirs.cleanup();
  }
});

test('an index deleted through the management API during a joiner\'s paused fill: the joiner drops it, its fill ends without an error, a lock or a file left', { timeout: 600_000 }, async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  const a = await startTestSvc(['vector', 'mgmt'], {
    env: { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8', SVC_VECTOR_PUBLISH_MS: '300' },
    dataDir: path.join(dirs.dir, 'a'),
  });
  let b: Child | undefined;
  let release = async () => undefined as void;
  try {
    const made = await mgmt(a, '/v2/vector/index', { method: 'POST', body: JSON.stringify({ name: 'docs', similarity_function: 'COSINE', dimension_count: 8 }) });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const { id, token, endpoint } = made.body as { id: string; token: string; endpoint: string };
    const onA = new Index({ url: endpoint, token, retry: false, enableTelemetry: false });
    const vecs = randomVectors(400, 8, 51);
    for (let i = 0; i < vecs.length; i += 50) await onA.upsert(vecs.slice(i, i + 50).map((v, j) => ({ id: `d${i + j}`, vector: v })));
    await waitFor('the graph of docs built', async () => {
      const r = await fetch(`${endpoint}/info`, { headers: { authorization: `Bearer ${token}` } });
      return ((await r.json()) as { result: { indexingVectorCount: number } }).result.indexingVectorCount === 0;
    }, 60_000);
    await onA.upsert({ id: 'last', vector: vecs[0] });
    await published(url, id);

    release = await holdFillLock(url, id);
    b = await node(path.join(dirs.dir, 'b'), url, 0);
    await assertJoinedVectorless(b, id);
    await waitFor('the fill started (log)', () => lines(b!, 'vector vectors filling from PostgreSQL', id).length === 1, 30_000);
    const onB = new Index({ url: `${b.url}/${id}`, token, retry: false, enableTelemetry: false });
    assert.equal((await onB.info()).vectorCount, 401);
    const vectorDir = path.join(dirs.dir, 'b', 'vector');
    assert.ok(fs.readdirSync(vectorDir).some((n) => n.startsWith(id)));

    // deleted while the joiner's fill statement waits for the lock
    assert.equal((await mgmt(a, `/v2/vector/index/${id}`, { method: 'DELETE' })).status, 200);
    await waitFor('the deleted index gone on the joiner', () => onB.info().then(() => undefined, (err: Error) => (/Index not found/.test(err.message) ? true : undefined)), 30_000);
    await waitFor('its cache files removed on the joiner', () => !fs.readdirSync(vectorDir).some((n) => n.startsWith(id)), 30_000);
    assert.equal(lines(b, 'vector vectors fill stopped: the index closed', id).length, 0, 'the statement still waits');

    // the lock let go: the statement ends, the fill with it, writing nothing and retrying nothing
    await release();
    await waitFor('the fill stopped (log)', () => lines(b!, 'vector vectors fill stopped: the index closed', id).length === 1, 60_000);
    assert.equal(lines(b, 'vector vectors fill stopped: the index closed', id)[0].filled, 0);
    assert.equal(lines(b, 'vector vectors filled from PostgreSQL', id).length, 0);
    assert.doesNotMatch(b.log(), /filling the vectors failed/);
    assert.ok(!fs.readdirSync(vectorDir).some((n) => n.startsWith(id)), 'no file of the deleted index brought back');
    const held = await withPg(url, (c) => c.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objsubid = 2", [FILL_LOCK_CLASS]));
    assert.equal(held.rows[0].n, 0, 'no fill lock held or awaited');
    // the joiner serves on and stops cleanly (no timer of the fill left running)
    assert.equal((await client(b).info()).vectorCount, 0);
    b.child.kill('SIGTERM');
    await b.exited();
    assert.equal(b.child.exitCode, 0, b.log());
    assert.doesNotMatch(b.log(), /filling the vectors failed/);
  } finally {
    await release();
    await stop(b);
    await a.close();
    dirs.cleanup();
  }
});

test('a joiner restarted mid-fill without a usable graph for its namespaces fills their vectors from PostgreSQL before rebuilding the graphs, before ready, with the fill lock held', { timeout: 600_000 }, async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  let a: Child | undefined;
  let c: Child | undefined;
  let release = async () => undefined as void;
  try {
    a = (await loadAndPublish(path.join(dirs.dir, 'a'), url, 61)).a;
    ({ n: c, release } = await joinWithFillPaused(path.join(dirs.dir, 'c'), url));
    await waitFor('the downloaded cache synced to disk', () => lines(c!, 'vector index download synced to disk').length === 1, 60_000);
    await stop(c);
    // the local graph snapshots: one namespace's header removed (no graph), the other's claiming a
    // sequence number ahead of the local copy's (not usable)
    const snapshots = path.join(dirs.dir, 'c', 'vector', 'default.snapshots');
    const headers = fs.readdirSync(snapshots).filter((f) => /^ns-\d+\.json$/.test(f)).sort();
    assert.equal(headers.length, 2, fs.readdirSync(snapshots).join(' '));
    fs.rmSync(path.join(snapshots, headers[0]));
    const h = JSON.parse(fs.readFileSync(path.join(snapshots, headers[1]), 'utf8')) as { seq: number };
    fs.writeFileSync(path.join(snapshots, headers[1]), JSON.stringify({ ...h, seq: h.seq + 1_000_000 }));
    const local = new Database(path.join(dirs.dir, 'c', 'vector', 'default.sqlite'), { readonly: true });
    const unfilled = local.prepare('SELECT count(*) FROM records WHERE vector IS NULL').pluck().get() as number;
    local.close();
    assert.ok(unfilled >= 100, `vectors left to fill: ${unfilled}`);

    // the lock still held: the background fill would wait; the fill before the rebuild does not
    c = await node(path.join(dirs.dir, 'c'), url, 0);
    await waitFor('the index loaded (log)', () => lines(c!, 'vector index loaded').length > 0, 30_000);
    assert.equal(lines(c, 'vector index loaded')[0].rebuilt, 2, c.log());
    const filledFirst = lines(c, 'vector vectors of a namespace without a usable graph filled from PostgreSQL before rebuilding it');
    assert.equal(filledFirst.length, 2, c.log());
    assert.equal(filledFirst.reduce((n, l) => n + Number(l.filled), 0), unfilled);
    assert.ok(filledFirst.every((l) => l.left === 0), JSON.stringify(filledFirst));
    // nothing left for the background fill: it ends without a statement (the lock is still held)
    await waitFor('the fill done (log)', () => lines(c!, 'vector vectors filled from PostgreSQL').length === 1, 60_000);
    assert.equal(lines(c, 'vector vectors filled from PostgreSQL')[0].filled, 0);
    // the rebuilt graphs hold every record: the same answers as the serving node
    await caughtUp(c, 799);
    await indexed(c);
    await sameAnswers([a, c], randomVectors(6, 8, 62));
    await sameRecords(a, c, 'after the rebuild');
    await stop(c);
    assertFilledLocally(path.join(dirs.dir, 'c'));
  } finally {
    await release();
    await stop(a, c);
    dirs.cleanup();
  }
});

test('query-data and resumable-query-data on a joiner that finds vectors not filled yet run again without embedding the text again', { timeout: 600_000 }, async () => {
  // an OpenAI-compatible embedder served here (8-d, hashed characters), counting its calls
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const input = (JSON.parse(body) as { input: string[] }).input;
      calls.push(...input);
      const embed = (t: string) => Array.from({ length: 8 }, (_, d) => 1 + [...t].reduce((n, ch, i) => n + ((ch.charCodeAt(0) * (i + 1) * (d + 3)) % 17), 0));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: input.map((t, index) => ({ object: 'embedding', index, embedding: embed(t) })) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = await pg.newDatabase();
  const dirs = tempDir();
  const file = path.join(dirs.dir, 'indexes.json');
  const dense = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`, model: 'counted' };
  fs.writeFileSync(file, JSON.stringify([{ name: 'default', dimension: 8, embedder: { dense } }]));
  const env = { SVC_VECTOR_INDEXES: file };
  let a: Child | undefined;
  let b: Child | undefined;
  let release = async () => undefined as void;
  try {
    a = (await loadAndPublish(path.join(dirs.dir, 'a'), url, 71, env)).a;
    ({ n: b, release } = await joinWithFillPaused(path.join(dirs.dir, 'b'), url, env));

    // the records' vectors are not filled yet (the fill waits): each request reads them and runs again
    const calledFor = (text: string) => calls.filter((t) => t === text).length;
    const got = await client(b).query({ data: 'the first probe', topK: 20, includeVectors: true, includeMetadata: true });
    assert.equal(got.length, 20);
    assert.equal(calledFor('the first probe'), 1, 'embedded once');
    assert.deepEqual(got, await client(a).query({ data: 'the first probe', topK: 20, includeVectors: true, includeMetadata: true }));
    const r = await client(b).resumableQuery({ data: 'a second probe', topK: 40, includeVectors: true, maxIdle: 60 });
    await r.stop();
    assert.equal(r.result.length, 40);
    assert.ok(r.result.every((x) => x.vector?.length === 8));
    assert.equal(calledFor('a second probe'), 1, 'embedded once');
    assert.equal(lines(b, 'vector vectors filled from PostgreSQL').length, 0, 'the fill is still paused: the vectors were read on demand');
  } finally {
    await release();
    await stop(a, b);
    dirs.cleanup();
    await new Promise((r) => server.close(r));
  }
});

test('a backup of a node whose vector store is PostgreSQL, taken while it fills: the vector part is skipped (pg_dump\'s job), the fill goes on unchanged', { timeout: 600_000 }, async () => {
  const url = await pg.newDatabase();
  const dirs = tempDir();
  let a: Child | undefined;
  let b: Child | undefined;
  let release = async () => undefined as void;
  try {
    // ids the fill's statement must quote (it names them as literals): quotes, a backslash, non-ASCII
    a = (await loadAndPublish(path.join(dirs.dir, 'a'), url, 81, {}, `it's \\ "v" ☃ 𝄞 `)).a;
    const creds = { 'mgmt.user': 'ops', 'mgmt.password': 'backup-test-password' };
    const env = { SVC_AREAS: 'vector,mgmt', SVC_MGMT_PORT: '0', SVC_MGMT_USER: creds['mgmt.user'], SVC_MGMT_PASSWORD: creds['mgmt.password'] };
    ({ n: b, release } = await joinWithFillPaused(path.join(dirs.dir, 'b'), url, env));
    const mgmtUrl = /^mgmt\s+(http:\/\/\S+)/m.exec(b.stdout())?.[1];
    assert.ok(mgmtUrl, b.stdout());

    const dir = path.join(dirs.dir, 'backup');
    const r = await postBackup(mgmtUrl, creds, { dir });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as { files: { path: string }[]; skipped: { store: string; note: string }[] };
    assert.deepEqual(manifest.files.map((f) => f.path), ['credentials.json'], 'no file of the local cache (it lacks vectors)');
    assert.match(manifest.skipped.find((s) => s.store === 'vector')?.note ?? '', /PostgreSQL.*pg_dump/);
    assert.equal(fs.existsSync(path.join(dir, 'vector')), false);

    assert.equal(lines(b, 'vector vectors filled from PostgreSQL').length, 0, 'still paused');
    await release();
    await waitFor('the fill done (log)', () => lines(b!, 'vector vectors filled from PostgreSQL').length === 1, 120_000);
    await caughtUp(b, 799);
    await sameRecords(a, b, 'after the fill');
  } finally {
    await release();
    await stop(a, b);
    dirs.cleanup();
  }
});

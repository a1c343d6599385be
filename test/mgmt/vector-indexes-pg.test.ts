/**
 * The management API's vector indexes with the vector area on PostgreSQL
 * (`SVC_VECTOR_DATABASE_URL`), two nodes on one database: an index created on one node serves on
 * the other within the follow bound (poll every second, `NOTIFY` at once), with its tokens; a
 * rename, new tokens and a delete made on one node are seen by the other (old token 401, deleted
 * index 404 and its cache files gone); the name is reusable; a restarted node serves the created
 * index from the database; the configured indexes are listed and fixed.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Index } from '@upstash/vector';
import { startTestPostgres, withPg, type TestPostgres } from '../helpers/postgres.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { mgmt } from './helpers.js';

let pg: TestPostgres;
before(async () => {
  pg = await startTestPostgres();
});
after(async () => {
  await pg?.stop();
});

const post = (body: unknown) => ({ method: 'POST', body: JSON.stringify(body) });
const client = (url: string, token: string) => new Index({ url, token, retry: false, enableTelemetry: false });
const failure = (p: Promise<unknown>) => p.then(() => 'no error', (err: Error) => err.message);

test('two PostgreSQL nodes: create, rename, reset tokens and delete on one node reach the other', { timeout: 300_000 }, async () => {
  const url = await pg.newDatabase();
  const cfg = tempDir();
  const file = path.join(cfg.dir, 'indexes.json');
  fs.writeFileSync(file, JSON.stringify([{ name: 'books', dimension: 2 }]));
  const env = { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '2', SVC_VECTOR_INDEXES: file };
  const keepA = tempDir();
  let a = await startTestSvc(['vector', 'mgmt'], { env, dataDir: keepA.dir });
  const b = await startTestSvc(['vector', 'mgmt'], { env });
  try {
    const names = async (svc: typeof a) => (await mgmt(svc, '/v2/vector/index')).body.map((x: { name: string }) => x.name);
    assert.deepEqual(await names(a), ['default', 'books']);

    // create on a: b serves it, with its tokens, within the bound
    const made = await mgmt(a, '/v2/vector/index', post({ name: 'docs', similarity_function: 'COSINE', dimension_count: 2 }));
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const { id, token } = made.body;
    await client(made.body.endpoint, token).upsert([{ id: 'p', vector: [1, 0] }, { id: 'q', vector: [0, 1] }]);
    const t0 = performance.now();
    const onB = client(`${b.urls.vector}/${id}`, token);
    await waitFor('the created index on node b', async () => ((await onB.info().catch(() => undefined))?.vectorCount === 2 ? true : undefined), 30_000);
    const seenMs = performance.now() - t0;
    assert.ok(seenMs < 10_000, `seen on b after ${seenMs} ms`);
    assert.equal((await onB.query({ vector: [0, 1], topK: 1 }))[0].id, 'q');
    assert.deepEqual(await names(b), ['default', 'books', 'docs']);
    const dup = await mgmt(b, '/v2/vector/index', post({ name: 'docs', similarity_function: 'COSINE', dimension_count: 2 }));
    assert.equal(dup.status, 400);

    // rename on b, seen on a at once (one catalogue)
    assert.equal((await mgmt(b, `/v2/vector/index/${id}/rename`, post({ name: 'papers' }))).status, 200);
    assert.deepEqual(await names(a), ['default', 'books', 'papers']);
    assert.equal((await mgmt(a, '/v2/vector/index/books/rename', post({ name: 'y' }))).status, 409);

    // new tokens on a: the old one refused on b, the new one works there
    const reset = await mgmt(a, `/v2/vector/index/${id}/reset-password`, { method: 'POST' });
    assert.equal(reset.status, 200);
    await waitFor('old token refused on node b', async () => (/Unauthorized/.test(await failure(onB.info())) ? true : undefined), 30_000);
    assert.equal((await client(`${b.urls.vector}/${id}`, reset.body.token).info()).vectorCount, 2);

    // restart a: it serves the created index from the database
    await a.close();
    a = await startTestSvc(['vector', 'mgmt'], { env, dataDir: keepA.dir });
    const onA = client(`${a.urls.vector}/${id}`, reset.body.token);
    await waitFor('the created index after a restart', async () => ((await onA.info().catch(() => undefined))?.vectorCount === 2 ? true : undefined), 30_000);

    // delete on b: a answers 404 and drops its cache files; the database holds nothing of it
    assert.ok(fs.readdirSync(path.join(keepA.dir, 'vector')).some((n) => n.startsWith(id)));
    assert.equal((await mgmt(b, `/v2/vector/index/${id}`, { method: 'DELETE' })).status, 200);
    await waitFor('the deleted index gone on node a', async () => (/Index not found/.test(await failure(onA.info())) ? true : undefined), 30_000);
    await waitFor('its cache files removed on node a', () => (fs.readdirSync(path.join(keepA.dir, 'vector')).some((n) => n.startsWith(id)) ? undefined : true), 30_000);
    const left = await withPg(url, async (c) =>
      Number((await c.query(`SELECT (SELECT count(*) FROM vector_records WHERE index_name = $1) + (SELECT count(*) FROM vector_indexes WHERE name = $1) + (SELECT count(*) FROM vector_credentials WHERE name LIKE $2) AS n`, [id, `vector.${id}.%`])).rows[0].n),
    );
    assert.equal(left, 0);
    assert.deepEqual(await names(a), ['default', 'books']);
    const again = await mgmt(a, '/v2/vector/index', post({ name: 'papers', similarity_function: 'DOT_PRODUCT', dimension_count: 2 }));
    assert.equal(again.status, 200);
    console.log(`created index seen on the other node after ${seenMs.toFixed(0)} ms`);
  } finally {
    await a.close();
    await b.close();
    cfg.cleanup();
    keepA.cleanup();
  }
});

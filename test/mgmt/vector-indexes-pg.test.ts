/**
 * The management API's vector indexes with the vector area on PostgreSQL
 * (`SVC_VECTOR_DATABASE_URL`), two nodes on one database: both list the same indexes, new tokens
 * made on one node (`reset-password`) are refused on the other within the credential follow bound,
 * and create, rename and delete answer 409 `vectorIndexUnsupported` (indexes are defined in
 * `SVC_VECTOR_INDEXES` there), changing nothing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Index } from '@upstash/vector';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
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

test('two PostgreSQL nodes: one list, tokens reset on one node refused on the other, no runtime create/rename/delete', { timeout: 300_000 }, async () => {
  const url = await pg.newDatabase();
  const cfg = tempDir();
  const file = path.join(cfg.dir, 'indexes.json');
  fs.writeFileSync(file, JSON.stringify([{ name: 'books', dimension: 2 }]));
  const env = { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '2', SVC_VECTOR_INDEXES: file };
  const a = await startTestSvc(['vector', 'mgmt'], { env });
  const b = await startTestSvc(['vector', 'mgmt'], { env });
  try {
    const ids = async (svc: typeof a) => (await mgmt(svc, '/v2/vector/index')).body.map((x: { id: string }) => x.id);
    assert.deepEqual(await ids(a), ['default', 'books']);
    assert.deepEqual(await ids(b), ['default', 'books']);
    const old = (await mgmt(b, '/v2/vector/index/books')).body.token;
    await waitFor('one token on both nodes', async () => ((await mgmt(a, '/v2/vector/index/books')).body.token === old ? true : undefined), 30_000);

    const reset = await mgmt(a, '/v2/vector/index/books/reset-password', { method: 'POST' });
    assert.equal(reset.status, 200);
    const onB = new Index({ url: `${b.urls.vector}/books`, token: old, retry: false, enableTelemetry: false });
    // NOTIFY reaches the other node at once; the re-read every 2 s is the fallback (bound: a few seconds)
    await waitFor('old token refused on node b', async () => ((await onB.info().then(() => false, (e: Error) => /Unauthorized/.test(e.message))) ? true : undefined), 30_000);
    assert.equal((await new Index({ url: `${b.urls.vector}/books`, token: reset.body.token, retry: false, enableTelemetry: false }).info()).vectorCount, 0);
    assert.equal((await mgmt(b, '/v2/vector/index/books')).body.token, reset.body.token);

    const create = await mgmt(a, '/v2/vector/index', { method: 'POST', body: JSON.stringify({ name: 'x', similarity_function: 'COSINE', dimension_count: 2 }) });
    assert.equal(create.status, 409);
    assert.match(create.body.error, /PostgreSQL/);
    assert.equal((await mgmt(b, '/v2/vector/index/books/rename', { method: 'POST', body: JSON.stringify({ name: 'y' }) })).status, 409);
    assert.equal((await mgmt(b, '/v2/vector/index/books', { method: 'DELETE' })).status, 409);
    assert.deepEqual(await ids(a), ['default', 'books']);
  } finally {
    await a.close();
    await b.close();
    cfg.cleanup();
  }
});

/**
 * Vector indexes managed at run time through the management API (`/v2/vector/index`): create,
 * then use with the official `@upstash/vector` SDK at the returned endpoint and token, restart,
 * rename, new tokens, delete; SIGKILL during a create and during a delete; validation; auth.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { Index } from '@upstash/vector';
import Database from 'better-sqlite3';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.js';
import { waitFor } from '../helpers/wait.js';
import { cli, credentials } from '../ops/backup-helpers.js';
import { basic, mgmt, post, sdkError, LOCAL_VECTOR_STORE } from './helpers.js';

/**
 * These cases run on the local store even when the suite runs with `SVC_VECTOR_DATABASE_URL`
 * (indexes are not created at run time on PostgreSQL: `vector-indexes-pg.test.ts`).
 */

describe('vector indexes through the management API', () => {
  const dirs: { cleanup(): void }[] = [];
  after(() => dirs.forEach((d) => d.cleanup()));

  it('creates an index that serves at once, survives a restart, renames, re-keys and deletes', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    let svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: LOCAL_VECTOR_STORE });
    try {
      const created = await mgmt(svc, '/v2/vector/index', post({ name: 'docs', similarity_function: 'COSINE', dimension_count: 3 }));
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const ix = created.body;
      assert.match(ix.id, /^[0-9a-f-]{36}$/);
      assert.equal(ix.name, 'docs');
      assert.equal(ix.endpoint, `${svc.urls.vector}/${ix.id}`);
      assert.equal(ix.type, 'DENSE');
      assert.equal(ix.dimension_count, 3);
      assert.equal(ix.similarity_function, 'COSINE');
      assert.ok(Math.abs(ix.creation_time - Date.now() / 1000) < 600);
      assert.equal(created.headers.get('cache-control'), 'no-store');

      const index = new Index({ url: ix.endpoint, token: ix.token });
      await index.upsert([{ id: 'a', vector: [1, 0, 0] }, { id: 'b', vector: [0, 1, 0] }]);
      const q = await index.query({ vector: [0.9, 0.1, 0], topK: 1 });
      assert.equal(q[0].id, 'a');
      const ro = new Index({ url: ix.endpoint, token: ix.read_only_token });
      assert.match(await sdkError(ro.upsert({ id: 'c', vector: [0, 0, 1] })), /read-only/);
      // the default index is untouched
      assert.equal((await new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') }).info()).vectorCount, 0);

      const list = await mgmt(svc, '/v2/vector/index');
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.map((x: { name: string; origin: string }) => [x.name, x.origin]), [['default', 'env'], ['docs', 'runtime']]);
      const one = await mgmt(svc, `/v2/vector/index/${ix.id}`);
      assert.equal(one.body.vector_count, 2);
      assert.ok(one.body.index_size > 0);

      // restart: the index is back with its data and tokens
      await svc.close();
      svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: LOCAL_VECTOR_STORE });
      const again = (await mgmt(svc, `/v2/vector/index/${ix.id}`)).body;
      assert.equal(again.name, 'docs');
      assert.equal(again.token, ix.token);
      const index2 = new Index({ url: again.endpoint, token: again.token });
      assert.equal((await index2.query({ vector: [0, 1, 0], topK: 1 }))[0].id, 'b');

      // rename: same endpoint and tokens, new name; the old name is free
      const renamed = await mgmt(svc, `/v2/vector/index/${ix.id}/rename`, post({ name: 'handbook' }));
      assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
      assert.equal(renamed.body.name, 'handbook');
      assert.equal(renamed.body.endpoint, again.endpoint);
      assert.equal((await index2.info()).vectorCount, 2);

      // reset-password: the old tokens are refused at once, the new ones work
      const reset = await mgmt(svc, `/v2/vector/index/${ix.id}/reset-password`, { method: 'POST' });
      assert.equal(reset.status, 200);
      assert.notEqual(reset.body.token, ix.token);
      assert.notEqual(reset.body.read_only_token, ix.read_only_token);
      assert.match(await sdkError(index2.info()), /Unauthorized/);
      const index3 = new Index({ url: again.endpoint, token: reset.body.token });
      assert.equal((await index3.info()).vectorCount, 2);
      // the default index may be re-keyed, not renamed or deleted
      const defReset = await mgmt(svc, '/v2/vector/index/default/reset-password', { method: 'POST' });
      assert.equal(defReset.status, 200);
      assert.equal(svc.ctx.credentials.get('vector.default.token'), defReset.body.token);
      assert.equal((await mgmt(svc, '/v2/vector/index/default/rename', post({ name: 'x' }))).status, 409);
      const defDelete = await mgmt(svc, '/v2/vector/index/default', { method: 'DELETE' });
      assert.equal(defDelete.status, 409);
      assert.match(defDelete.body.error, /default index/);

      // delete: 404 for the SDK, files and tokens gone, the name reusable
      const files = () => fs.readdirSync(path.join(tmp.dir, 'vector')).filter((n) => n.startsWith(ix.id));
      assert.ok(files().length > 0);
      const del = await mgmt(svc, `/v2/vector/index/${ix.id}`, { method: 'DELETE' });
      assert.equal(del.status, 200);
      assert.deepEqual(del.body, { id: ix.id, name: 'handbook', deleted: true });
      assert.match(await sdkError(index3.info()), /Index not found/);
      assert.deepEqual(files(), []);
      assert.equal(svc.ctx.credentials.peek(`vector.${ix.id}.token`), undefined);
      assert.equal((await mgmt(svc, `/v2/vector/index/${ix.id}`)).status, 404);
      assert.equal((await mgmt(svc, `/v2/vector/index/${ix.id}`, { method: 'DELETE' })).status, 404);
      const reused = await mgmt(svc, '/v2/vector/index', post({ name: 'handbook', similarity_function: 'DOT_PRODUCT', dimension_count: 2 }));
      assert.equal(reused.status, 200);
      assert.notEqual(reused.body.id, ix.id);
      assert.equal((await new Index({ url: reused.body.endpoint, token: reused.body.token }).info()).vectorCount, 0);
    } finally {
      await svc.close();
    }
  });

  it('refuses bad fields with 400 naming the field, and every route without the management account', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    const svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: LOCAL_VECTOR_STORE });
    try {
      const ok = { name: 'n1', similarity_function: 'COSINE', dimension_count: 4 };
      const cases: [unknown, RegExp][] = [
        [{ ...ok, name: 'bad name' }, /^name:/],
        [{ ...ok, name: 'query' }, /^name:/],
        [{ ...ok, name: 'x'.repeat(65) }, /^name:/],
        [{ ...ok, name: undefined }, /^name:/],
        [{ ...ok, name: 'default' }, /^name: an index named default exists/],
        [{ ...ok, similarity_function: 'L1' }, /^similarity_function:/],
        [{ ...ok, dimension_count: 0 }, /^dimension_count:/],
        [{ ...ok, dimension_count: 1.5 }, /^dimension_count:/],
        [{ ...ok, dimension_count: 70000 }, /^dimension_count:/],
        [{ ...ok, type: 'SPARSE', dimension_count: 3 }, /^dimension_count:/],
        [{ ...ok, type: 'MIXED' }, /^type:/],
        [{ ...ok, embedding_model: 'BGE_SMALL_EN_V1_5' }, /^embedding_model: unknown model/],
        [{ ...ok, type: 'HYBRID', sparse_embedding_model: 'BGE_M3' }, /^sparse_embedding_model: unknown model/],
        [{ ...ok, sparse_embedding_model: 'BM25' }, /^sparse_embedding_model:/],
        [{ ...ok, quantization: 'int4' }, /^quantization:/],
        [{ ...ok, hnsw: { m: 1 } }, /^hnsw\.m:/],
        [{ ...ok, hnsw: { ef: 3 } }, /^hnsw\.ef:/],
        [{ ...ok, quantization: 'int8', hnsw: { m: 8 } }, /^hnsw:/],
        [{ ...ok, embedder: { url: 'ftp://x', model: 'm' } }, /^embedder:/],
        [{ ...ok, colour: 'red' }, /^colour: unknown field/],
        [[1], /JSON object/],
      ];
      for (const [body, re] of cases) {
        const r = await mgmt(svc, '/v2/vector/index', post(body));
        assert.equal(r.status, 400, `${JSON.stringify(body)} -> ${r.status} ${JSON.stringify(r.body)}`);
        assert.match(r.body.error, re, JSON.stringify(body));
      }
      assert.equal((await mgmt(svc, '/v2/vector/index', { method: 'POST', body: '{nope' })).status, 400);
      const first = await mgmt(svc, '/v2/vector/index', post({ ...ok, type: 'HYBRID', sparse_embedding_model: 'BM25', hnsw: { m: 8, ef_search: 50 } }));
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.sparse_embedding_model, 'BM25');
      assert.deepEqual(first.body.hnsw, { m: 8, ef_construction: 100, ef_search: 50 });
      const dup = await mgmt(svc, '/v2/vector/index', post(ok));
      assert.equal(dup.status, 400);
      assert.match(dup.body.error, /^name: an index named n1 exists already/);
      const sparse = await mgmt(svc, '/v2/vector/index', post({ name: 'sp', similarity_function: 'DOT_PRODUCT', type: 'SPARSE' }));
      assert.equal(sparse.status, 200);
      assert.equal(sparse.body.dimension_count, 0);
      assert.equal((await mgmt(svc, `/v2/vector/index/${sparse.body.id}/rename`, post({ name: 'n1' }))).status, 400);
      assert.equal((await mgmt(svc, `/v2/vector/index/${sparse.body.id}/rename`, post({ name: 'a b' }))).status, 400);
      assert.equal((await mgmt(svc, '/v2/vector/index/nope/rename', post({ name: 'zz' }))).status, 404);
      assert.equal((await mgmt(svc, '/v2/vector/index/nope/reset-password', { method: 'POST' })).status, 404);

      const id = first.body.id;
      const routes: [string, string, string?][] = [
        ['GET', '/v2/vector/index'],
        ['POST', '/v2/vector/index', JSON.stringify({ name: 'zz', similarity_function: 'COSINE', dimension_count: 2 })],
        ['GET', `/v2/vector/index/${id}`],
        ['POST', `/v2/vector/index/${id}/rename`, JSON.stringify({ name: 'zz' })],
        ['POST', `/v2/vector/index/${id}/reset-password`],
        ['DELETE', `/v2/vector/index/${id}`],
      ];
      const wrong = basic('admin', 'wrong-password');
      for (const [method, p, body] of routes) {
        for (const auth of [null, wrong]) {
          const r = await mgmt(svc, p, { method, body, auth });
          assert.equal(r.status, 401, `${method} ${p}`);
        }
      }
      // nothing changed
      const list = (await mgmt(svc, '/v2/vector/index')).body.map((x: { name: string }) => x.name);
      assert.deepEqual(list, ['default', 'n1', 'sp']);
      assert.equal((await mgmt(svc, `/v2/vector/index/${id}`)).body.token, first.body.token);
    } finally {
      await svc.close();
    }
  });

  it('a token the node does not hold (yet) matches nothing, and a request never makes one up', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    const svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: LOCAL_VECTOR_STORE });
    try {
      const made = (await mgmt(svc, '/v2/vector/index', post({ name: 'docs', similarity_function: 'COSINE', dimension_count: 2 }))).body;
      const names = [`vector.${made.id}.token`, `vector.${made.id}.readonlyToken`];
      // what a PostgreSQL node is in before it has read another node's new index's tokens
      svc.ctx.credentials.delete(names);
      const err = await sdkError(new Index({ url: made.endpoint, token: 'not-the-token', retry: false, enableTelemetry: false }).info());
      assert.match(err, /Unauthorized/);
      for (const n of names) assert.equal(svc.ctx.credentials.peek(n), undefined, `${n} not generated by the request`);
      assert.equal(Object.keys(credentials(tmp.dir)).filter((n) => names.includes(n)).length, 0, 'nothing persisted');
    } finally {
      await svc.close();
    }
  });

  it('lists the SVC_VECTOR_INDEXES indexes as fixed, and svc env prints the runtime ones', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    const file = path.join(tmp.dir, 'indexes.json');
    fs.writeFileSync(file, JSON.stringify([{ name: 'fromfile', dimension: 2 }]));
    const env = { SVC_VECTOR_INDEXES: file, ...LOCAL_VECTOR_STORE };
    const svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env });
    let made: { id: string; token: string };
    try {
      const dup = await mgmt(svc, '/v2/vector/index', post({ name: 'fromfile', similarity_function: 'COSINE', dimension_count: 2 }));
      assert.equal(dup.status, 400);
      made = (await mgmt(svc, '/v2/vector/index', post({ name: 'made-here', similarity_function: 'COSINE', dimension_count: 2 }))).body;
      const list = (await mgmt(svc, '/v2/vector/index')).body;
      assert.deepEqual(list.map((x: { id: string; origin: string }) => [x.id, x.origin]), [['default', 'env'], ['fromfile', 'file'], [made.id, 'runtime']]);
      assert.equal(list[1].endpoint, `${svc.urls.vector}/fromfile`);
      const del = await mgmt(svc, '/v2/vector/index/fromfile', { method: 'DELETE' });
      assert.equal(del.status, 409);
      assert.match(del.body.error, /SVC_VECTOR_INDEXES/);
    } finally {
      await svc.close();
    }
    const out = (await cli(['env'], { SVC_DATA_DIR: tmp.dir, SVC_AREAS: 'vector', SVC_VECTOR_PORT: '8099', ...env })).stdout;
    assert.match(out, new RegExp(`^SVC_VECTOR_MADE_HERE_URL=http://[^/]+:8099/${made.id}$`, 'm'));
    assert.match(out, new RegExp(`^SVC_VECTOR_MADE_HERE_TOKEN=${made.token}$`, 'm'));
    assert.match(out, /^SVC_VECTOR_FROMFILE_URL=/m);
  });

  it('an online backup holds the created indexes; the restored data directory serves them', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    const svc = await startTestSvc(['vector', 'mgmt'], { dataDir: path.join(tmp.dir, 'data'), env: LOCAL_VECTOR_STORE });
    let made: { id: string; token: string };
    const backupDir = path.join(tmp.dir, 'backup');
    try {
      made = (await mgmt(svc, '/v2/vector/index', post({ name: 'kept', similarity_function: 'EUCLIDEAN', dimension_count: 2 }))).body;
      await new Index({ url: `${svc.urls.vector}/${made.id}`, token: made.token }).upsert([{ id: 'x', vector: [1, 2] }]);
      const r = await mgmt(svc, '/v2/backup', post({ dir: backupDir }));
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const files = r.body.manifest.files.map((f: { path: string }) => f.path);
      assert.ok(files.includes('vector/catalogue.db') && files.includes(`vector/${made.id}.sqlite`), files.join());
    } finally {
      await svc.close();
    }
    const restored = path.join(tmp.dir, 'restored');
    const out = await cli(['restore', backupDir, '--data-dir', restored]);
    assert.equal(out.code, 0, out.stderr);
    const again = await startTestSvc(['vector', 'mgmt'], { dataDir: restored, env: LOCAL_VECTOR_STORE });
    try {
      const one = (await mgmt(again, `/v2/vector/index/${made.id}`)).body;
      assert.equal(one.name, 'kept');
      assert.equal(one.vector_count, 1);
      const res = await new Index({ url: one.endpoint, token: one.token }).query({ vector: [1, 2], topK: 1 });
      assert.equal(res[0].id, 'x');
    } finally {
      await again.close();
    }
  });

  it('a create or a delete killed by SIGKILL leaves the whole index or nothing', { timeout: 600_000 }, async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    // create killed after the index files and tokens were made, before the catalogue row is ready
    let node = await serve(tmp.dir, { VECTOR_TEST_CRASH_POINT: 'vector-index-files-created' });
    await assert.rejects(call(node, 'POST', '/v2/vector/index', { name: 'crashy', similarity_function: 'COSINE', dimension_count: 4 }));
    await node.exited;
    const half = catalogueRows(tmp.dir);
    assert.equal(half.length, 1);
    assert.equal(half[0].state, 'creating');
    assert.ok(fs.existsSync(path.join(tmp.dir, 'vector', `${half[0].id}.sqlite`)), 'the half-made index has files before the restart');
    node = await serve(tmp.dir);
    try {
      const list = (await call(node, 'GET', '/v2/vector/index')).body;
      assert.deepEqual(list.map((x: { name: string }) => x.name), ['default']);
      assert.deepEqual(catalogueRows(tmp.dir), []);
      assert.deepEqual(indexFiles(tmp.dir, half[0].id), []);
      assert.equal(credentials(tmp.dir)[`vector.${half[0].id}.token`], undefined);
      // the name is free; fill the index with 100k vectors
      const made = (await call(node, 'POST', '/v2/vector/index', { name: 'crashy', similarity_function: 'COSINE', dimension_count: 4 })).body;
      assert.ok(made.id, JSON.stringify(made));
      const index = new Index({ url: made.endpoint, token: made.token });
      for (let b = 0; b < 20; b++) {
        await index.upsert(Array.from({ length: 5000 }, (_, i) => ({ id: `v${b * 5000 + i}`, vector: [Math.sin(i), Math.cos(i), b, 1] })));
      }
      assert.equal((await call(node, 'GET', `/v2/vector/index/${made.id}`)).body.vector_count, 100_000);
      await node.close();

      // delete killed after the index was marked deleting and closed, before its files are removed
      node = await serve(tmp.dir, { VECTOR_TEST_CRASH_POINT: 'vector-index-delete-marked' });
      await assert.rejects(call(node, 'DELETE', `/v2/vector/index/${made.id}`));
      await node.exited;
      assert.deepEqual(catalogueRows(tmp.dir).map((r) => r.state), ['deleting']);
      assert.ok(indexFiles(tmp.dir, made.id).length > 0);
      node = await serve(tmp.dir);
      assert.deepEqual((await call(node, 'GET', '/v2/vector/index')).body.map((x: { name: string }) => x.name), ['default']);
      assert.deepEqual(indexFiles(tmp.dir, made.id), []);
      const url = `http://127.0.0.1:${node.ports.vector}/${made.id}`;
      assert.match(await sdkError(new Index({ url, token: made.token }).info()), /Index not found/);
      const again = await call(node, 'POST', '/v2/vector/index', { name: 'crashy', similarity_function: 'COSINE', dimension_count: 4 });
      assert.equal(again.status, 200);
    } finally {
      await node.close();
    }
  });
});

function catalogueRows(dataDir: string): { id: string; name: string; state: string }[] {
  const db = new Database(path.join(dataDir, 'vector', 'catalogue.db'), { readonly: true });
  try {
    return db.prepare('SELECT id, name, state FROM indexes').all() as { id: string; name: string; state: string }[];
  } finally {
    db.close();
  }
}

const indexFiles = (dataDir: string, id: string) => fs.readdirSync(path.join(dataDir, 'vector')).filter((n) => n.startsWith(id));

/** `node bin/svc.js serve` with vector and mgmt on `dataDir`; resolves once the vector indexes are loaded. */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<SvcProcess> {
  const node = await spawnSvc(['vector', 'mgmt'], { SVC_DATA_DIR: dataDir, ...LOCAL_VECTOR_STORE, ...env });
  // the vector indexes load after the banner: wait until the API answers
  await waitFor('vector indexes loaded', async () => ((await call(node, 'GET', '/v2/vector/index')).status === 200 ? true : undefined), 120_000);
  return node;
}

async function call(node: SvcProcess, method: string, p: string, body?: unknown): Promise<{ status: number; body: any }> {
  const creds = credentials(node.dataDir);
  const res = await fetch(`http://127.0.0.1:${node.ports.mgmt}${p}`, {
    method,
    headers: { authorization: basic(creds['mgmt.user'], creds['mgmt.password']), 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/**
 * The request shapes of the official Python SDK (upstash-vector), sent as raw HTTP because no
 * Python SDK runs here. Its `execute_with_parameters` (`upstash_vector/http.py`) sends every call
 * as `POST` with httpx's `json=payload`: no body at all when the payload is `None` (`info`,
 * `list_namespaces`, `delete_namespace`, `reset`), else the JSON of
 * `core/index_operations.py` and `utils.py`:
 *   upsert   [{"id", "vector", "metadata": null, "data": null}]   (unset fields sent as null)
 *   query    {"topK", "includeVectors", "includeMetadata", "filter": "", "vector"}  (filter "" = none)
 *   batch    [{..., "includeData": false, "filter": ""}, ...]
 *   delete   a bare list of ids: ["id1", "id2"]
 *   range    {"cursor": "", "limit", "includeVectors", "includeMetadata"}
 *   fetch    {"ids", "includeVectors", "includeMetadata"}
 *   update   {"id", "metadata"}
 *   reset    /reset/<ns>, or /reset?all for every namespace
 * and a namespace as the last path segment (`/upsert/<ns>`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startVector } from './helpers.js';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('upstash-vector (Python) request shapes (raw HTTP)', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  before(async () => {
    svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '2' } });
  });
  after(async () => {
    await svc?.close();
  });
  /** httpx `client.post(url, headers=..., json=payload)`: no body and no content type for None. */
  const py = async (path: string, payload?: unknown): Promise<{ status: number; body: Json }> => {
    const headers: Record<string, string> = { authorization: `Bearer ${svc.token()}`, 'Upstash-Telemetry-Sdk': 'upstash-vector-py@v0.6.0' };
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${svc.indexUrl()}${path}`, { method: 'POST', headers, body: payload === undefined ? undefined : JSON.stringify(payload) });
    return { status: res.status, body: await res.json() };
  };
  const ok = (r: { status: number; body: Json }): Json => {
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.result;
  };

  test('upsert with null metadata and data, query with filter "", batch query, fetch, range with cursor ""', async () => {
    assert.equal(ok(await py('/upsert', [
      { id: 'p1', vector: [0.1, 0.2], metadata: null, data: null },
      { id: 'p2', vector: [0.3, 0.4], metadata: { genre: 'drama' }, data: null },
    ])), 'Success');
    const q = ok(await py('/query', { topK: 2, includeVectors: false, includeMetadata: true, filter: '', vector: [0.1, 0.2] }));
    assert.deepEqual(q.map((h: Json) => h.id), ['p1', 'p2']);
    assert.equal(q[0].metadata, undefined, 'metadata sent as null is none');
    assert.deepEqual(q[1].metadata, { genre: 'drama' });
    const batch = ok(await py('/query', [
      { topK: 1, includeVectors: false, includeMetadata: false, includeData: false, filter: '', vector: [0.1, 0.2] },
      { topK: 1, includeVectors: false, includeMetadata: false, includeData: false, filter: "genre = 'drama'", vector: [0.1, 0.2] },
    ]));
    assert.deepEqual(batch.map((l: Json[]) => l.map((h) => h.id)), [['p1'], ['p2']]);
    const f = ok(await py('/fetch', { ids: ['p1', 'nope'], includeVectors: true, includeMetadata: false }));
    assert.equal(f[0].id, 'p1');
    assert.equal(f[0].vector.length, 2);
    assert.equal(f[1], null);
    const page = ok(await py('/range', { cursor: '', limit: 1, includeVectors: false, includeMetadata: false }));
    assert.equal(page.vectors.length, 1);
    assert.notEqual(page.nextCursor, '');
    const rest = ok(await py('/range', { cursor: page.nextCursor, limit: 5, includeVectors: false, includeMetadata: false }));
    assert.deepEqual([...page.vectors, ...rest.vectors].map((v: Json) => v.id).sort(), ['p1', 'p2']);
  });

  test('update {id, metadata}; delete as a bare list of ids; namespaces in the path; bodiless info, list-namespaces, reset, delete-namespace', async () => {
    assert.deepEqual(ok(await py('/update', { id: 'p1', metadata: { genre: 'comedy' } })), { updated: 1 });
    assert.equal(ok(await py('/upsert/py-ns', [{ id: 'n1', vector: [1, 0], metadata: null, data: null }, { id: 'n2', vector: [0, 1], metadata: null, data: null }])), 'Success');
    assert.deepEqual(ok(await py('/delete/py-ns', ['n1', 'missing'])), { deleted: 1 });
    const info = ok(await py('/info'));
    assert.equal(info.dimension, 2);
    assert.equal(info.namespaces['py-ns'].vectorCount, 1);
    assert.deepEqual(ok(await py('/list-namespaces')).sort(), ['', 'py-ns']);
    assert.equal(ok(await py('/reset/py-ns')), 'Success');
    assert.equal(ok(await py('/info')).namespaces['py-ns']?.vectorCount ?? 0, 0);
    assert.equal(ok(await py('/delete-namespace/py-ns')), 'Success');
    assert.deepEqual(ok(await py('/list-namespaces')), ['']);
    assert.deepEqual(ok(await py('/delete', ['p1'])), { deleted: 1 });
    assert.equal(ok(await py('/reset?all')), 'Success');
    assert.equal(ok(await py('/info')).vectorCount, 0);
  });
});

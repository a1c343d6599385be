/**
 * Raw HTTP: statuses and `{error, status}` bodies: 400
 * (malformed JSON, bad fields, filter syntax), 401 (no/wrong token, read-only token on writes),
 * 404 (unknown endpoint, missing namespace), 405 (method), 422 (dimension, no embedder); methods
 * GET/PUT/DELETE accepted; no-argument bodies `[]`, `null`, `{}`, empty.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { raw, startVector } from './helpers.js';

describe('vector HTTP errors and tokens', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  let url: string;
  let token: string;
  before(async () => {
    svc = await startVector([{ name: 'other', type: 'DENSE', dimension: 3 }], { env: { SVC_VECTOR_DIMENSION: '2' } });
    url = svc.indexUrl();
    token = svc.token();
    await raw(`${url}/upsert`, token, JSON.stringify([{ id: 'a', vector: [1, 0], metadata: { genre: 'drama' } }]));
  });
  after(() => svc.close());

  const isError = (r: { status: number; body: any }, status: number, msg?: RegExp) => {
    assert.equal(r.status, status, JSON.stringify(r.body));
    assert.deepEqual(Object.keys(r.body).sort(), ['error', 'status']);
    assert.equal(r.body.status, status);
    assert.equal(typeof r.body.error, 'string');
    if (msg) assert.match(r.body.error, msg);
  };

  test('401 without a token, with a wrong token, and with another index token', async () => {
    isError(await raw(`${url}/info`, undefined, '[]'), 401, /^Unauthorized: Invalid auth token$/);
    isError(await raw(`${url}/info`, 'wrong', '[]'), 401, /^Unauthorized: Invalid auth token$/);
    isError(await raw(`${url}/info`, svc.token('other'), '[]'), 401);
    assert.equal((await raw(`${svc.indexUrl('other')}/info`, svc.token('other'), '[]')).status, 200);
  });

  test('read-only token: queries, fetch, range, info allowed; writes refused', async () => {
    const ro = svc.token('default', true);
    assert.equal((await raw(`${url}/query`, ro, JSON.stringify({ vector: [1, 0], topK: 1 }))).status, 200);
    assert.equal((await raw(`${url}/fetch`, ro, JSON.stringify({ ids: ['a'] }))).status, 200);
    assert.equal((await raw(`${url}/range`, ro, JSON.stringify({ cursor: 0, limit: 1 }))).status, 200);
    assert.equal((await raw(`${url}/info`, ro, '')).status, 200);
    for (const [ep, body] of [
      ['upsert', { id: 'b', vector: [0, 1] }],
      ['delete', { ids: ['a'] }],
      ['update', { id: 'a', data: 'x' }],
      ['reset', []],
      ['delete-namespace/x', []],
    ] as const) isError(await raw(`${url}/${ep}`, ro, JSON.stringify(body)), 401, /read-only/);
    const client = svc.client('default', true);
    await assert.rejects(client.upsert({ id: 'c', vector: [1, 1] }), /read-only/);
    assert.equal((await client.fetch(['a']))[0]!.id, 'a');
  });

  test('rotating a token through the credential store applies at once', async () => {
    svc.ctx.credentials.set('vector.other.token', 'rotated-token');
    assert.equal((await raw(`${svc.indexUrl('other')}/info`, 'rotated-token', '')).status, 200);
    isError(await raw(`${svc.indexUrl('other')}/info`, 'old', ''), 401);
  });

  test('400: malformed JSON, bad shapes, filter syntax error with position', async () => {
    isError(await raw(`${url}/query`, token, '{"vector": [1,'), 400, /Invalid JSON/);
    isError(await raw(`${url}/upsert`, token, JSON.stringify({ id: 1 })), 400);
    isError(await raw(`${url}/upsert`, token, JSON.stringify([{ id: 'x', vector: [1, 0] }, { id: 'y', data: 'only data' }])), 400);
    isError(await raw(`${url}/upsert`, token, JSON.stringify({ id: '', vector: [1, 0] })), 400);
    isError(await raw(`${url}/upsert`, token, JSON.stringify({ id: 'x', vector: [1, 'a'] })), 400);
    isError(await raw(`${url}/upsert`, token, JSON.stringify({ id: 'x', vector: [1, 0], metadata: [1] })), 400);
    isError(await raw(`${url}/query`, token, JSON.stringify({ topK: 1 })), 400);
    isError(await raw(`${url}/query`, token, JSON.stringify({ vector: [1, 0], topK: -1 })), 400);
    isError(await raw(`${url}/range`, token, JSON.stringify({ cursor: 'abc', limit: 1 })), 400);
    isError(await raw(`${url}/range`, token, JSON.stringify({ cursor: 0 })), 400);
    isError(await raw(`${url}/fetch`, token, JSON.stringify({ ids: ['a'], prefix: 'a' })), 400, /^Only one of ids or prefix must be provided\.$/);
    isError(await raw(`${url}/delete`, token, JSON.stringify({})), 400, /^Only and only one of the ids, prefix, or filter must be provided\.$/);
    isError(await raw(`${url}/delete`, token, JSON.stringify({ prefix: 'a', filter: "genre = 'x'" })), 400, /^Only and only one/);
    isError(await raw(`${url}/query`, token, JSON.stringify({ vector: [1, 0], filter: "genre = = 'drama'" })), 400, /position 8/);
    isError(await raw(`${url}/delete`, token, JSON.stringify({ filter: 'genre =' })), 400);
    isError(await raw(`${url}/update`, token, JSON.stringify({ id: 'a', metadataUpdateMode: 'MERGE' })), 400);
    isError(await raw(`${url}/resumable-query-end`, token, JSON.stringify({ uuid: 'none' })), 400);
    isError(await raw(`${url}/delete-namespace`, token, '[]'), 400);
    // Filters work through the raw API (filter "" = none).
    const ok = await raw(`${url}/query`, token, JSON.stringify({ vector: [1, 0], filter: "genre = 'drama'", topK: 3 }));
    assert.deepEqual(ok.body, { result: [{ id: 'a', score: 1 }] });
    assert.equal((await raw(`${url}/query`, token, JSON.stringify({ vector: [1, 0], filter: '' }))).body.result.length, 1);
  });

  test('404 unknown endpoint / bare base URL / missing namespace; 405 method; 422 dimension and embedder', async () => {
    isError(await raw(`${url}/nope`, token, '{}'), 404);
    isError(await raw(`${url}/`, token, '["get","1","2"]'), 404);
    isError(await raw(url, token, '["get","1","2"]'), 404);
    isError(await raw(`${url}/delete-namespace/ghost`, token, '[]'), 404, /^Namespace ghost for the index default does not exist$/);
    isError(await raw(`${url}/info`, token, '', 'PATCH'), 405);
    isError(await raw(`${url}/upsert`, token, JSON.stringify({ id: 'x', vector: [1, 2, 3] })), 422, /^Invalid vector dimension: 3, expected: 2$/);
    isError(
      await raw(`${url}/upsert-data`, token, JSON.stringify({ id: 'x', data: 'hello' })),
      422,
      /^Embedding data for this index is not allowed\. The index must be created with an embedding model to use it\.$/,
    );
    isError(await raw(`${url}/query-data`, token, JSON.stringify({ data: 'hello' })), 422, /^Embedding data/);
  });

  test('GET/PUT/DELETE accepted; no-argument bodies [], null, {}, empty; namespace percent-decoded', async () => {
    for (const body of ['[]', 'null', '{}', '']) assert.equal((await raw(`${url}/list-namespaces`, token, body)).status, 200);
    assert.equal((await raw(`${url}/info`, token, undefined, 'GET')).status, 200);
    assert.equal((await raw(`${url}/fetch`, token, JSON.stringify({ ids: ['a'] }), 'PUT')).body.result[0].id, 'a');
    await raw(`${url}/upsert/a%20b`, token, JSON.stringify({ id: 'z', vector: [0, 1] }));
    assert.ok((await raw(`${url}/list-namespaces`, token, '')).body.result.includes('a b'));
    assert.deepEqual((await raw(`${url}/reset/a%20b`, token, '[]', 'DELETE')).body, { result: 'Success' });
    // Telemetry headers of the SDK are ignored; CORS not required.
    const res = await fetch(`${url}/info`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'Upstash-Telemetry-Sdk': 'x' }, body: '[]' });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  });
});

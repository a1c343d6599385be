/**
 * End-to-end: the unmodified `@upstash/vector` SDK against a dense index (every metric), every
 * endpoint the SDK calls, namespaces, batches, include flags and float32 printing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { raw, startVector } from './helpers.js';

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

describe('dense index through @upstash/vector', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  before(async () => {
    svc = await startVector([
      { name: 'euclid', type: 'DENSE', dimension: 2, metric: 'EUCLIDEAN' },
      { name: 'dot', type: 'DENSE', dimension: 2, metric: 'DOT_PRODUCT' },
    ]);
  });
  after(() => svc.close());

  test('upsert, numeric ids become strings, identical vector scores exactly 1, include flags', async () => {
    const index = svc.client();
    const ns = index.namespace('q');
    assert.equal(await ns.upsert({ id: 33, vector: range(0, 384), metadata: { a: 1 }, data: 'd' } as any), 'Success');
    await ns.upsert([{ id: 'other', vector: range(0, 384).map((x) => 384 - x) }]);
    const bare = await ns.query({ vector: range(0, 384), topK: 2 });
    assert.deepEqual(bare[0], { id: '33', score: 1 });
    assert.equal(bare.length, 2);
    const full = await ns.query({ vector: range(0, 384), topK: 1, includeVectors: true, includeMetadata: true, includeData: true });
    assert.deepEqual(full, [{ id: '33', score: 1, vector: range(0, 384), metadata: { a: 1 }, data: 'd' }]);
    // Dimension fixed by the first upsert: 422 with the reference's message.
    await assert.rejects(index.upsert({ id: 'x', vector: [1, 2] }), /Invalid vector dimension: 2, expected: 384/);
    await assert.rejects(index.query({ vector: [1, 2], topK: 1 }), /Invalid vector dimension: 2, expected: 384/);
  });

  test('float32 storage printed as shortest float32 decimals; cosine/euclidean/dot scores', async () => {
    const e = svc.client('euclid');
    await e.upsert([{ id: 'a', vector: [0.1, 0.2] }, { id: 'b', vector: [1, 1] }]);
    const [f] = await e.fetch(['a'], { includeVectors: true });
    assert.deepEqual(f, { id: 'a', vector: [0.1, 0.2] });
    const r = await e.query({ vector: [0, 0], topK: 2 });
    // 1/(1 + 0.05) in float32 prints as 0.952381 (shortest float32); 1/(1+2) as 0.33333334.
    assert.deepEqual(r, [{ id: 'a', score: 0.952381 }, { id: 'b', score: 0.33333334 }]);
    const fr = Math.fround;
    const sq = fr(fr(fr(0.1) * fr(0.1)) + fr(fr(0.2) * fr(0.2)));
    assert.equal(fr(0.952381), fr(1 / fr(1 + sq)));
    const d = svc.client('dot');
    await d.upsert([{ id: 'u', vector: [0.6, 0.8] }, { id: 'v', vector: [1, 0] }]);
    const r2 = await d.query({ vector: [1, 0], topK: 2 });
    assert.deepEqual(r2, [{ id: 'v', score: 1 }, { id: 'u', score: 0.8 }]);
    const c = svc.client();
    const ns = c.namespace('cos');
    await ns.upsert([{ id: 'p', vector: range(1, 385) }]);
    const r3 = await ns.query({ vector: range(1, 385).map((x) => -x), topK: 1 });
    assert.deepEqual(r3, [{ id: 'p', score: 0 }]);
  });

  test('fetch by ids (order, null), by prefix, both -> exact error', async () => {
    const ns = svc.client().namespace('fetch');
    await ns.upsert(range(0, 5).map((i) => ({ id: `f-${i}`, vector: range(i, i + 384), metadata: i === 0 ? undefined : { i } })));
    const got = await ns.fetch(['f-3', 'nope', 'f-0'], { includeMetadata: true });
    assert.deepEqual(got, [{ id: 'f-3', metadata: { i: 3 } }, null, { id: 'f-0' }]);
    const byPrefix = await ns.fetch({ prefix: 'f-' });
    assert.deepEqual(byPrefix.map((r) => r!.id), ['f-0', 'f-1', 'f-2', 'f-3', 'f-4']);
    await assert.rejects(ns.fetch({ ids: ['f-0'], prefix: 'f' } as any), /^UpstashError: Only one of ids or prefix must be provided\.$/);
  });

  test('range: insertion order, cursor look-ahead, prefix, cursor forms', async () => {
    const ns = svc.client().namespace('range');
    await ns.upsert(range(0, 20).map((i) => ({ id: `id-${i}`, vector: range(i, i + 384) })));
    const p1 = await ns.range({ cursor: 0, limit: 5 });
    assert.equal(p1.nextCursor, '5');
    assert.deepEqual(p1.vectors.map((v) => v.id), ['id-0', 'id-1', 'id-2', 'id-3', 'id-4']);
    for (const cursor of ['0', '']) assert.equal((await ns.range({ cursor, limit: 5 })).nextCursor, '5');
    let cursor: string | number = 0;
    const seen: string[] = [];
    do {
      const page: { nextCursor: string; vectors: { id: string | number }[] } = await ns.range({ cursor, limit: 7 });
      seen.push(...page.vectors.map((v) => String(v.id)));
      cursor = page.nextCursor;
    } while (cursor !== '');
    assert.equal(seen.length, 20);
    const pre = await ns.range({ cursor: 0, limit: 2, prefix: 'id-1' });
    assert.deepEqual(pre.vectors.map((v) => v.id), ['id-1', 'id-10']);
    assert.notEqual(pre.nextCursor, '');
    // The page that holds the last match ends with "" (look-ahead, no empty trailing page).
    const last = await ns.range({ cursor: 0, limit: 11, prefix: 'id-1' });
    assert.equal(last.vectors.length, 11);
    assert.equal(last.nextCursor, '');
    const withVec = await ns.range({ cursor: 19, limit: 1, includeVectors: true });
    assert.deepEqual(withVec, { nextCursor: '', vectors: [{ id: 'id-19', vector: range(19, 403) }] });
  });

  test('delete by id, ids, prefix, filter; exact error; deleting twice gives 0', async () => {
    const index = svc.client();
    const opts = { namespace: 'del' };
    await index.upsert(
      [
        { id: 'a1', vector: range(0, 384), metadata: { type: 'animal' } },
        { id: 'a2', vector: range(1, 385), metadata: { type: 'animal' } },
        { id: 'p1', vector: range(2, 386), metadata: { type: 'plant' } },
        { id: 'x1', vector: range(3, 387) },
        { id: 'x2', vector: range(4, 388) },
      ],
      opts,
    );
    assert.deepEqual(await index.delete({ filter: "type = 'animal'" }, opts), { deleted: 2 });
    assert.deepEqual(await index.delete('p1', opts), { deleted: 1 });
    assert.deepEqual(await index.delete('p1', opts), { deleted: 0 });
    assert.deepEqual(await index.delete({ prefix: 'x' }, opts), { deleted: 2 });
    await assert.rejects(index.delete({ ids: ['a'], prefix: 'x' } as any, opts), /^UpstashError: Only and only one of the ids, prefix, or filter must be provided\.$/);
    assert.equal((await index.info()).namespaces.del.vectorCount, 0);
  });

  test('update: PATCH merges, OVERWRITE replaces, data alone keeps metadata, vector update, missing id', async () => {
    const ns = svc.client().namespace('upd');
    await ns.upsert({ id: 'u', vector: range(0, 384), metadata: { a: 1, b: { c: 2, d: 3 } }, data: 'old' } as any);
    assert.deepEqual(await ns.update({ id: 'u', metadata: { b: { c: null, e: 4 }, z: 1 }, metadataUpdateMode: 'PATCH' } as any), { updated: 1 });
    assert.deepEqual((await ns.fetch(['u'], { includeMetadata: true }))[0]!.metadata, { a: 1, b: { d: 3, e: 4 }, z: 1 });
    await ns.update({ id: 'u', metadata: { only: true } });
    assert.deepEqual((await ns.fetch(['u'], { includeMetadata: true }))[0]!.metadata, { only: true });
    await ns.update({ id: 'u', data: 'new' });
    assert.deepEqual(await ns.fetch(['u'], { includeMetadata: true, includeData: true }), [{ id: 'u', metadata: { only: true }, data: 'new' }]);
    await ns.update({ id: 'u', vector: range(5, 389) });
    assert.deepEqual((await ns.query({ vector: range(5, 389), topK: 1 }))[0], { id: 'u', score: 1 });
    assert.deepEqual(await ns.update({ id: 'missing', data: 'x' }), { updated: 0 });
  });

  test('queryMany: one query answers flat (SDK nests it), several answer a list each; filters apply', async () => {
    const index = svc.client();
    const opts = { namespace: 'many' };
    await index.upsert(
      [
        { id: '1', vector: range(0, 384), metadata: { animal: 'elephant', tags: ['mammal'], diet: 'herbivore' } },
        { id: '2', vector: range(0, 384), metadata: { animal: 'tiger', tags: ['mammal'], diet: 'carnivore' } },
      ],
      opts,
    );
    const res = await index.queryMany(
      [
        { vector: range(0, 384), topK: 1, filter: "tags[0] = 'mammal' AND diet = 'herbivore'", includeMetadata: true },
        { vector: range(0, 384), topK: 1, filter: "tags[0] = 'mammal' AND diet = 'carnivore'", includeMetadata: true },
      ],
      opts,
    );
    assert.deepEqual(res, [
      [{ id: '1', score: 1, metadata: { animal: 'elephant', tags: ['mammal'], diet: 'herbivore' } }],
      [{ id: '2', score: 1, metadata: { animal: 'tiger', tags: ['mammal'], diet: 'carnivore' } }],
    ]);
    const flat = await raw(`${svc.indexUrl()}/query/many`, svc.token(), JSON.stringify([{ vector: range(0, 384), topK: 1, filter: "diet = 'carnivore'" }]));
    assert.deepEqual(flat.body, { result: [{ id: '2', score: 1 }] });
    const one = await index.queryMany([{ vector: range(0, 384), topK: 1, filter: "animal = 'elephant'" }], opts);
    assert.deepEqual(one, [[{ id: '1', score: 1 }]]);
  });

  test('namespaces: list, info, reset one / all keeps them listed, delete, rename, random', async () => {
    const index = svc.client();
    await index.upsert({ id: 'n1', vector: range(0, 384) }, { namespace: 'ns-1' });
    await index.upsert({ id: 'n2', vector: range(0, 384) }, { namespace: 'ns-2' });
    assert.ok((await index.listNamespaces()).includes(''));
    assert.ok((await index.listNamespaces()).includes('ns-1'));
    const info = await index.info();
    assert.equal(info.namespaces['ns-1'].vectorCount, 1);
    assert.equal(info.pendingVectorCount, 0);
    assert.equal(info.dimension, 384);
    assert.equal(info.similarityFunction, 'COSINE');
    assert.equal((info as any).indexType, 'DENSE');
    assert.deepEqual((info as any).denseIndex, { dimension: 384, similarityFunction: 'COSINE', embeddingModel: '' });
    assert.ok(info.indexSize > 0);
    assert.equal(await index.reset({ namespace: 'ns-1' }), 'Success');
    assert.equal((await index.info()).namespaces['ns-1'].vectorCount, 0);
    const r = await raw(`${svc.indexUrl()}/random/ns-2`, svc.token(), undefined, 'GET');
    assert.equal(r.body.result.id, 'n2');
    assert.deepEqual(r.body.result.vector, range(0, 384));
    assert.deepEqual((await raw(`${svc.indexUrl()}/random/ns-1`, svc.token(), undefined, 'GET')).body, { result: null });
    const ren = await raw(`${svc.indexUrl()}/rename-namespace`, svc.token(), JSON.stringify({ namespace: 'ns-2', newNamespace: 'ns-3' }));
    assert.deepEqual(ren.body, { result: { renamed: true } });
    assert.deepEqual(await index.fetch(['n2'], { namespace: 'ns-3' }), [{ id: 'n2' }]);
    const clash = await raw(`${svc.indexUrl()}/rename-namespace`, svc.token(), JSON.stringify({ namespace: 'ns-3', newNamespace: 'ns-1' }));
    assert.equal(clash.status, 400);
    const over = await raw(`${svc.indexUrl()}/rename-namespace`, svc.token(), JSON.stringify({ namespace: 'ns-3', newNamespace: 'ns-1', deleteExisting: true }));
    assert.deepEqual(over.body, { result: { renamed: true } });
    assert.equal(await index.deleteNamespace('ns-1'), 'Success');
    assert.ok(!(await index.listNamespaces()).includes('ns-1'));
    await assert.rejects(index.deleteNamespace('ns-1'), /Namespace ns-1 for the index default does not exist/);
    await index.upsert({ id: 'n4', vector: range(0, 384) }, { namespace: 'ns-4' });
    assert.equal(await index.reset({ all: true }), 'Success');
    const after = await index.info();
    assert.equal(after.vectorCount, 0);
    assert.equal(after.namespaces['ns-4'].vectorCount, 0);
    // Positions restart at 0 after a reset.
    await index.upsert({ id: 'again', vector: range(0, 384) }, { namespace: 'ns-4' });
    assert.deepEqual(await index.range({ cursor: 0, limit: 1 }, { namespace: 'ns-4' }), { nextCursor: '', vectors: [{ id: 'again' }] });
  });

  test('resumable query: batches without duplicates, stop, unknown uuid', async () => {
    const index = svc.client();
    const opts = { namespace: 'res' };
    await index.upsert(range(0, 6).map((i) => ({ id: i, vector: range(i, i + 384) })), opts);
    const { result, fetchNext, stop } = await index.resumableQuery({ vector: range(0, 384), topK: 2, maxIdle: 60 }, opts);
    assert.deepEqual(result.map((r) => r.id), ['0', '1']);
    const n1 = await fetchNext(3);
    assert.deepEqual(n1.map((r) => r.id), ['2', '3', '4']);
    const n2 = await fetchNext(3);
    assert.deepEqual(n2.map((r) => r.id), ['5']);
    assert.equal(await stop(), 'Success');
    await assert.rejects(async () => fetchNext(1), /already been stopped/);
    const bad = await raw(`${svc.indexUrl()}/resumable-query-next`, svc.token(), JSON.stringify({ uuid: 'nope', additionalK: 1 }));
    assert.equal(bad.status, 400);
  });
});

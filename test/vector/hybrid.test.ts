/**
 * End-to-end: sparse and hybrid indexes through `@upstash/vector`, reproducing the reference's
 * exact float32 scores: IDF 0.028608438 / 0.018800145, RRF 0.033333335 /
 * 0.032795697, sparse-only hybrid 0.26666638, resumable DBSF 0.617851 / 0.5 / 0.5.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FusionAlgorithm, WeightingStrategy } from '@upstash/vector';
import { raw, startVector } from './helpers.js';

const sparseData = [
  { id: 'id0', sparseVector: { indices: [0, 1], values: [0.1, 0.2] } },
  { id: 'id1', sparseVector: { indices: [1, 2], values: [0.2, 0.3] }, metadata: { key: 'value' } },
  { id: 'id2', sparseVector: { indices: [2, 3], values: [0.3, 0.4] }, metadata: { key: 'value' }, data: 'data' },
];
const hybridData = [
  { id: 'id0', vector: [0.1, 0.2], sparseVector: { indices: [0, 1], values: [0.1, 0.2] } },
  { id: 'id1', vector: [0.2, 0.3], sparseVector: { indices: [1, 2], values: [0.2, 0.3] }, metadata: { key: 'value' } },
  { id: 'id2', vector: [0.3, 0.4], sparseVector: { indices: [2, 3], values: [0.3, 0.4] }, metadata: { key: 'value' }, data: 'data' },
];

describe('sparse and hybrid indexes', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  before(async () => {
    svc = await startVector([
      { name: 'sparse', type: 'SPARSE' },
      { name: 'hybrid', type: 'HYBRID', dimension: 2, metric: 'COSINE' },
    ]);
  });
  after(() => svc.close());

  test('sparse: inner product, IDF with +1, resumable batches', async () => {
    const index = svc.client('sparse');
    const namespace = 'resumable-sparse';
    await index.upsert(sparseData as any, { namespace });
    const plain = await index.query({ sparseVector: { indices: [0, 1], values: [0.1, 0.2] }, topK: 5 }, { namespace });
    // float32: 0.1·0.1 + 0.2·0.2 and 0.2·0.2; id2 shares no index and is not returned.
    const fr = Math.fround;
    const p2 = fr(fr(0.2) * fr(0.2));
    const expected0 = parseFloat(fr(fr(fr(0.1) * fr(0.1)) + p2).toPrecision(8));
    assert.deepEqual(plain.map((r) => r.id), ['id0', 'id1']);
    assert.equal(fr(plain[0].score), fr(expected0));
    assert.equal(plain[1].score, 0.040000003);
    assert.equal(fr(plain[1].score), p2);
    const { result, fetchNext, stop } = await index.resumableQuery(
      {
        sparseVector: { indices: [0, 1], values: [0.1, 0.2] },
        topK: 1,
        includeVectors: true,
        includeMetadata: true,
        includeData: true,
        weightingStrategy: WeightingStrategy.IDF,
        fusionAlgorithm: FusionAlgorithm.DBSF,
        maxIdle: 3600,
      },
      { namespace },
    );
    assert.deepEqual(result, [{ id: 'id0', score: 0.028_608_438, sparseVector: { indices: [0, 1], values: [0.1, 0.2] } }]);
    assert.deepEqual(await fetchNext(1), [
      { id: 'id1', score: 0.018_800_145, sparseVector: { indices: [1, 2], values: [0.2, 0.3] }, metadata: { key: 'value' } },
    ]);
    await stop();
    await assert.rejects(index.upsert({ id: 'd', vector: [1, 2] } as any), /vector is not allowed|sparseVector is required/);
    const tooMany = { indices: Array.from({ length: 1001 }, (_, i) => i), values: Array.from({ length: 1001 }, () => 1) };
    await assert.rejects(index.upsert({ id: 'big', sparseVector: tooMany }), /at most 1000/);
    const info = await index.info();
    assert.equal((info as any).indexType, 'SPARSE');
    assert.deepEqual((info as any).sparseIndex, { embeddingModel: '' });
  });

  test('hybrid: RRF (K=60, 0-based), DBSF ignored for one component, raw IDF sparse score', async () => {
    const index = svc.client('hybrid');
    const namespace = 'query-hybrid';
    await index.upsert(hybridData as any, { namespace });
    const result = await index.queryMany(
      [
        { topK: 1, vector: [0.1, 0.1], sparseVector: { indices: [3, 4], values: [0.1, 0.2] }, fusionAlgorithm: FusionAlgorithm.RRF },
        { topK: 1, vector: [0.5, 0.1], sparseVector: { indices: [0, 1], values: [0.5, 0.1] }, includeVectors: true },
        {
          topK: 1,
          sparseVector: { indices: [2, 3], values: [0.5, 0.5] },
          weightingStrategy: WeightingStrategy.IDF,
          fusionAlgorithm: FusionAlgorithm.DBSF,
          includeMetadata: true,
        },
      ],
      { namespace },
    );
    assert.deepEqual(result, [
      [{ id: 'id2', score: 0.033_333_335 }],
      [{ id: 'id0', score: 0.032_795_697, vector: [0.1, 0.2], sparseVector: { indices: [0, 1], values: [0.1, 0.2] } }],
      [{ id: 'id2', score: 0.266_666_38, metadata: { key: 'value' } }],
    ]);
    await assert.rejects(index.upsert({ id: 'x', vector: [1, 2] }, { namespace }), /both vector and sparseVector are required/);
    const info = (await index.info()) as any;
    assert.equal(info.indexType, 'HYBRID');
    assert.deepEqual(info.denseIndex, { dimension: 2, similarityFunction: 'COSINE', embeddingModel: '' });
    assert.deepEqual(info.sparseIndex, { embeddingModel: '' });
  });

  test('hybrid resumable query with DBSF (sample σ; one-element list -> 0.5)', async () => {
    const index = svc.client('hybrid');
    const namespace = 'resumable-hybrid';
    await index.upsert(hybridData as any, { namespace });
    const { result, fetchNext, stop } = await index.resumableQuery(
      {
        vector: [0.1, 0.1],
        sparseVector: { indices: [0], values: [0.1] },
        topK: 2,
        includeVectors: true,
        includeMetadata: true,
        includeData: true,
        weightingStrategy: WeightingStrategy.IDF,
        fusionAlgorithm: FusionAlgorithm.DBSF,
        maxIdle: 3600,
      },
      { namespace },
    );
    assert.deepEqual(result, [
      { id: 'id2', score: 0.617_851, vector: [0.3, 0.4], sparseVector: { indices: [2, 3], values: [0.3, 0.4] }, metadata: { key: 'value' }, data: 'data' },
      { id: 'id0', score: 0.5, vector: [0.1, 0.2], sparseVector: { indices: [0, 1], values: [0.1, 0.2] } },
    ]);
    assert.deepEqual(await fetchNext(1), [
      { id: 'id1', score: 0.5, vector: [0.2, 0.3], sparseVector: { indices: [1, 2], values: [0.2, 0.3] }, metadata: { key: 'value' } },
    ]);
    await stop();
  });

  test('hybrid: update of one part keeps the other; queryMode is accepted on vector queries', async () => {
    const index = svc.client('hybrid');
    const namespace = 'upd';
    await index.upsert(hybridData as any, { namespace });
    assert.deepEqual(await index.update({ id: 'id0', vector: [0.4, 0.3] }, { namespace }), { updated: 1 });
    const [r] = await index.fetch(['id0'], { includeVectors: true, namespace });
    assert.deepEqual(r, { id: 'id0', vector: [0.4, 0.3], sparseVector: { indices: [0, 1], values: [0.1, 0.2] } });
    const q = await raw(`${svc.indexUrl('hybrid')}/query/upd`, svc.token('hybrid'), JSON.stringify({ vector: [0.4, 0.3], topK: 1 }));
    assert.deepEqual(q.body, { result: [{ id: 'id0', score: 1 }] });
  });

  test('a repeated sparse index is accepted; its values are summed (upsert, update, query, raw HTTP)', async () => {
    const index = svc.client('sparse');
    const namespace = 'repeated-index';
    const fr = Math.fround;
    await index.upsert({ id: 'r1', sparseVector: { indices: [7, 3, 7], values: [0.1, 0.5, 0.2] } }, { namespace });
    const [got] = await index.fetch(['r1'], { namespace, includeVectors: true });
    assert.deepEqual(got?.sparseVector?.indices, [7, 3]);
    assert.equal(fr(got!.sparseVector!.values[0]), fr(fr(0.1) + fr(0.2)));
    assert.equal(fr(got!.sparseVector!.values[1]), fr(0.5));
    // query [7,7] x [1,1] = one index 7 of weight 2: score 2 × 0.3
    const [hit] = await index.query({ sparseVector: { indices: [7, 7], values: [1, 1] }, topK: 1 }, { namespace });
    assert.equal(hit.id, 'r1');
    assert.equal(fr(hit.score), fr(2 * fr(fr(0.1) + fr(0.2))));
    assert.deepEqual(await index.update({ id: 'r1', sparseVector: { indices: [1, 1], values: [0.25, 0.25] } }, { namespace }), { updated: 1 });
    const [updated] = await index.fetch(['r1'], { namespace, includeVectors: true });
    assert.deepEqual(updated?.sparseVector, { indices: [1], values: [0.5] });
    const r = await raw(`${svc.indexUrl('sparse')}/upsert/${namespace}`, svc.token('sparse'), JSON.stringify({ id: 'r2', sparseVector: { indices: [7, 7], values: [0.1, 0.2] } }));
    assert.equal(r.status, 200);
  });

});

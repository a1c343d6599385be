/**
 * Recall: 20k random 32-d vectors through the SDK, HNSW answers
 * against the brute-force oracle (`FlatDense`, same interface): recall@10 >= 0.95; filtered
 * queries at 0.1 % and 10 % selectivity never return fewer than topK and stay exact/accurate.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FlatDense, HnswDense } from '../../src/vector/engine/dense.js';
import { randomVectors, rng, startVector } from './helpers.js';

const N = 20_000;
const D = 32;
const Q = 100;

describe('recall against exact search', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  const vectors = randomVectors(N, D, 7);
  const queries = randomVectors(Q, D, 99);
  const r = rng(3);
  // 20 records (0.1 %) are 'rare'; 10 % have tag 'a' and year >= 2000.
  const meta = vectors.map((_, i) => ({
    kind: i % 1000 === 17 ? 'rare' : 'common',
    tag: i % 10 === 3 ? 'a' : r() < 0.5 ? 'c' : 'd',
    year: i % 10 === 3 ? 2000 + (i % 20) : 1990,
  }));
  const oracle = new FlatDense(D, 'COSINE', N);
  vectors.forEach((v, i) => oracle.add(i, v));

  before(async () => {
    svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: String(D) } });
    const index = svc.client();
    for (let i = 0; i < N; i += 2000) {
      await index.upsert(vectors.slice(i, i + 2000).map((v, j) => ({ id: String(i + j), vector: v, metadata: meta[i + j] })));
    }
  });
  after(() => svc.close());

  test('the flat oracle and an in-process HNSW share one interface', () => {
    const h = new HnswDense(D, 'COSINE', { m: 16, efConstruction: 100, efSearch: 64 });
    vectors.slice(0, 500).forEach((v, i) => h.add(i, v));
    const f = new FlatDense(D, 'COSINE');
    vectors.slice(0, 500).forEach((v, i) => f.add(i, v));
    for (const idx of [h, f]) {
      assert.equal(idx.size, 500);
      idx.remove(0);
      assert.equal(idx.size, 499);
      assert.ok(!idx.search(vectors[0], 5).some((n) => n.label === 0));
    }
    assert.deepEqual(f.exact(vectors[1], 1, [1, 2, 3]).map((n) => n.label), [1]);
  });

  test('recall@10 >= 0.95 over 100 queries (HTTP, HNSW) vs brute force', async () => {
    const index = svc.client();
    let hit = 0;
    for (const q of queries) {
      const truth = new Set(oracle.search(q, 10).map((n) => String(n.label)));
      const got = await index.query({ vector: q, topK: 10 });
      assert.equal(got.length, 10);
      for (const g of got) if (truth.has(String(g.id))) hit++;
      for (let i = 1; i < got.length; i++) assert.ok(got[i - 1].score >= got[i].score);
    }
    const recall = hit / (Q * 10);
    assert.ok(recall >= 0.95, `recall@10 = ${recall}`);
  });

  test('filtered at 0.1 % selectivity: exactly topK results, the exact ones', async () => {
    const index = svc.client();
    const rare = new Set(meta.flatMap((m, i) => (m.kind === 'rare' ? [i] : [])));
    assert.equal(rare.size, 20);
    for (const q of queries.slice(0, 20)) {
      const got = await index.query({ vector: q, topK: 10, filter: "kind = 'rare'", includeMetadata: true });
      assert.equal(got.length, 10);
      const truth = oracle.exact(q, 10, rare).map((n) => String(n.label));
      assert.deepEqual(got.map((g) => String(g.id)), truth);
      for (const g of got) assert.equal((g.metadata as any).kind, 'rare');
    }
    // 20 match: asking for 50 gives all 20.
    assert.equal((await index.query({ vector: queries[0], topK: 50, filter: "kind = 'rare'" })).length, 20);
  });

  test('filtered at 10 % selectivity (HNSW + filter callback): topK results, recall >= 0.9', async () => {
    const index = svc.client();
    const labels = new Set(meta.flatMap((m, i) => (m.year >= 2000 && ['a', 'b'].includes(m.tag) ? [i] : [])));
    assert.equal(labels.size, N / 10);
    let hit = 0;
    for (const q of queries.slice(0, 30)) {
      const got = await index.query({ vector: q, topK: 10, filter: "year >= 2000 AND tag IN ('a','b')" });
      assert.equal(got.length, 10);
      const truth = new Set(oracle.exact(q, 10, labels).map((n) => String(n.label)));
      for (const g of got) {
        assert.ok(labels.has(Number(g.id)));
        if (truth.has(String(g.id))) hit++;
      }
    }
    assert.ok(hit / 300 >= 0.9, `filtered recall ${hit / 300}`);
  });
});

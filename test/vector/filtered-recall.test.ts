/**
 * Filtered queries at every selectivity, and writes that do not hold queries back.
 *
 * - 5,000 random 32-d vectors through the SDK; filters selecting 0.1 %, 1 %, 10 % and 50 % of the
 *   records (independent of the vectors), and one whose matches lie on the far side of the queries
 *   (so the post-filtered HNSW search finds too few and the fallbacks run): every answer has
 *   min(topK, matches) records, all matching, best first, and recall@10 >= 0.95 against the exact
 *   filtered oracle (`FlatDense`). Both dense strategies (8-bit scan re-ranked, post-filtered HNSW)
 *   run here whatever the measured costs say, because the selectivities span both sides.
 * - Graph insertion off the write path: points written are found by the very next query while
 *   they still wait for insertion (exact scan of the queue), and after insertion.
 * - A stream of upsert batches of 100 over HTTP with queries running alongside: every query is
 *   answered, and every acknowledged batch is visible to the next query.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FlatDense, HnswDense } from '../../src/vector/engine/dense.js';
import { VectorIndex } from '../../src/vector/engine/vector-index.js';
import { runQuery } from '../../src/vector/query/execute.js';
import { createLogger } from '../../src/logger.js';
import { tempDir } from '../helpers/env.js';
import { denseDefinition, engineQuery, nearestId, randomVectors, startVector } from './helpers.js';

const N = 5_000;
const D = 32;
const Q = 40;

describe('filtered recall at 0.1 %, 1 %, 10 %, 50 % selectivity', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  const vectors = randomVectors(N, D, 11);
  const queries = randomVectors(Q, D, 12).map((q) => {
    q[0] = -Math.abs(q[0]) - 0.5; // queries lean to negative x0; the 'far' filter keeps x0 > 0
    return q;
  });
  const meta = vectors.map((v, i) => ({ r: (i * 7919) % 1000, far: v[0] > 0 }));
  const oracle = new FlatDense(D, 'COSINE', N);
  vectors.forEach((v, i) => oracle.add(i, v));

  before(async () => {
    svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: String(D) } });
    const index = svc.client();
    for (let i = 0; i < N; i += 1000) {
      await index.upsert(vectors.slice(i, i + 1000).map((v, j) => ({ id: String(i + j), vector: v, metadata: meta[i + j] })));
    }
  });
  after(() => svc.close());

  const cases = [
    { name: '0.1 %', filter: 'r < 1', keep: (i: number) => meta[i].r < 1 },
    { name: '1 %', filter: 'r < 10', keep: (i: number) => meta[i].r < 10 },
    { name: '10 %', filter: 'r < 100', keep: (i: number) => meta[i].r < 100 },
    { name: '50 %', filter: 'r < 500', keep: (i: number) => meta[i].r < 500 },
    { name: 'far side (~50 %)', filter: 'far = true', keep: (i: number) => meta[i].far },
  ];
  for (const c of cases) {
    test(`${c.name}: min(topK, matches) results, all matching, recall@10 >= 0.95`, async (t) => {
      const index = svc.client();
      const matches = meta.filter((_, i) => c.keep(i)).length;
      let hit = 0;
      let total = 0;
      for (const q of queries) {
        const truth = oracle.search(q, 10, c.keep).map((n) => String(n.label));
        const got = await index.query({ vector: q, topK: 10, filter: c.filter });
        assert.equal(got.length, Math.min(10, matches));
        for (const g of got) assert.ok(c.keep(Number(g.id)), `${g.id} does not match ${c.filter}`);
        for (let i = 1; i < got.length; i++) assert.ok(got[i - 1].score >= got[i].score);
        const t = new Set(truth);
        for (const g of got) if (t.has(String(g.id))) hit++;
        total += truth.length;
      }
      t.diagnostic(`recall@10 ${(hit / total).toFixed(3)}, ${matches} matches`);
      assert.ok(hit / total >= 0.95, `recall@10 ${(hit / total).toFixed(3)} for ${c.filter} (${matches} matches)`);
    });
  }
});

test('filtered and unfiltered queries score a record alike; fresh writes and deletes are seen by the filtered scan at once (SDK)', async () => {
  const d = 48;
  const svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: String(d) } });
  try {
    const index = svc.client();
    const vs = randomVectors(3000, d, 51);
    await index.upsert(vs.slice(0, 2500).map((v, i) => ({ id: String(i), vector: v, metadata: { g: i % 20 } })));
    const cos = (a: number[], b: number[]) => {
      let ab = 0;
      let aa = 0;
      let bb = 0;
      for (let j = 0; j < a.length; j++) {
        ab += a[j] * b[j];
        aa += a[j] * a[j];
        bb += b[j] * b[j];
      }
      return (1 + ab / Math.sqrt(aa * bb)) / 2;
    };
    for (const q of randomVectors(10, d, 52)) {
      // 5 % selectivity on 2,500 records: the exact scan of the matches (8-bit codes, re-ranked)
      const filtered = await index.query({ vector: q, topK: 10, filter: 'g = 3' });
      const unfiltered = await index.query({ vector: q, topK: 200 });
      assert.equal(filtered.length, 10);
      const byId = new Map(unfiltered.map((r) => [String(r.id), r.score]));
      let common = 0;
      for (const r of filtered) {
        assert.ok(Math.abs(r.score - cos(q, vs[Number(r.id)])) < 1e-6, `score of ${r.id}`);
        const u = byId.get(String(r.id));
        if (u === undefined) continue;
        common++;
        assert.ok(Math.abs(u - r.score) < 1e-6, `${r.id}: filtered ${r.score}, unfiltered ${u}`);
      }
      assert.ok(common > 0, 'some filtered hits are among the unfiltered top 200');
    }
    // A batch written just now (graph insertion may still be queued) is found by a filtered query
    // with its score; a deleted match disappears; the filter's cached match list follows both.
    const probe = vs[2999];
    assert.ok(!(await index.query({ vector: probe, topK: 1, filter: 'g = 7' })).some((r) => r.id === 'new'));
    await index.upsert([...vs.slice(2500, 2999).map((v, i) => ({ id: String(2500 + i), vector: v, metadata: { g: (2500 + i) % 20 } })), { id: 'new', vector: probe, metadata: { g: 7 } }]);
    const [top] = await index.query({ vector: probe, topK: 1, filter: 'g = 7' });
    assert.equal(top.id, 'new');
    assert.equal(top.score, 1);
    await index.delete('new');
    const after = await index.query({ vector: probe, topK: 5, filter: 'g = 7' });
    assert.equal(after.length, 5);
    assert.ok(!after.some((r) => r.id === 'new'));
  } finally {
    await svc.close();
  }
});

const logger = createLogger('silent');

test('points waiting for graph insertion are found at once, and after insertion', async () => {
  const tmp = tempDir();
  try {
    const idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    const vs = randomVectors(3000, D, 21);
    await idx.upsert('', vs.slice(0, 2000).map((v, i) => ({ id: String(i), vector: v, metadata: { even: i % 2 === 0 } })));
    await idx.whenIndexed();
    const ns = idx.ns('')!;
    // Insertion held as while a snapshot reads the graph: the answer waits for the WAL fsync, and
    // meanwhile the indexer would insert the whole batch (32-d points are quick).
    const graph = ns.dense as HnswDense;
    graph.saving++;
    await idx.upsert('', vs.slice(2000).map((v, i) => ({ id: String(2000 + i), vector: v, metadata: { even: i % 2 === 0 } })));
    assert.equal(ns.dense!.pending, 1000, 'the second batch waits for graph insertion');
    for (const i of [2000, 2500, 2998]) {
      assert.equal(nearestId(idx, ns, vs[i]), String(i), `pending ${i} found unfiltered`);
      const [hit] = runQuery(idx, ns, engineQuery(vs[i], 'even = true'), 1, 1);
      assert.equal(ns.ids[hit.label], String(i), `pending ${i} found filtered`);
      assert.equal(hit.score, 1, `pending ${i}: score of its own vector`);
    }
    graph.saving--; // the next write schedules the indexer again
    // An update of an indexed point is seen with its new vector (queued or inserted).
    await idx.upsert('', [{ id: '5', vector: vs[2999] }]);
    const top = runQuery(idx, ns, engineQuery(vs[2999]), 2, 2).map((s) => ns.ids[s.label]);
    assert.deepEqual(new Set(top), new Set(['5', '2999']));
    await idx.whenIndexed();
    assert.equal(ns.dense!.pending, 0);
    for (const i of [2000, 2500, 2998]) assert.equal(nearestId(idx, ns, vs[i]), String(i));
    await idx.close();
  } finally {
    tmp.cleanup();
  }
});

test('a stream of upsert batches of 100 with queries alongside: every query answered, every batch visible', async () => {
  const svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '64' } });
  try {
    const index = svc.client();
    const vs = randomVectors(6000, 64, 31);
    await index.upsert(vs.slice(0, 1000).map((v, i) => ({ id: String(i), vector: v })));
    let writing = true;
    let answered = 0;
    const reader = (async () => {
      let i = 0;
      while (writing) {
        const got = await index.query({ vector: vs[i++ % 1000], topK: 5 });
        assert.equal(got.length, 5);
        answered++;
      }
    })();
    for (let b = 1000; b < vs.length; b += 100) {
      await index.upsert(vs.slice(b, b + 100).map((v, j) => ({ id: String(b + j), vector: v })));
      const last = b + 99;
      const got = await index.query({ vector: vs[last], topK: 1 });
      assert.equal(got[0]?.id, String(last), `batch ending at ${last} visible after its acknowledgement`);
    }
    writing = false;
    await reader;
    assert.ok(answered > 0);
    assert.equal((await index.info()).vectorCount, vs.length);
  } finally {
    await svc.close();
  }
});

test('a snapshot taken while points wait for insertion covers only the graph; a crash replays the rest', async () => {
  const tmp = tempDir();
  try {
    let idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    const vs = randomVectors(1500, D, 41);
    await idx.upsert('', vs.slice(0, 1000).map((v, i) => ({ id: String(i), vector: v })));
    await idx.whenIndexed();
    // insertion held as while a snapshot reads the graph (the answers wait for the WAL fsync,
    // long enough for the indexer to insert these 32-d points otherwise)
    const graph = idx.ns('')!.dense as HnswDense;
    graph.saving++;
    await idx.upsert('', vs.slice(1000).map((v, i) => ({ id: String(1000 + i), vector: v })));
    await idx.upsert('', [{ id: '3', vector: vs[1499] }]); // an update queued too
    assert.equal(graph.pending, 501);
    graph.saving--;
    await idx.maintain(1); // snapshot now (it holds insertion again at once): covers the indexed part only
    idx.store.close(); // crash: no closing snapshot
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    assert.equal(idx.loadStats.fromSnapshot, 1);
    assert.ok(idx.loadStats.replayed > 0 && idx.loadStats.replayed <= 501, `replayed ${idx.loadStats.replayed}`);
    const ns = idx.ns('')!;
    assert.equal(ns.count, 1500);
    for (const i of [0, 999, 1000, 1498]) assert.equal(nearestId(idx, ns, vs[i]), String(i));
    assert.deepEqual(new Set(runQuery(idx, ns, engineQuery(vs[1499]), 2, 2).map((s) => ns.ids[s.label])), new Set(['3', '1499']));
    await idx.whenIndexed();
    for (const i of [0, 1000, 1498]) assert.equal(nearestId(idx, ns, vs[i]), String(i));
    await idx.close();
  } finally {
    tmp.cleanup();
  }
});

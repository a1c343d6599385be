/**
 * Equal scores: every query path orders results by score descending, then id ascending in UTF-8
 * byte order, so `topK: n` is the first n of any larger `topK` whatever the insertion order — dense
 * (pending points' exact scan, HNSW graph, filtered exact scan / post-filter), int8, sparse, hybrid
 * (RRF and DBSF), namespaces and resumable queries. Through the official SDK.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FusionAlgorithm, type Index } from '@upstash/vector';
import { rng, startVector } from './helpers.js';
import { compareIds } from '../../src/vector/query/execute.js';

/** Ids whose code-unit order (JavaScript's `<`) and UTF-8 byte order differ: U+FFFD vs U+1F600. */
const TIED = ['t-07', 'T', 'a', 'b10', 'b2', 'é', '😀', '\uFFFD', 'z', '0', 'A', ' ', '~', 'id2', 'id0', 'id1'];
const ORTHOGONAL = ['o5', 'o1', 'o3', 'O', 'o2', 'o4'];
const NEAR = Array.from({ length: 8 }, (_, i) => `n${i}`);
const ALL = [...TIED, ...ORTHOGONAL, ...NEAR];

const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/** The record of `id`: tied ones identical, orthogonal ones identical (score 0.5), near ones distinct. */
function record(id: string): { id: string; vector: number[]; sparseVector: { indices: number[]; values: number[] }; metadata: { g: number } } {
  const t = TIED.indexOf(id);
  const o = ORTHOGONAL.indexOf(id);
  const n = NEAR.indexOf(id);
  if (t >= 0) return { id, vector: [1, 2, 3, 4], sparseVector: { indices: [1, 5], values: [1, 2] }, metadata: { g: t % 2 } };
  if (o >= 0) return { id, vector: [4, -3, 2, -1], sparseVector: { indices: [9], values: [1] }, metadata: { g: o % 2 } };
  return { id, vector: [1, 2, 3, 4 + 0.3 * (n + 1)], sparseVector: { indices: [1, 5], values: [1, 1.9 - 0.1 * n] }, metadata: { g: n % 2 } };
}

/** {@link record} without its sparse part (dense indexes). */
function denseRecord(id: string): { id: string; vector: number[]; metadata: { g: number } } {
  const { vector, metadata } = record(id);
  return { id, vector, metadata };
}

function shuffled<T>(xs: T[], seed: number): T[] {
  const r = rng(seed);
  const out = xs.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

type Hit = { id: string | number; score: number };

/** Checks the documented order of a full result list, and that topK 1..n give its prefixes. */
async function checkPrefixes(what: string, run: (topK: number) => Promise<Hit[]>, expectCount: number): Promise<{ id: string; score: number }[]> {
  const full = (await run(expectCount)).map((h) => ({ id: String(h.id), score: h.score }));
  assert.equal(full.length, expectCount, `${what}: ${full.length} results`);
  for (let i = 1; i < full.length; i++) {
    const [a, b] = [full[i - 1], full[i]];
    assert.ok(a.score > b.score || (a.score === b.score && byBytes(a.id, b.id) < 0), `${what}: ${a.id} (${a.score}) before ${b.id} (${b.score})`);
  }
  for (let k = 1; k < expectCount; k++) {
    const got = (await run(k)).map((h) => ({ id: String(h.id), score: h.score }));
    assert.deepEqual(got, full.slice(0, k), `${what}: topK ${k} is not the first ${k} of topK ${expectCount}`);
  }
  return full;
}

async function untilIndexed(index: Index): Promise<void> {
  const deadline = Date.now() + 120_000;
  while ((await index.info()).pendingVectorCount > 0) {
    assert.ok(Date.now() < deadline, 'the vectors were not indexed in 120 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('equal scores: one order for every topK and every path', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  before(async () => {
    svc = await startVector([
      { name: 'hn', type: 'DENSE', dimension: 4, metric: 'COSINE' },
      { name: 'q8', type: 'DENSE', dimension: 4, metric: 'COSINE', quantization: 'int8' },
      { name: 'sp', type: 'SPARSE' },
      { name: 'hy', type: 'HYBRID', dimension: 4, metric: 'COSINE' },
    ]);
  });
  after(async () => {
    await svc?.close();
  });

  test('the id order is UTF-8 byte order (code points), not UTF-16 code units', () => {
    const sorted = TIED.slice().sort(compareIds);
    assert.deepEqual(sorted, TIED.slice().sort(byBytes));
    assert.notDeepEqual(sorted, TIED.slice().sort());
  });

  test('dense: pending points, HNSW graph, filtered paths and namespaces give the same prefixes', async () => {
    const index = svc.client('hn');
    const q = [1, 2, 3, 4];
    const expected = TIED.slice().sort(byBytes);
    for (const [ns, seed] of [['', 1], ['ns-a', 2], ['ns-b', 3]] as const) {
      const n = index.namespace(ns);
      // one record at a time, in an order of its own per namespace
      for (const id of shuffled(ALL, seed)) await n.upsert(denseRecord(id));
      const pending = await checkPrefixes(`dense ${ns || 'default'} (just written)`, (topK) => n.query({ vector: q, topK }), ALL.length);
      await untilIndexed(index);
      const graph = await checkPrefixes(`dense ${ns || 'default'} (graph)`, (topK) => n.query({ vector: q, topK }), ALL.length);
      assert.deepEqual(graph, pending, 'the graph and the exact scan of pending points agree');
      assert.deepEqual(graph.slice(0, TIED.length).map((h) => h.id), expected);
      assert.ok(graph.slice(0, TIED.length).every((h) => h.score === 1));
      const filtered = await checkPrefixes(`dense ${ns || 'default'} (filter g = 0)`, (topK) => n.query({ vector: q, topK, filter: 'g = 0' }), 15);
      assert.deepEqual(filtered, graph.filter((h) => record(h.id).metadata.g === 0), 'filtered results are the unfiltered ones that match');
      // the first result of the issue: three equal scores, topK 1 is the first of topK 3
      const [one] = await n.query({ vector: q, topK: 1 });
      assert.equal(one.id, expected[0]);
    }
  });

  test('dense: a tie group larger than the search breadth (300 equal vectors, efSearch 100) is cut by id', async () => {
    const n = svc.client('hn').namespace('big');
    const tied = Array.from({ length: 300 }, (_, i) => `big-${(i * 7919) % 300}`);
    const others = Array.from({ length: 700 }, (_, i) => ({ id: `other-${i}`, vector: [Math.sin(i) - 2, Math.cos(i), i % 5, -3] }));
    const records = shuffled([...tied.map((id) => ({ id, vector: [1, 2, 3, 4] })), ...others], 7);
    for (let i = 0; i < records.length; i += 100) await n.upsert(records.slice(i, i + 100));
    await untilIndexed(svc.client('hn'));
    const expected = tied.slice().sort(byBytes);
    for (const topK of [1, 2, 5, 10, 50, 120]) {
      const got = await n.query({ vector: [1, 2, 3, 4], topK });
      assert.deepEqual(got.map((h) => h.id), expected.slice(0, topK), `topK ${topK}`);
    }
  });

  test('int8 (exact scan of codes, re-ranked): the same order', async () => {
    const index = svc.client('q8');
    await index.upsert(shuffled(ALL, 4).map(denseRecord));
    const full = await checkPrefixes('int8', (topK) => index.query({ vector: [1, 2, 3, 4], topK }), ALL.length);
    assert.deepEqual(full.slice(0, TIED.length).map((h) => h.id), TIED.slice().sort(byBytes));
    await checkPrefixes('int8 filtered', (topK) => index.query({ vector: [1, 2, 3, 4], topK, filter: 'g = 1' }), 15);
  });

  test('sparse: equal inner products ordered by id', async () => {
    const index = svc.client('sp');
    await index.upsert(shuffled(ALL, 5).map((id) => {
      const { sparseVector, metadata } = record(id);
      return { id, sparseVector, metadata };
    }));
    const query = { sparseVector: { indices: [1, 5, 9], values: [1, 1, 1] } };
    const full = await checkPrefixes('sparse', (topK) => index.query({ ...query, topK }), ALL.length);
    assert.deepEqual(full.slice(0, TIED.length).map((h) => h.id), TIED.slice().sort(byBytes));
    assert.deepEqual(full.slice(-ORTHOGONAL.length).map((h) => h.id), ORTHOGONAL.slice().sort(byBytes));
    await checkPrefixes('sparse IDF', (topK) => index.query({ ...query, topK, weightingStrategy: 'IDF' as never }), ALL.length);
    await checkPrefixes('sparse filtered', (topK) => index.query({ ...query, topK, filter: 'g = 0' }), 15);
  });

  test('hybrid: RRF and DBSF fusion, ties ordered by id; resumable batches continue the same order', async () => {
    const index = svc.client('hy');
    await index.upsert(shuffled(ALL, 6).map(record));
    await untilIndexed(index);
    const query = { vector: [1, 2, 3, 4], sparseVector: { indices: [1, 5, 9], values: [1, 1, 1] } };
    await checkPrefixes('hybrid RRF', (topK) => index.query({ ...query, topK }), ALL.length);
    const dbsf = await checkPrefixes('hybrid DBSF', (topK) => index.query({ ...query, topK, fusionAlgorithm: FusionAlgorithm.DBSF }), ALL.length);
    assert.deepEqual(dbsf.slice(0, TIED.length).map((h) => h.id), TIED.slice().sort(byBytes));
    // a dense-only query on the hybrid index, resumed one result at a time
    const full = (await index.query({ vector: query.vector, topK: ALL.length })).map((h) => String(h.id));
    const { result, fetchNext, stop } = await index.resumableQuery({ vector: query.vector, topK: 1, maxIdle: 60 });
    const seen = result.map((h) => String(h.id));
    while (seen.length < ALL.length) {
      const next = await fetchNext(1);
      assert.equal(next.length, 1);
      seen.push(String(next[0].id));
    }
    await stop();
    assert.deepEqual(seen, full);
  });
});

/**
 * Engine pieces in-process on real SQLite files: float32 printing, merge patch (RFC 7396),
 * fusion formulas, snapshot + replay and header checks, tombstone rebuild, group commit,
 * resumable-query idle expiry with an injected clock, index definition validation, and memory
 * restored from SQLite after a write fails inside a group commit (store failures injected on the
 * index's own store; the disk-full end-to-end case is in disk-full.test.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadIndexDefinitions, DEFAULT_HNSW, type IndexDefinition } from '../../src/vector/definitions.js';
import { REBUILD_MIN, VectorIndex, mergePatch } from '../../src/vector/engine/vector-index.js';
import { shortestFloat32 } from '../../src/vector/engine/float32.js';
import { FlatDense, GRAPH_GROWTH, HnswDense, QuantizedDense } from '../../src/vector/engine/dense.js';
import { createLogger } from '../../src/logger.js';
import { runQuery } from '../../src/vector/query/execute.js';
import { MAX_IDLE_S, ResumableQueries } from '../../src/vector/http/resumable.js';
import { fuseDbsf, fuseRrf } from '../../src/vector/engine/scores.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { randomVectors, rng } from './helpers.js';
import { IdIndex } from '../../src/vector/engine/id-index.js';

const logger = createLogger('silent');
const def = (over: Partial<IndexDefinition> = {}): IndexDefinition => ({
  name: 'default', type: 'DENSE', dimension: 8, metric: 'COSINE', embedder: {}, hnsw: { ...DEFAULT_HNSW }, ...over,
});
const q = (vector: number[], topK = 5) => ({ vector, topK, useIdf: false, weightingGiven: false, fusion: 'RRF' as const, mode: 'HYBRID' as const, includeVectors: false, includeMetadata: false, includeData: false });

test('shortest float32 printing', () => {
  assert.equal(shortestFloat32(0.1), 0.1);
  assert.equal(shortestFloat32(Math.fround(0.1)), 0.1);
  assert.equal(shortestFloat32(2 / 60), 0.033333335);
  assert.equal(shortestFloat32(1 / 3), 0.33333334);
  assert.equal(shortestFloat32(-0), 0);
  assert.equal(shortestFloat32(16777217), 16777216);
  assert.equal(JSON.stringify([0.2, 0.3, 1e-10].map(shortestFloat32)), '[0.2,0.3,1e-10]');
});

test('JSON merge patch (RFC 7396 examples)', () => {
  assert.deepEqual(mergePatch({ a: 'b', c: { d: 'e', f: 'g' } }, { a: 'z', c: { f: null } }), { a: 'z', c: { d: 'e' } });
  assert.deepEqual(mergePatch({ a: [1] }, { a: { b: 1 } }), { a: { b: 1 } });
  assert.deepEqual(mergePatch({ a: 1 }, { b: [null] }), { a: 1, b: [null] });
});

test('RRF (K=60, 0-based) and DBSF (sample σ, σ=0 -> 0.5)', () => {
  const rrf = fuseRrf([[{ label: 2, score: 9 }, { label: 1, score: 8 }, { label: 0, score: 7 }], [{ label: 0, score: 1 }, { label: 1, score: 0.5 }]]);
  assert.deepEqual(rrf.map((s) => [s.label, shortestFloat32(s.score)]), [[0, 0.032795697], [1, 0.032786883], [2, 0.016666668]]);
  const dbsf = fuseDbsf([[{ label: 0, score: 3 }, { label: 1, score: 1 }], [{ label: 2, score: 5 }]]);
  assert.deepEqual(dbsf.map((s) => [s.label, shortestFloat32(s.score)]), [[0, 0.61785114], [2, 0.5], [1, 0.38214886]]);
});

test('snapshot on close, load + replay of newer records, stale header ignored', async () => {
  const tmp = tempDir();
  try {
    const vs = randomVectors(300, 8, 1);
    let idx = new VectorIndex(def(), tmp.dir, logger);
    await idx.upsert('', vs.slice(0, 200).map((v, i) => ({ id: `v${i}`, vector: v })));
    await idx.close();
    idx = new VectorIndex(def(), tmp.dir, logger);
    assert.deepEqual(idx.loadStats, { fromSnapshot: 1, replayed: 0, rebuilt: 0, damaged: 0 });
    await idx.upsert('', vs.slice(200).map((v, i) => ({ id: `v${200 + i}`, vector: v })));
    await idx.delete('', { ids: ['v0'] });
    // Simulate a crash: no close (no new snapshot); reopen replays the 100 newer records.
    idx.store.close();
    idx = new VectorIndex(def(), tmp.dir, logger);
    assert.deepEqual(idx.loadStats, { fromSnapshot: 1, replayed: 100, rebuilt: 0, damaged: 0 });
    const ns = idx.ns('')!;
    assert.equal(ns.count, 299);
    assert.equal(ns.dense!.size, 299);
    assert.equal(runQuery(idx, ns, q(vs[250], 1), 1, 1)[0].label, 250);
    assert.notEqual(runQuery(idx, ns, q(vs[0], 1), 1, 1)[0].label, 0);
    await idx.close();
    // A header that does not match (other M) is ignored: rebuilt from SQLite.
    idx = new VectorIndex(def({ hnsw: { ...DEFAULT_HNSW, m: 8 } }), tmp.dir, logger);
    assert.deepEqual(idx.loadStats, { fromSnapshot: 0, replayed: 0, rebuilt: 1, damaged: 0 });
    assert.equal(idx.ns('')!.dense!.size, 299);
    await idx.close();
    // Dimension is persisted: a different configured dimension refuses to start.
    assert.throws(() => new VectorIndex(def({ dimension: 9 }), tmp.dir, logger), /stored dimension 8/);
  } finally {
    tmp.cleanup();
  }
});

test('group commit: concurrent upserts share a transaction; tombstones trigger a rebuild', async () => {
  const tmp = tempDir();
  try {
    const idx = new VectorIndex(def({ dimension: undefined }), tmp.dir, logger);
    const vs = randomVectors(REBUILD_MIN * 3, 8, 2);
    const before = idx.seq;
    const commits = idx.commits;
    await Promise.all(vs.map((v, i) => idx.upsert('', [{ id: String(i), vector: v }])));
    assert.equal(idx.seq - before, vs.length);
    assert.equal(idx.commits - commits, 1, '3,000 concurrent upserts committed in one transaction');
    assert.equal(idx.dimension, 8);
    assert.equal(idx.store.getMeta('dimension'), '8');
    await idx.whenIndexed(); // deleting points still queued for insertion leaves no tombstones
    const g = idx.ns('')!.dense!;
    await idx.delete('', { ids: vs.slice(0, REBUILD_MIN * 2 + 10).map((_, i) => String(i)) });
    // The rebuild runs in indexer slices; queries keep being answered by the old graph meanwhile.
    assert.ok(idx.ns('')!.rebuilding, 'rebuild started');
    assert.equal(idx.ns('')!.dense, g);
    assert.equal(runQuery(idx, idx.ns('')!, q(vs[vs.length - 1], 1), 1, 1)[0].label, vs.length - 1);
    await idx.whenIndexed();
    const g2 = idx.ns('')!.dense!;
    assert.notEqual(g2, g, 'graph rebuilt');
    assert.equal(g2.tombstones, 0);
    assert.equal(g2.size, vs.length - REBUILD_MIN * 2 - 10);
    await idx.close();
  } finally {
    tmp.cleanup();
  }
});

test('a write that fails inside a group commit leaves memory as SQLite has it; its neighbours commit', async () => {
  const tmp = tempDir();
  const vs = randomVectors(40, 8, 3);
  const idx = new VectorIndex(def(), tmp.dir, logger);
  try {
    await idx.upsert('', vs.slice(0, 10).map((v, i) => ({ id: `k${i}`, vector: v, metadata: { i } })));
    await idx.upsert('other', [{ id: 'o0', vector: vs[30] }]);
    const store = idx.store;
    const fail = <K extends 'upsert' | 'resetNamespace' | 'dropNamespace' | 'renameNamespace'>(name: K, when: (...a: Parameters<typeof store[K]>) => boolean) => {
      const real = store[name].bind(store) as (...a: unknown[]) => unknown;
      (store as unknown as Record<string, unknown>)[name] = (...a: Parameters<typeof store[K]>) => {
        if (when(...a)) throw new Error(`injected ${name} failure`);
        return real(...a);
      };
      return () => ((store as unknown as Record<string, unknown>)[name] = real);
    };
    // one batch: a failing upsert (its first records and a rewrite of k1 already applied), a good one
    let restore = fail('upsert', (_ns, r) => r.id === 'boom');
    const bad = idx.upsert('', [{ id: 'new0', vector: vs[20] }, { id: 'k1', vector: vs[21], metadata: { i: 99 } }, { id: 'boom', vector: vs[22] }, { id: 'new1', vector: vs[23] }]);
    const good = idx.upsert('', [{ id: 'k2', vector: vs[24], metadata: { i: 42 } }]);
    const late = idx.upsert('fresh', [{ id: 'f0', vector: vs[25] }, { id: 'boom', vector: vs[26] }]);
    await assert.rejects(bad, /injected upsert failure/);
    await assert.rejects(late, /injected upsert failure/);
    assert.equal(await good, 'Success');
    restore();
    const ns = idx.ns('')!;
    assert.equal(ns.byId.has('new0'), false);
    assert.equal(ns.byId.has('new1'), false);
    assert.deepEqual(ns.metas[ns.byId.get('k1')!], { i: 1 });
    assert.deepEqual(ns.metas[ns.byId.get('k2')!], { i: 42 });
    assert.equal(ns.count, 10);
    assert.equal(ns.row.next_pos, 10);
    assert.equal(idx.ns('fresh'), undefined, 'namespace created by the failed write');
    assert.equal(runQuery(idx, ns, q(vs[1], 1), 1, 1)[0].label, ns.byId.get('k1'));
    assert.equal(runQuery(idx, ns, q(vs[24], 1), 1, 1)[0].label, ns.byId.get('k2'));
    assert.equal(ns.match('i = 99')!.count, 0);
    // namespace-level writes: reset, delete, rename fail -> namespaces unchanged
    restore = fail('resetNamespace', () => true);
    await assert.rejects(idx.reset('', true), /injected/);
    restore();
    restore = fail('dropNamespace', () => true);
    await assert.rejects(idx.deleteNamespace('other'), /injected/);
    restore();
    restore = fail('renameNamespace', () => true);
    await assert.rejects(idx.renameNamespace('other', 'renamed', false), /injected/);
    restore();
    assert.deepEqual([...idx.namespaces.keys()].sort(), ['', 'other']);
    assert.equal(idx.ns('')!.count, 10);
    assert.equal(idx.ns('other')!.count, 1);
    assert.equal(runQuery(idx, idx.ns('')!, q(vs[5], 1), 1, 1)[0].label, idx.ns('')!.byId.get('k5'));
    assert.equal(runQuery(idx, idx.ns('other')!, q(vs[30], 1), 1, 1)[0].label, idx.ns('other')!.byId.get('o0'));
    // and the index goes on: writes after the failures commit and are found
    await idx.upsert('', [{ id: 'after', vector: vs[35] }]);
    assert.equal(runQuery(idx, idx.ns('')!, q(vs[35], 1), 1, 1)[0].label, idx.ns('')!.byId.get('after'));
  } finally {
    await idx.close();
    tmp.cleanup();
  }
});

test('resumable queries expire after maxIdle (injected clock)', async () => {
  const tmp = tempDir();
  let now = 0;
  const rq = new ResumableQueries(() => now);
  try {
    const idx = new VectorIndex(def(), tmp.dir, logger);
    await idx.upsert('', randomVectors(5, 8, 3).map((v, i) => ({ id: String(i), vector: v })));
    const { uuid, scores } = rq.start(idx, '', q(randomVectors(1, 8, 4)[0], 2), 10);
    assert.equal(scores.length, 2);
    now = 9_000;
    assert.equal(rq.next(idx, uuid, 1).length, 1);
    now = 18_000;
    assert.equal(rq.next(idx, uuid, 1).length, 1, 'idle time restarts at each use');
    now = 28_001;
    assert.equal(rq.reap(), 1);
    assert.throws(() => rq.next(idx, uuid, 1), /does not exist or has expired/);
    await idx.close();
  } finally {
    rq.close();
    tmp.cleanup();
  }
});

test('resumable queries: maxIdle is capped to MAX_IDLE_S; an id is only valid on its own index', async () => {
  const tmp = tempDir();
  let now = 0;
  const rq = new ResumableQueries(() => now);
  try {
    const idx = new VectorIndex(def(), tmp.dir, logger);
    const other = new VectorIndex(def({ name: 'other' }), tmp.dir, logger);
    await idx.upsert('', randomVectors(5, 8, 3).map((v, i) => ({ id: String(i), vector: v })));
    const { uuid } = rq.start(idx, '', q(randomVectors(1, 8, 4)[0], 1), 1e12);
    assert.throws(() => rq.next(other, uuid, 1), /does not exist/);
    assert.equal(rq.activeOf(idx), 1);
    assert.equal(rq.activeOf(other), 0);
    now = MAX_IDLE_S * 1000 + 1;
    assert.equal(rq.reap(), 1);
    assert.equal(rq.activeOf(idx), 0);
    await idx.close();
    await other.close();
  } finally {
    rq.close();
    tmp.cleanup();
  }
});

test('index definitions file is validated', () => {
  const tmp = tempDir();
  try {
    const file = path.join(tmp.dir, 'i.json');
    fs.writeFileSync(file, JSON.stringify([{ name: 'query', type: 'X' }, { name: 'ok', type: 'sparse', embedder: { sparse: 'BM25' } }, { name: 'ok' }]));
    assert.throws(() => loadIndexDefinitions(testConfig(tmp.dir, { SVC_VECTOR_INDEXES: file })), (e: Error) =>
      /indexes\[0\]\.name/.test(e.message) && /indexes\[0\]\.type/.test(e.message) && /duplicate name ok/.test(e.message));
    fs.writeFileSync(file, JSON.stringify({ indexes: [{ name: 'default', type: 'HYBRID', dimension: 4 }, { name: 'sp', type: 'SPARSE' }] }));
    const defs = loadIndexDefinitions(testConfig(tmp.dir, { SVC_VECTOR_INDEXES: file }));
    assert.deepEqual(defs.map((d) => [d.name, d.type, d.dimension]), [['default', 'HYBRID', 4], ['sp', 'SPARSE', undefined]]);
    fs.writeFileSync(file, '{not json');
    assert.throws(() => loadIndexDefinitions(testConfig(tmp.dir, { SVC_VECTOR_INDEXES: file })), /SVC_VECTOR_INDEXES/);
  } finally {
    tmp.cleanup();
  }
});

test('a full HNSW graph grows by GRAPH_GROWTH, not by doubling (hnswlib touches per-slot arrays for its whole capacity)', () => {
  const n = 5000;
  const g = new HnswDense(8, 'COSINE', { m: 8, efConstruction: 32, efSearch: 32 }, 16);
  randomVectors(n, 8, 3).forEach((v, i) => g.add(i, v));
  const cap = g.index.getMaxElements();
  assert.ok(cap >= n && cap <= Math.ceil(n * GRAPH_GROWTH) + 1, `capacity ${cap} for ${n} points`);
  assert.equal(g.size, n);
  assert.equal(g.search(randomVectors(1, 8, 3)[0], 1)[0].label, 0, 'still finds a point it holds');
});

test('a search or scan for more results than there are points merges 100,000 queued points in one sort, not one insertion each (CPU bound)', () => {
  const n = 100_000;
  const g = new HnswDense(2, 'EUCLIDEAN', { m: 8, efConstruction: 32, efSearch: 32 }, 16);
  g.add(0, [0, 0]);
  const r = rng(11);
  for (let i = 1; i <= n; i++) g.enqueue(i, [r(), r()], i);
  const labels = Int32Array.from({ length: n + 1 }, (_, i) => i);
  const before = process.cpuUsage();
  const all = g.search([0.5, 0.5], 1e9);
  const scanned = g.scan([0.5, 0.5], 1e9, labels);
  const used = process.cpuUsage(before);
  const cpuS = (used.user + used.system) / 1e6;
  // an insertion per queued point shifted half the list on average: about 5e9 moves (seconds)
  assert.ok(cpuS < 1.5, `${cpuS.toFixed(2)} CPU-s`);
  for (const out of [all, scanned]) {
    assert.equal(out.length, n + 1);
    for (let i = 1; i < out.length; i++) assert.ok(out[i - 1].distance <= out[i].distance, 'nearest first');
  }
  // and a small k still gives the nearest (the insertion path)
  const top = g.search([0.5, 0.5], 3);
  assert.deepEqual(top.map((h) => h.label), all.slice(0, 3).map((h) => h.label));
});

test('an int8 index asked for more results than it holds ranks 100,000 codes with one sort, not one insertion each (CPU bound)', () => {
  const n = 100_000;
  const g = new QuantizedDense(2, 'EUCLIDEAN', { m: 8, efConstruction: 32, efSearch: 32 }, 16);
  const r = rng(12);
  for (let i = 0; i < n; i++) g.add(i, [r(), r()]);
  const before = process.cpuUsage();
  const all = g.search([0.5, 0.5], n);
  const used = process.cpuUsage(before);
  // an insertion per code shifted half the list on average: 3.2 CPU-s at load 12; one sort: 0.06
  const cpuS = (used.user + used.system) / 1e6;
  assert.ok(cpuS < 0.75, `${cpuS.toFixed(2)} CPU-s`);
  assert.equal(all.length, n);
  for (let i = 1; i < all.length; i++) assert.ok(all[i - 1].distance <= all[i].distance, 'nearest first');
  assert.deepEqual(g.search([0.5, 0.5], 3).map((h) => h.label), all.slice(0, 3).map((h) => h.label));
});

test('the exact scan of an HNSW namespace ranks like brute force: graph points, queued points, pending updates, removals', () => {
  for (const metric of ['COSINE', 'EUCLIDEAN'] as const) {
    const d = 24;
    const n = 4000;
    const vs = randomVectors(n, d, 31);
    const h = new HnswDense(d, metric, { m: 8, efConstruction: 20, efSearch: 16 }, n);
    const f = new FlatDense(d, metric, n);
    // 3,000 in the graph, 1,000 still queued; then 300 graph points updated (queued, the graph
    // holding their old vector) and 200 removed (100 from the graph, 100 queued)
    vs.forEach((v, i) => {
      h.enqueue(i, v, i + 1);
      f.add(i, v);
      if (i === 2999) h.indexPending();
    });
    const moved = randomVectors(300, d, 33);
    for (let j = 0; j < 300; j++) {
      h.enqueue(j * 7, moved[j], n + j + 1);
      f.add(j * 7, moved[j]);
    }
    for (let j = 0; j < 200; j++) {
      const label = j < 100 ? 1 + j * 11 : 3001 + j;
      h.remove(label);
      f.remove(label);
    }
    assert.ok(h.pending >= 1100, `pending ${h.pending}`);
    for (const query of randomVectors(10, d, 32)) {
      const labels = h.live(Array.from({ length: n / 3 }, (_, i) => i * 3));
      const want = f.exact(query, 10, labels);
      const got = h.scan(query, 10, labels);
      assert.deepEqual(got.map((x) => x.label), want.map((x) => x.label), metric);
      got.forEach((x, i) => assert.ok(Math.abs(x.distance - want[i].distance) < 1e-5, `${metric} distance ${x.distance} vs ${want[i].distance}`));
    }
  }
});

test('the exact scan of a graph loaded from a file, then grown, ranks like brute force', () => {
  const d = 16;
  const vs = randomVectors(3000, d, 41);
  const params = { m: 8, efConstruction: 20, efSearch: 16 };
  const h = new HnswDense(d, 'EUCLIDEAN', params, 2000);
  const f = new FlatDense(d, 'EUCLIDEAN', 3000);
  vs.slice(0, 2000).forEach((v, i) => {
    // labels in another order than the graph's internal ids
    h.add(1999 - i, v);
    f.add(1999 - i, v);
  });
  const tmp = tempDir('svc-vector-exact-');
  try {
    const file = path.join(tmp.dir, 'g.hnsw');
    h.index.writeIndexSync(file);
    const loaded = HnswDense.load(file, d, 'EUCLIDEAN', params);
    const check = (what: string) => {
      for (const query of randomVectors(5, d, 42)) {
        const labels = loaded.live(Array.from({ length: 3000 }, (_, i) => i).filter((i) => i % 4 !== 1));
        const want = f.exact(query, 10, labels).map((x) => x.label);
        assert.deepEqual(loaded.scan(query, 10, labels).map((x) => x.label), want, what);
      }
    };
    check('loaded');
    vs.slice(2000).forEach((v, i) => {
      loaded.add(2000 + i, v);
      f.add(2000 + i, v);
    });
    check('grown after loading');
  } finally {
    tmp.cleanup();
  }
});

test('addAll inserts a batch on two threads at once: every point current and found by its own vector', () => {
  const d = 16;
  const vs = randomVectors(3000, d, 51);
  const h = new HnswDense(d, 'COSINE', { m: 8, efConstruction: 40, efSearch: 40 }, 16);
  // labels scattered (positions of a store with holes), in two batches
  const labels = vs.map((_, i) => i * 3 + 1);
  h.addAll(labels.slice(0, 2000), vs.slice(0, 2000), 2);
  h.addAll(labels.slice(2000), vs.slice(2000), 2);
  assert.equal(h.size, 3000);
  assert.equal(h.pending, 0);
  assert.equal(h.index.getCurrentCount(), 3000);
  let found = 0;
  for (let i = 0; i < 3000; i += 10) if (h.search(vs[i], 1)[0]?.label === labels[i]) found++;
  assert.ok(found >= 295, `found ${found} of 300 by their own vector`);
  // a batch may replace points: label 1 now holds the vector of label 16
  h.addAll([labels[0]], [vs[5]], 2);
  assert.equal(h.size, 3000);
  assert.deepEqual(new Set(h.search(vs[5], 2).map((x) => x.label)), new Set([labels[0], labels[5]]));
});

test('IdIndex answers as a Map over random puts, re-puts and deletes (ids read from the label array)', () => {
  const r = rng(77);
  const ids: (string | undefined)[] = [];
  const idx = new IdIndex((l) => ids[l], () => ids.length);
  const ref = new Map<string, number>();
  let next = 0;
  for (let step = 0; step < 20_000; step++) {
    const id = `k${Math.floor(r() * 3000)}${r() < 0.1 ? 'é😀' : ''}`;
    if (r() < 0.65) {
      const at = ref.get(id);
      const pos = at ?? next++;
      ids[pos] = id;
      idx.set(id, pos);
      ref.set(id, pos);
    } else {
      const at = ref.get(id);
      assert.equal(idx.delete(id), at !== undefined);
      if (at !== undefined) ids[at] = undefined;
      ref.delete(id);
    }
    assert.equal(idx.size, ref.size);
  }
  for (const [id, pos] of ref) assert.equal(idx.get(id), pos);
  for (let i = 0; i < 500; i++) assert.equal(idx.has(`absent${i}`), false);
  assert.deepEqual([...idx.values()], [...ref.values()].sort((a, b) => a - b));
  assert.deepEqual(new Set(idx.keys()), new Set(ref.keys()));
  idx.clear();
  assert.equal(idx.size, 0);
  assert.equal(idx.get([...ref.keys()][0]), undefined);
});

test('a search while a batch is being inserted counts the batch points the graph already holds as not current: k results, none lost', () => {
  // 20 points far from the query in the graph, 10 near ones in a running batch: the graph search
  // finds the batch points first, drops them (they are answered by the exact scan of pending
  // points) and must still return every current point.
  const d = 4;
  const h = new HnswDense(d, 'EUCLIDEAN', { m: 8, efConstruction: 40, efSearch: 16 }, 64);
  for (let i = 0; i < 20; i++) h.add(i, [100 + i, 50, -i, 7]);
  for (let i = 0; i < 10; i++) h.enqueue(20 + i, [i * 0.01, 0, 0, 0], i + 1);
  const done = h.indexBatch(1_000_000, 1);
  assert.ok(done, 'a batch started');
  // the batch runs on the addon's thread; its promise cannot settle while this test runs on
  const deadline = performance.now() + 10_000;
  while (h.index.getCurrentCount() < 30 && performance.now() < deadline);
  const until = performance.now() + 20;
  while (performance.now() < until);
  assert.equal(h.index.getCurrentCount(), 30, 'the batch points are in the graph');
  assert.equal(h.pending, 10, 'and still pending');
  const got = h.search([0, 0, 0, 0], 30);
  assert.equal(got.length, 30);
  assert.deepEqual(got.slice(0, 10).map((n) => n.label), [20, 21, 22, 23, 24, 25, 26, 27, 28, 29]);
  assert.deepEqual(new Set(got.slice(10).map((n) => n.label)), new Set(Array.from({ length: 20 }, (_, i) => i)));
  return done;
});

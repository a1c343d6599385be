/**
 * Indexes defined with `"quantization": "int8"` (no HNSW graph; every dense query scans the 8-bit
 * codes and re-ranks on the original vectors), end to end through the official SDK:
 * - each operation answers like a default (HNSW) index holding the same data in the same server
 *   (same ids, same scores, same stored vectors), for the three metrics, filtered and resumable;
 * - recall@10 against an exact oracle on clustered vectors;
 * - restarts after SIGTERM (codes snapshot) and SIGKILL (snapshot + replay) answer the same, and a
 *   configuration change (int8 -> graph) rebuilds instead of reading the codes snapshot as a graph,
 *   and a damaged codes file is not loaded;
 * - hybrid fusion (RRF, DBSF) like a default hybrid index; reset;
 * - bad definitions are refused.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { FusionAlgorithm, Index } from '@upstash/vector';
import { loadIndexDefinitions } from '../../src/vector/definitions.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { rng, serveVectorChild, startVector } from './helpers.js';

type Hit = { id: string | number; score: number; vector?: number[]; metadata?: Record<string, unknown> };

/** `n` vectors of dimension `d` around `clusters` random centres (spread 0.15 per component). */
function clustered(n: number, d: number, clusters: number, seed: number): number[][] {
  const r = rng(seed);
  const centres = Array.from({ length: clusters }, () => Array.from({ length: d }, () => r() * 2 - 1));
  return Array.from({ length: n }, (_, i) => centres[i % clusters].map((c) => c + (r() - 0.5) * 0.3));
}

/** Same ids in the same order, scores equal to within a few float32 rounding steps (HNSW scores come from graph distances, summed with FMA in the x86-64-v3/v4 builds). */
function assertSameHits(got: Hit[], want: Hit[], what: string): void {
  assert.deepEqual(got.map((h) => h.id), want.map((h) => h.id), `${what}: ids`);
  got.forEach((h, i) => assert.ok(Math.abs(h.score - want[i].score) <= 1e-6 * Math.max(1, Math.abs(want[i].score)), `${what}: score of ${h.id} ${h.score} vs ${want[i].score}`));
}

/** Exact cosine top-k ids of `q` among `vecs` (double precision). */
function exactCosine(vecs: number[][], q: number[], k: number, ids: (i: number) => string, accept: (i: number) => boolean = () => true): string[] {
  const norm = (v: number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  const qn = norm(q);
  const scored: { i: number; s: number }[] = [];
  vecs.forEach((v, i) => {
    if (!accept(i)) return;
    let dot = 0;
    for (let j = 0; j < v.length; j++) dot += v[j] * q[j];
    scored.push({ i, s: dot / (norm(v) * qn) });
  });
  return scored.sort((a, b) => b.s - a.s).slice(0, k).map((x) => ids(x.i));
}

describe('int8 index answers like a default index', () => {
  const D = 24;
  const metrics = ['COSINE', 'EUCLIDEAN', 'DOT_PRODUCT'] as const;
  let svc: Awaited<ReturnType<typeof startVector>>;
  after(() => svc?.close());

  test('upsert, query (filtered, includeVectors), fetch, range, update, delete, resumable, namespaces', { timeout: 180_000 }, async () => {
    svc = await startVector(metrics.flatMap((m) => [
      { name: `q8-${m}`, type: 'DENSE', dimension: D, metric: m, quantization: 'int8' },
      { name: `ref-${m}`, type: 'DENSE', dimension: D, metric: m },
    ]));
    const r = rng(7);
    const vecs = Array.from({ length: 500 }, () => Array.from({ length: D }, () => r() * 2 - 1));
    const records = vecs.map((v, i) => ({ id: `v${i}`, vector: v, metadata: { g: i % 10, even: i % 2 === 0 } }));
    const queries = Array.from({ length: 8 }, () => Array.from({ length: D }, () => r() * 2 - 1));
    for (const m of metrics) {
      const q8 = svc.client(`q8-${m}`);
      const ref = svc.client(`ref-${m}`);
      for (const idx of [q8, ref]) {
        for (let i = 0; i < records.length; i += 100) await idx.upsert(records.slice(i, i + 100));
        await idx.upsert(records.slice(0, 50), { namespace: 'other' });
      }
      const both = async <T = Hit[]>(fn: (idx: Index) => Promise<unknown>): Promise<[T, T]> => [(await fn(q8)) as T, (await fn(ref)) as T];
      const compareQueries = async (what: string, opts: { filter?: string; topK?: number; namespace?: string } = {}) => {
        for (const [qi, vector] of queries.entries()) {
          const [a, b] = await both((idx) => idx.query({ vector, topK: opts.topK ?? 10, includeVectors: true, includeMetadata: true, filter: opts.filter }, opts.namespace ? { namespace: opts.namespace } : undefined));
          assert.ok(a.length > 0, `${m} ${what} q${qi}: hits`);
          assertSameHits(a, b, `${m} ${what} q${qi}`);
          assert.deepEqual(a.map((h) => h.vector), b.map((h) => h.vector), `${m} ${what} q${qi}: stored vectors`);
          assert.deepEqual(a.map((h) => h.metadata), b.map((h) => h.metadata), `${m} ${what} q${qi}: metadata`);
        }
      };
      await compareQueries('unfiltered');
      await compareQueries('filter g = 3', { filter: 'g = 3' });
      await compareQueries('filter even', { filter: 'even = true AND g >= 4', topK: 25 });
      await compareQueries('namespace', { namespace: 'other', topK: 5 });
      // a stored vector queried back scores like the reference (COSINE: exactly 1)
      const [self8, selfRef] = await both((idx) => idx.query({ vector: vecs[42], topK: 1 }));
      assert.equal(self8[0].id, 'v42');
      assertSameHits(self8, selfRef, `${m} self`);
      if (m === 'COSINE') assert.equal(self8[0].score, 1);

      const [f8, fRef] = await both((idx) => idx.fetch(['v1', 'v2', 'nope'], { includeVectors: true, includeMetadata: true }));
      assert.deepEqual(f8, fRef);
      const [r8, rRef] = await both((idx) => idx.range({ cursor: 0, limit: 30, includeVectors: true }));
      assert.deepEqual(r8, rRef);

      // update: v7 moves onto the first query vector; delete: the first query's former best goes
      const best = ((await q8.query({ vector: queries[1], topK: 1 })) as Hit[])[0].id as string;
      await both((idx) => idx.update({ id: 'v7', vector: queries[0], metadata: { g: 3 } }));
      await both((idx) => idx.delete([best, 'v8']));
      await compareQueries('after update and delete');
      await compareQueries('after update and delete, filtered', { filter: 'g = 3' });
      const [top8] = (await q8.query({ vector: queries[0], topK: 1, filter: 'g = 3' })) as Hit[];
      assert.equal(top8.id, 'v7');
      const after8 = (await q8.query({ vector: queries[1], topK: 50 })) as Hit[];
      assert.ok(!after8.some((h) => h.id === best || h.id === 'v8'), 'deleted ids are gone');

      // resumable: three pages of 7, then the rest of a filter's matches
      for (const filter of [undefined, 'g = 5']) {
        const pages = await both(async (idx) => {
          const { result, fetchNext, stop } = await idx.resumableQuery({ vector: queries[2], topK: 7, filter, maxIdle: 60 });
          const all = [...(result as Hit[])];
          for (let p = 0; p < 2; p++) all.push(...((await fetchNext(7)) as Hit[]));
          if (filter) all.push(...((await fetchNext(100)) as Hit[]));
          await stop();
          return all;
        });
        const [a, b] = pages;
        assertSameHits(a, b, `${m} resumable ${filter ?? 'unfiltered'}`);
        assert.equal(new Set(a.map((h) => h.id)).size, a.length, 'no id twice');
        if (filter) assert.equal(a.length, Number(best.slice(1)) % 10 === 5 ? 49 : 50, 'every match of g = 5 once');
      }
      const [i8, iRef] = await both<{ vectorCount: number; dimension: number }>((idx) => idx.info());
      assert.equal(i8.vectorCount, iRef.vectorCount);
      assert.equal(i8.dimension, D);
    }
  });
});

describe('int8 hybrid index', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  after(() => svc?.close());

  test('RRF and DBSF fusion answer like a default hybrid index; reset empties it', { timeout: 120_000 }, async () => {
    const D = 8;
    svc = await startVector([
      { name: 'hq8', type: 'HYBRID', dimension: D, metric: 'COSINE', quantization: 'int8' },
      { name: 'href', type: 'HYBRID', dimension: D, metric: 'COSINE' },
    ]);
    const r = rng(31);
    const sparse = () => {
      const indices = [...new Set(Array.from({ length: 4 }, () => Math.floor(r() * 40)))].sort((a, b) => a - b);
      return { indices, values: indices.map(() => Math.round(r() * 100) / 100 + 0.01) };
    };
    const records = Array.from({ length: 300 }, (_, i) => ({ id: `h${i}`, vector: Array.from({ length: D }, () => r() * 2 - 1), sparseVector: sparse(), metadata: { odd: i % 2 === 1 } }));
    const q8 = svc.client('hq8');
    const ref = svc.client('href');
    for (const idx of [q8, ref]) await idx.upsert(records);
    for (let i = 0; i < 6; i++) {
      const vector = Array.from({ length: D }, () => r() * 2 - 1);
      const sparseVector = sparse();
      for (const fusionAlgorithm of [FusionAlgorithm.RRF, FusionAlgorithm.DBSF]) {
        for (const filter of [undefined, 'odd = true']) {
          const q = { vector, sparseVector, topK: 10, fusionAlgorithm, filter };
          assertSameHits((await q8.query(q)) as Hit[], (await ref.query(q)) as Hit[], `hybrid ${fusionAlgorithm} ${filter ?? ''} q${i}`);
        }
      }
    }
    await q8.reset();
    assert.deepEqual(await q8.query({ vector: records[0].vector, sparseVector: records[0].sparseVector, topK: 5 }), []);
    await q8.upsert(records.slice(0, 3));
    assert.equal(((await q8.query({ vector: records[2].vector, topK: 1 })) as Hit[])[0].id, 'h2');
  });
});

describe('int8 index recall', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  after(() => svc?.close());

  test('recall@10 >= 0.95 against exact search on 3,000 clustered vectors, unfiltered and at 10 %', { timeout: 180_000 }, async () => {
    const D = 64;
    svc = await startVector([{ name: 'q8', type: 'DENSE', dimension: D, metric: 'COSINE', quantization: 'int8' }]);
    const idx = svc.client('q8');
    const vecs = clustered(3000, D, 30, 11);
    for (let i = 0; i < vecs.length; i += 500) {
      await idx.upsert(vecs.slice(i, i + 500).map((v, j) => ({ id: `c${i + j}`, vector: v, metadata: { tenth: (i + j) % 10 } })));
    }
    const queries = clustered(60, D, 30, 12);
    for (const filter of [undefined, 'tenth = 4']) {
      let hit = 0;
      for (const q of queries) {
        const got = ((await idx.query({ vector: q, topK: 10, filter })) as Hit[]).map((h) => h.id);
        const want = exactCosine(vecs, q, 10, (i) => `c${i}`, filter ? (i) => i % 10 === 4 : undefined);
        hit += want.filter((id) => got.includes(id)).length;
      }
      const recall = hit / (queries.length * 10);
      assert.ok(recall >= 0.95, `recall@10 ${filter ?? 'unfiltered'}: ${recall}`);
    }
  });
});

describe('int8 index restarts', () => {
  const data = tempDir('svc-vector-q8-restart-');
  const cfg = tempDir('svc-vector-q8-cfg-');
  const children: { child: ChildProcess }[] = [];
  after(() => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    data.cleanup();
    cfg.cleanup();
  });
  const D = 32;
  const file = (def: object) => {
    const f = path.join(cfg.dir, `indexes-${children.length}.json`);
    fs.writeFileSync(f, JSON.stringify([{ name: 'default', type: 'DENSE', dimension: D, metric: 'COSINE', ...def }]));
    return f;
  };
  const serve = async (def: object = { quantization: 'int8' }) => {
    const s = await serveVectorChild(data.dir, { SVC_VECTOR_INDEXES: file(def) });
    children.push(s);
    const creds = JSON.parse(fs.readFileSync(path.join(data.dir, 'credentials.json'), 'utf8'));
    const index = new Index({ url: s.url, token: creds['vector.default.token'], retry: false, enableTelemetry: false });
    // the port answers 503 while the index loads
    for (let i = 0; ; i++) {
      try {
        await index.info();
        break;
      } catch (err) {
        if (i > 300) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    return { ...s, index };
  };
  const vecs = clustered(4000, D, 20, 21);
  const queries = clustered(10, D, 20, 22);
  const answers = async (index: Index) => {
    const out: Hit[][] = [];
    for (const q of queries) out.push((await index.query({ vector: q, topK: 10, includeMetadata: true })) as Hit[]);
    for (const q of queries.slice(0, 3)) out.push((await index.query({ vector: q, topK: 5, filter: 'k = 2' })) as Hit[]);
    return out;
  };

  test('SIGTERM writes a codes-only snapshot; SIGKILL after more writes loses nothing; same answers after each restart', { timeout: 240_000 }, async () => {
    let s = await serve();
    for (let i = 0; i < 2000; i += 500) await s.index.upsert(vecs.slice(i, i + 500).map((v, j) => ({ id: `r${i + j}`, vector: v, metadata: { k: (i + j) % 5 } })));
    const before = await answers(s.index);
    s.child.kill('SIGTERM');
    await s.exited();
    const dir = path.join(data.dir, 'vector', 'default.snapshots');
    const files = fs.readdirSync(dir);
    assert.ok(files.some((f) => f.endsWith('.codes')) && !files.some((f) => f.endsWith('.hnsw')), `snapshot files: ${files}`);
    const header = JSON.parse(fs.readFileSync(path.join(dir, 'ns-1.json'), 'utf8'));
    assert.equal(header.quantization, 'int8');
    assert.equal(header.count, 2000);

    s = await serve();
    assert.deepEqual(await answers(s.index), before, 'same answers after SIGTERM + restart');
    assert.ok(!/snapshot not usable|damaged/.test(s.log()), s.log());
    // more writes after the snapshot: upserts, deletes, an update; then SIGKILL
    for (let i = 2000; i < 4000; i += 500) await s.index.upsert(vecs.slice(i, i + 500).map((v, j) => ({ id: `r${i + j}`, vector: v, metadata: { k: (i + j) % 5 } })));
    const gone = ((await s.index.query({ vector: queries[0], topK: 3 })) as Hit[]).map((h) => h.id as string);
    await s.index.delete([...gone, 'r5', 'r3999']);
    await s.index.update({ id: 'r10', vector: queries[1], metadata: { k: 2 } });
    const beforeKill = await answers(s.index);
    assert.ok(!beforeKill[0].some((h) => gone.includes(h.id as string)));
    assert.equal(beforeKill[1][0].id, 'r10');
    s.child.kill('SIGKILL');
    await s.exited();

    s = await serve();
    assert.deepEqual(await answers(s.index), beforeKill, 'same answers after SIGKILL + restart');
    assert.equal((await s.index.info()).vectorCount, 4000 - 5);
    const fetched = await s.index.fetch(['r10', 'r5', 'r3998'], { includeVectors: true });
    assert.equal(fetched[1], null);
    assert.deepEqual(fetched[0]!.vector!.map((x) => Math.fround(x)), Array.from(Float32Array.from(queries[1])));
    s.child.kill('SIGTERM');
    await s.exited();

    // the same data as a graph index: the codes snapshot is not read as a graph (rebuilt; HNSW's
    // ids). These tight clusters are hard for HNSW (in process at ef 50: recall@10 0.80 built on
    // one thread, 0.83–0.88 on two), and the rebuild inserts on several threads, so the graph and
    // its agreement with the exact answers vary from run to run: 97–109 of the 115 ids measured.
    s = await serve({});
    const asGraph = await answers(s.index);
    const overlap = asGraph.reduce((n, l, i) => n + l.filter((h) => beforeKill[i].some((x) => x.id === h.id)).length, 0);
    assert.ok(overlap >= 0.8 * beforeKill.flat().length, `graph index after int8: ${overlap} of ${beforeKill.flat().length} ids agree`);
    s.child.kill('SIGTERM');
    await s.exited();
    assert.ok(fs.readdirSync(dir).some((f) => f.endsWith('.hnsw')), 'graph snapshot written');
    // and back: the graph snapshot is not read as codes
    s = await serve();
    assert.deepEqual(await answers(s.index), beforeKill, 'int8 again after a graph snapshot');
    s.child.kill('SIGTERM');
    await s.exited();
    // a damaged codes file is not loaded: logged, rebuilt from the store, same answers
    const codes = fs.readdirSync(dir).find((f) => f.endsWith('.codes'))!;
    const bytes = fs.readFileSync(path.join(dir, codes));
    bytes[100] ^= 0x40;
    fs.writeFileSync(path.join(dir, codes), bytes);
    s = await serve();
    assert.deepEqual(await answers(s.index), beforeKill, 'same answers after a rebuild from the store');
    assert.match(s.log(), /vector snapshot damaged/);
    s.child.kill('SIGTERM');
    await s.exited();
  });
});

describe('int8 index definitions', () => {
  test('quantization is validated: values, SPARSE, with hnsw settings', () => {
    const cfg = tempDir('svc-vector-q8-def-');
    try {
      const f = path.join(cfg.dir, 'indexes.json');
      const load = (defs: object[]) => {
        fs.writeFileSync(f, JSON.stringify(defs));
        return loadIndexDefinitions(testConfig(cfg.dir, { SVC_VECTOR_INDEXES: f }));
      };
      assert.equal(load([{ name: 'a', dimension: 4, quantization: 'int8' }])[1].quantization, 'int8');
      assert.equal(load([{ name: 'a', dimension: 4 }])[1].quantization, 'none');
      assert.throws(() => load([{ name: 'a', quantization: 'f16' }]), /indexes\[0\]\.quantization: expected "none" or "int8"/);
      assert.throws(() => load([{ name: 'a', type: 'SPARSE', quantization: 'int8' }]), /SPARSE index has no dense vectors/);
      assert.throws(() => load([{ name: 'a', quantization: 'int8', hnsw: { m: 8 } }]), /an int8 index has no HNSW graph/);
    } finally {
      cfg.cleanup();
    }
  });
});

/**
 * The start-up path (`VectorIndex.open`: record heads read in one pass with metadata kept as text
 * and parsed later, snapshot files read and verified off the event loop): a restarted server
 * answers exactly what it answered before — the same unfiltered neighbours and scores, the same
 * metadata, filters that see every record's metadata — both from a clean snapshot (graceful stop)
 * and from a snapshot plus a replayed tail (a copy of the data dir taken while the server ran,
 * i.e. what a crash leaves).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import type { Index } from '@upstash/vector';
import { tempDir, vectorDatabaseEnv } from '../helpers/env.js';
import { randomVectors, startVector, type Svc } from './helpers.js';
import type { VectorServer } from '../../src/vector/index.js';

const D = 24;
const N = 3000;
const dirs: { cleanup(): void }[] = [];
after(() => dirs.forEach((d) => d.cleanup()));

const meta = (i: number, gen = 0) => ({ s: i % 100, tag: `t${i % 7}`, gen, nested: { i } });

/** Everything the comparison looks at, for a fixed set of queries. */
async function answers(c: Index, queries: number[][]) {
  const out: unknown[] = [];
  for (const q of queries) {
    out.push(await c.query({ vector: q, topK: 10, includeMetadata: true }));
  }
  return out;
}

/** Filtered results: every hit matches, carries its stored metadata, and the count of matches is right. */
async function checkFilters(c: Index, queries: number[][], expected: Map<string, ReturnType<typeof meta>>) {
  for (const q of queries.slice(0, 5)) {
    for (const [filter, keep] of [
      ['s < 10', (m: ReturnType<typeof meta>) => m.s < 10],
      ["tag = 't3' AND gen = 1", (m: ReturnType<typeof meta>) => m.tag === 't3' && m.gen === 1],
      ['nested.i >= 2990', (m: ReturnType<typeof meta>) => m.nested.i >= 2990],
    ] as const) {
      const want = [...expected.values()].filter(keep).length;
      const hits = await c.query({ vector: q, topK: 20, includeMetadata: true, filter });
      assert.equal(hits.length, Math.min(20, want), `${filter}: hits`);
      for (const h of hits) {
        assert.deepEqual(h.metadata, expected.get(String(h.id)), `${filter}: metadata of ${h.id}`);
        assert.ok(keep(h.metadata as ReturnType<typeof meta>), `${filter}: ${h.id} does not match`);
      }
    }
  }
}

const loadStats = (svc: Svc) => (svc.servers.vector as VectorServer).indexes.get('default')!.loadStats;

test('a restart answers the same queries as before: from a clean snapshot, and from a snapshot plus a replayed tail', { timeout: 240_000 }, async () => {
  const data = tempDir('svc-vector-startup-');
  dirs.push(data);
  const index = [{ name: 'default', type: 'DENSE', dimension: D, metric: 'COSINE' }];
  const vecs = randomVectors(N + 500, D, 7);
  const queries = randomVectors(12, D, 8);
  const expected = new Map<string, ReturnType<typeof meta>>();

  let svc = await startVector(index, { dataDir: data.dir });
  let c = svc.client();
  for (let b = 0; b < N; b += 500) {
    const batch = vecs.slice(b, b + 500).map((v, j) => ({ id: `v${b + j}`, vector: v, metadata: meta(b + j) }));
    await c.upsert(batch);
    for (const r of batch) expected.set(r.id, r.metadata);
  }
  // metadata rewritten for some: the loaded text must be the latest
  const changed = Array.from({ length: 300 }, (_, k) => k * 10);
  for (const i of changed) {
    await c.update({ id: `v${i}`, metadata: meta(i, 1) });
    expected.set(`v${i}`, meta(i, 1));
  }
  await c.delete(['v5', 'v15', 'v25']);
  for (const id of ['v5', 'v15', 'v25']) expected.delete(id);
  await (svc.servers.vector as VectorServer).indexes.get('default')!.whenIndexed();
  const before = await answers(c, queries);
  await checkFilters(c, queries, expected);
  await svc.close();

  // 1. graceful stop: the closing snapshot covers everything, nothing is replayed
  svc = await startVector(index, { dataDir: data.dir });
  c = svc.client();
  assert.deepEqual({ ...loadStats(svc) }, { fromSnapshot: 1, replayed: 0, rebuilt: 0, damaged: 0 });
  // right after start-up, before the background metadata parse could finish: filters and metadata
  await checkFilters(c, queries, expected);
  assert.deepEqual(await answers(c, queries), before, 'answers after a clean restart');
  assert.equal((await c.info()).vectorCount, expected.size);

  // 2. a tail written after the snapshot, then a copy of the data dir as a crash would leave it
  for (let i = N; i < N + 500; i++) expected.set(`v${i}`, meta(i, 1));
  await c.upsert(vecs.slice(N).map((v, j) => ({ id: `v${N + j}`, vector: v, metadata: meta(N + j, 1) })));
  await c.update({ id: 'v1', metadata: meta(1, 1) });
  expected.set('v1', meta(1, 1));
  await (svc.servers.vector as VectorServer).indexes.get('default')!.whenIndexed();
  const withTail = await answers(c, queries);
  const crashed = tempDir('svc-vector-startup-crash-');
  dirs.push(crashed);
  fs.cpSync(data.dir, crashed.dir, { recursive: true });
  await svc.close();
  fs.rmSync(path.join(crashed.dir, 'svc.lock'), { force: true });

  // the copy is the same node's cache: on PostgreSQL (SVC_VECTOR_DATABASE_URL) the same schema
  svc = await startVector(index, { dataDir: crashed.dir, env: vectorDatabaseEnv(data.dir) });
  c = svc.client();
  try {
    const stats = loadStats(svc);
    assert.equal(stats.fromSnapshot, 1);
    assert.equal(stats.replayed, 501, 'the tail is replayed: 500 upserts and one update');
    await checkFilters(c, queries, expected);
    await (svc.servers.vector as VectorServer).indexes.get('default')!.whenIndexed();
    assert.deepEqual(await answers(c, queries), withTail, 'answers after a crash restart');
  } finally {
    await svc.close();
  }
});

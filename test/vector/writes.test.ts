/**
 * Writes that do not stall reads (no timing thresholds: orders and states only).
 *
 * - Over HTTP: a batch is acknowledged before its graph insertion — right after the answer,
 *   `info.indexingVectorCount` is above 0 and every vector of the batch is the top hit of the
 *   next query for it (visibility delay 0); queries and `info` are answered while the indexer
 *   inserts, batch after batch on its own threads (the count is seen falling through several
 *   values above 0 between them), and the count drains to 0. Insertion inside the request would
 *   answer 0 at once.
 * - Snapshots are written off the event loop: while one is written, writes are acknowledged,
 *   visible and queued (not inserted into the graph being written); a crash right after replays
 *   exactly those; a namespace reset while a snapshot is written leaves no snapshot of the old
 *   generation behind.
 * - The upload parse worker stops when idle (its heap would keep the parsed bodies' garbage) and a
 *   later body starts a new one.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { VectorIndex } from '../../src/vector/engine/vector-index.js';
import { HnswDense } from '../../src/vector/engine/dense.js';
import { runQuery } from '../../src/vector/query/execute.js';
import { createLogger } from '../../src/logger.js';
import { tempDir } from '../helpers/env.js';
import { OFF_THREAD_PARSE_CHARS, PIECE_CHARS, parseUpload, parseWorkerRunning } from '../../src/vector/http/upload-parse.js';
import { denseDefinition, engineQuery, nearestId, randomVectors, raw, startVector } from './helpers.js';

const logger = createLogger('silent');
const D = 32;

test('an upsert is acknowledged before its graph insertion; queries are answered while the indexer drains the queue', { timeout: 120_000 }, async () => {
  const d = 64;
  const svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: String(d) } });
  try {
    const index = svc.client();
    const info = async () => (await raw(`${svc.indexUrl()}/info`, svc.token(), '{}')).body.result as { vectorCount: number; indexingVectorCount: number };
    const vs = randomVectors(4000, d, 51);
    await index.upsert(vs.slice(0, 1000).map((v, i) => ({ id: String(i), vector: v })));
    while ((await info()).indexingVectorCount > 0) await new Promise((r) => setTimeout(r, 20));
    // 3,000 × 64 = 192k elements: under the back-pressure limit, so the answer does not wait for the indexer
    await index.upsert(vs.slice(1000).map((v, i) => ({ id: String(1000 + i), vector: v })));
    const seen: number[] = [(await info()).indexingVectorCount];
    assert.ok(seen[0] > 0, 'acknowledged before every point of the batch was inserted');
    for (let k = 0; k < 60; k++) {
      const i = 1000 + Math.floor((k * 2999) / 59);
      const got = await index.query({ vector: vs[i], topK: 1 });
      assert.equal(got[0]?.id, String(i), `vector ${i} is the top hit right after its acknowledgement`);
      seen.push((await info()).indexingVectorCount);
    }
    for (let k = 1; k < seen.length; k++) assert.ok(seen[k] <= seen[k - 1], `the queue only shrinks without writes: ${seen.join(',')}`);
    const positive = new Set(seen.filter((x) => x > 0));
    assert.ok(positive.size >= 2, `queries answered while the indexer inserts batch after batch (queue seen at ${[...positive].join(', ')})`);
    let last = await info();
    while (last.indexingVectorCount > 0) {
      await new Promise((r) => setTimeout(r, 20));
      last = await info();
    }
    assert.equal(last.vectorCount, 4000);
    for (const i of [1000, 2500, 3999]) assert.equal((await index.query({ vector: vs[i], topK: 1 }))[0]?.id, String(i));
  } finally {
    await svc.close();
  }
});

test('a snapshot is written off the event loop: writes meanwhile are acknowledged, visible and replayed after a crash', { timeout: 120_000 }, async () => {
  const tmp = tempDir();
  try {
    let idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    const vs = randomVectors(2200, D, 52);
    await idx.upsert('', vs.slice(0, 2000).map((v, i) => ({ id: String(i), vector: v })));
    await idx.whenIndexed();
    let ns = idx.ns('')!;
    const graph = ns.dense!;
    const snap = idx.maintain(1);
    assert.equal(graph.saving, 1, 'the graph is being written');
    // writes during the snapshot: acknowledged and searchable, queued for the graph until it is written
    await idx.upsert('', vs.slice(2000).map((v, i) => ({ id: String(2000 + i), vector: v })));
    await idx.upsert('', [{ id: '7', vector: vs[2199] }]); // an update too
    assert.equal(nearestId(idx, ns, vs[2100]), '2100');
    if (graph.saving) assert.ok(graph.pending > 0, 'nothing inserted into a graph being written');
    await snap;
    assert.equal(graph.saving, 0);
    await idx.whenIndexed();
    assert.equal(graph.pending, 0);
    idx.store.close(); // crash: no closing snapshot
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    assert.equal(idx.loadStats.fromSnapshot, 1);
    assert.equal(idx.loadStats.replayed, 201, 'the snapshot covers the writes before it started, not those during it');
    ns = idx.ns('')!;
    assert.equal(ns.count, 2200);
    for (const i of [0, 1999, 2000, 2150]) assert.equal(nearestId(idx, ns, vs[i]), String(i));
    assert.deepEqual(new Set(runQuery(idx, ns, engineQuery(vs[2199]), 2, 2).map((s) => ns.ids[s.label])), new Set(['7', '2199']));
    await idx.close();
  } finally {
    tmp.cleanup();
  }
});

test('a namespace reset while its snapshot is written leaves no snapshot of the old generation', { timeout: 60_000 }, async () => {
  const tmp = tempDir();
  try {
    let idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    const vs = randomVectors(1500, D, 53);
    await idx.upsert('', vs.slice(0, 1000).map((v, i) => ({ id: String(i), vector: v })));
    await idx.whenIndexed();
    const snap = idx.maintain(1);
    await idx.reset('', false);
    await idx.upsert('', vs.slice(1000).map((v, i) => ({ id: `n${i}`, vector: v })));
    await snap;
    const files = fs.readdirSync(idx.snapshotDir);
    assert.ok(!files.some((f) => /^ns-\d+-0-/.test(f)), `no file of generation 0 left: ${files.join(', ')}`);
    idx.store.close(); // crash
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    assert.equal(idx.loadStats.fromSnapshot, 0);
    const ns = idx.ns('')!;
    assert.equal(ns.count, 500);
    assert.equal(nearestId(idx, ns, vs[1200]), 'n200');
    await idx.close();
    assert.ok(fs.existsSync(path.join(idx.snapshotDir, `ns-${ns.row.id}.json`)), 'the closing snapshot is written');
  } finally {
    tmp.cleanup();
  }
});

test('an upsert body parsed off the event loop stores the same records and answers the same errors as one parsed inline', { timeout: 60_000 }, async () => {
  const d = 128;
  const svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: String(d) } });
  try {
    const url = svc.indexUrl();
    const token = svc.token();
    const vs = randomVectors(300, d, 54);
    const items = vs.map((v, i) => ({ id: `r${i}`, vector: v, metadata: { i, tag: ['a', { b: i % 3 }] }, data: `d${i}` }));
    const big = JSON.stringify(items);
    assert.ok(big.length >= OFF_THREAD_PARSE_CHARS, 'the batch goes to the worker');
    assert.equal((await raw(`${url}/upsert/big`, token, big)).status, 200);
    for (const it of items.slice(0, 40)) assert.equal((await raw(`${url}/upsert/small`, token, JSON.stringify(it))).status, 200);
    const fetched = async (ns: string) => (await raw(`${url}/fetch/${ns}`, token, JSON.stringify({ ids: items.slice(0, 40).map((x) => x.id), includeVectors: true, includeMetadata: true, includeData: true }))).body.result;
    assert.deepEqual(await fetched('big'), await fetched('small'));
    // the same refusals with the same messages, whichever side parsed the body
    const pad = (body: string) => body + ' '.repeat(OFF_THREAD_PARSE_CHARS);
    const bad = [
      JSON.stringify([{ id: 'x', vector: [...vs[0].slice(1), 'one'] }]),
      `[{"id": "x", "vector": [${vs[0].slice(1).join(',')}, 1e400]}]`,
      JSON.stringify([{ id: 'x', vector: [] }]),
      JSON.stringify([{ id: 'x', vector: vs[0].slice(1) }]),
      JSON.stringify({ id: 'x', vector: vs[0], metadata: 7 }),
      JSON.stringify([{ id: 'x' }]),
      '[{"id": "x", "vector": [1, 2,',
      '['.repeat(200) + ']'.repeat(200),
    ];
    for (const body of bad) {
      const inline = await raw(`${url}/upsert`, token, body);
      const off = await raw(`${url}/upsert`, token, pad(body));
      assert.ok(inline.status >= 400 && inline.status < 500, `${body.slice(0, 60)}: ${inline.status}`);
      assert.deepEqual(off, inline, body.slice(0, 60));
    }
    assert.equal((await raw(`${url}/info`, token, '{}')).body.result.namespaces['']?.vectorCount ?? 0, 0, 'nothing refused was stored');
  } finally {
    await svc.close();
  }
});

test('the upload parse worker stops when idle, and the next large body starts it again', { timeout: 60_000 }, async () => {
  const body = JSON.stringify(randomVectors(200, 64, 9).map((v, i) => ({ id: `p${i}`, vector: v })));
  const parsed = async () => {
    const r = await parseUpload(body);
    assert.ok('body' in r);
    const items = r.body as { id: string; vector: Float64Array }[];
    assert.equal(items.length, 200);
    assert.ok(items[7].vector instanceof Float64Array && items[7].vector.length === 64);
  };
  await parsed();
  assert.equal(parseWorkerRunning(), true);
  const t0 = Date.now();
  while (parseWorkerRunning() && Date.now() - t0 < 30_000) await new Promise((r) => setTimeout(r, 50));
  assert.equal(parseWorkerRunning(), false, 'stopped after being idle');
  await parsed();
  assert.equal(parseWorkerRunning(), true);
});

test('a body parsed on the worker (sent in pieces) equals JSON.parse of it, pieces split inside surrogate pairs and metadata included', { timeout: 60_000 }, async () => {
  const vs = randomVectors(300, 16, 12);
  // every item's id and metadata hold astral characters (surrogate pairs), so piece boundaries
  // fall inside some of them; one item's metadata is nested, one has none, one a scalar (refused later)
  const items: Record<string, unknown>[] = vs.map((v, i) => ({ id: `😀${i}`, vector: v, metadata: { s: i % 7, t: `é🎉${'x'.repeat(i % 50)}`, n: { a: [1, { b: '𝄞' }], z: null } } }));
  delete items[3].metadata;
  items[4].metadata = 'not an object';
  const text = JSON.stringify(items);
  assert.ok(text.length > 3 * PIECE_CHARS, 'several pieces');
  const r = await parseUpload(text);
  assert.ok('body' in r);
  const got = r.body as Record<string, unknown>[];
  const want = JSON.parse(text) as Record<string, unknown>[];
  assert.equal(got.length, want.length);
  for (let i = 0; i < want.length; i++) {
    const { vector, ...rest } = got[i];
    const { vector: wantVector, ...wantRest } = want[i];
    assert.deepEqual(rest, wantRest, `item ${i}`);
    assert.ok(vector instanceof Float64Array);
    assert.deepEqual(Array.from(vector), wantVector);
  }
  const bad = await parseUpload(text.slice(0, PIECE_CHARS + 5));
  assert.ok('error' in bad && bad.error.length > 0, 'a cut body is still refused as invalid JSON');
});

test('a batch insertion runs beside searches, updates and deletes of its own points; each point ends current, stale or deleted', { timeout: 60_000 }, async () => {
  const d = 48;
  const g = new HnswDense(d, 'EUCLIDEAN', { m: 16, efConstruction: 64, efSearch: 64 });
  const vs = randomVectors(3000, d, 54);
  let seq = 0;
  vs.slice(0, 2000).forEach((v, i) => g.add(i, v));
  for (let i = 2000; i < 3000; i++) g.enqueue(i, vs[i], ++seq);
  g.enqueue(5, vs[2999], ++seq); // an update of a graph point, in the batch as well
  const nearest = (v: number[], k = 1) => g.search(v, k).map((n) => n.label);
  const batch = g.indexBatch(3000 * d, 2);
  assert.ok(batch && g.inserting && !g.insertable);
  assert.equal(g.indexBatch(3000 * d, 2), undefined, 'one batch at a time');
  // meanwhile: searches pause the threads and see every point exactly; writes touch points in flight
  assert.deepEqual(nearest(vs[2500]), [2500]);
  g.enqueue(2100, vs[17], ++seq); // written again: the batch inserts the older vector
  g.remove(2200); // removed while being inserted
  g.remove(5); // an updated graph point removed while its new vector is inserted
  g.remove(2300);
  g.enqueue(2300, vs[2300], ++seq); // removed and written again
  assert.equal(g.pending, 999); // 1,001 queued, two removed (2200, 5), 2300 removed and queued again
  assert.deepEqual(nearest(vs[2200], 3).includes(2200), false);
  await batch;
  assert.ok(!g.inserting);
  assert.equal(g.pending, 2, 'the points written again stay queued');
  assert.equal(g.size, 2998);
  assert.deepEqual(new Set(nearest(vs[17], 2)), new Set([17, 2100]), 'the newer vector of 2100 is found, the older one is not');
  assert.ok(!nearest(vs[2100], 5).includes(2100));
  assert.ok(!nearest(vs[2200], 50).includes(2200), 'a point removed during its insertion is mark-deleted after it');
  assert.ok(!nearest(vs[2999], 5).includes(5));
  assert.equal(g.tombstones, 2);
  g.indexPending();
  assert.equal(g.pending, 0);
  assert.deepEqual(nearest(vs[2300]), [2300]);
  assert.deepEqual(new Set(nearest(vs[17], 2)), new Set([17, 2100]));
  assert.equal(g.size, 2998);
  // searches in several event-loop turns of a running batch each pause it (the addon throws on a read while unpaused)
  for (let i = 0; i < 50; i++) g.enqueue(100 + i, vs[2000 + i], ++seq);
  const again = g.indexBatch(50 * d, 2)!;
  for (let i = 0; i < 5; i++) {
    assert.equal(nearest(vs[2000 + i]).length, 1);
    await new Promise((r) => setImmediate(r));
  }
  await again;
  assert.deepEqual(new Set(nearest(vs[2010], 2)), new Set([110, 2010]), 'the second batch is in the graph');
});

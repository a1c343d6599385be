// svc's HNSW addon (native/hnsw/graph.cc, scripts/build-hnswlib.mjs, src/vector/engine/hnswlib.ts):
// built at install for the best level this CPU has and loaded; interchangeable with the portable
// build and with hnswlib-node (same neighbours, same file format); batch insertion on several
// threads builds the same quality of graph, and the graph refuses reads while a batch runs unpaused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import hnswlibNode from 'hnswlib-node';
import { Graph, hnswlibAddonPath, hnswlibBuild, mallocTrim, supportedLevels, type HnswGraph } from '../../src/vector/engine/hnswlib.js';

const require = createRequire(import.meta.url);
const levels = supportedLevels();
const Portable = (require(hnswlibAddonPath('portable')) as { Graph: typeof Graph }).Graph;

const n = 3000;
const d = 96;
let seed = 7;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648 - 0.5;
const unit = (v: number[]) => {
  const s = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  return Float32Array.from(v, (x) => x / s);
};
const data = Array.from({ length: n }, () => unit(Array.from({ length: d }, rnd)));
const queries = Array.from({ length: 100 }, () => unit(Array.from({ length: d }, rnd)));
const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i], 0);
const exact = queries.map((q) =>
  data
    .map((v, i) => ({ i, s: dot(q, v) }))
    .sort((a, b) => b.s - a.s)
    .slice(0, 10)
    .map((x) => x.i),
);
const packed = () => {
  const vs = new Float32Array(n * d);
  data.forEach((v, i) => vs.set(v, i * d));
  return { vs, labels: Uint32Array.from({ length: n }, (_, i) => i) };
};
const build = (G: typeof Graph) => {
  const g = new G('ip', d);
  g.initIndex(n, 16, 100, 100);
  data.forEach((v, i) => g.addPoint(v, i));
  return g;
};
const recall = (search: (q: Float32Array) => ArrayLike<number>) => {
  let hit = 0;
  queries.forEach((q, k) => {
    const got = new Set(Array.from(search(q)));
    hit += exact[k].filter((i) => got.has(i)).length;
  });
  return hit / (queries.length * 10);
};
const recallOf = (g: HnswGraph) => recall((q) => g.searchKnn(q, 10, 200).neighbors);

test('the install builds the addon for the best level this CPU has, and svc loads it', () => {
  assert.ok(fs.existsSync(hnswlibAddonPath('portable')), 'postinstall should have built the portable addon');
  if (levels.length === 0) return assert.equal(hnswlibBuild, 'portable');
  assert.ok(fs.existsSync(hnswlibAddonPath(levels[0])), `postinstall should have built ${hnswlibAddonPath(levels[0])}`);
  assert.equal(hnswlibBuild, levels[0]);
  assert.notEqual(Graph, Portable);
});

test('supportedLevels follows the x86-64 psABI flag sets', () => {
  const v3 = ['avx', 'avx2', 'bmi1', 'bmi2', 'f16c', 'fma', 'abm', 'movbe', 'xsave', 'sse4_2', 'ssse3', 'popcnt', 'cx16'];
  const v4 = [...v3, 'avx512f', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512vl'];
  if (process.arch !== 'x64') {
    assert.deepEqual(supportedLevels(new Set(v4)), []);
    return;
  }
  assert.deepEqual(supportedLevels(new Set(v4)), ['x86-64-v4', 'x86-64-v3']);
  assert.deepEqual(supportedLevels(new Set(v3)), ['x86-64-v3']);
  assert.deepEqual(supportedLevels(new Set(v4.filter((f) => f !== 'avx512vl'))), ['x86-64-v3']);
  assert.deepEqual(supportedLevels(new Set(v3.filter((f) => f !== 'fma'))), []);
});

test('the host build, the portable build and hnswlib-node find the same neighbours and read each other\'s files', () => {
  const host = build(Graph);
  const base = build(Portable);
  const rHost = recallOf(host);
  const rBase = recallOf(base);
  assert.ok(rHost >= 0.95 && rBase >= 0.95, `recall@10 host ${rHost}, portable ${rBase}`);
  assert.ok(Math.abs(rHost - rBase) <= 0.02, `recall@10 host ${rHost}, portable ${rBase}`);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-hnswlib-'));
  try {
    // a graph written by the host build loads in the portable build with the same answers
    const file = path.join(dir, 'graph.bin');
    host.writeIndexSync(file);
    const back = new Portable('ip', d);
    back.readIndexSync(file);
    let same = 0;
    for (const q of queries) if (host.searchKnn(q, 10, 200).neighbors.join() === back.searchKnn(q, 10, 200).neighbors.join()) same++;
    assert.ok(same >= 95, `${same}/100 queries with identical top 10`);

    // snapshots written by earlier svc versions (hnswlib-node's binding) load too
    const old = new hnswlibNode.HierarchicalNSW('ip', d);
    old.initIndex({ maxElements: n, m: 16, efConstruction: 100, randomSeed: 100 });
    data.forEach((v, i) => old.addPoint(Array.from(v), i));
    old.setEf(200);
    const oldFile = path.join(dir, 'old.bin');
    old.writeIndexSync(oldFile);
    const loaded = new Graph('ip', d);
    loaded.readIndexSync(oldFile);
    same = 0;
    for (const q of queries) if (old.searchKnn(Array.from(q), 10).neighbors.join() === loaded.searchKnn(q, 10, 200).neighbors.join()) same++;
    assert.ok(same >= 95, `${same}/100 queries with identical top 10`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('batch insertion on two threads builds a graph as good as one thread, and reads wait for a pause', async () => {
  const { vs, labels } = packed();
  const g = new Graph('ip', d);
  g.initIndex(n, 16, 100, 100);
  const running = g.addPoints(vs, labels, 2);
  assert.throws(() => g.searchKnn(queries[0], 10, 50), /batch insertion runs unpaused/);
  assert.throws(() => g.markDelete(0), /batch insertion runs unpaused/);
  assert.throws(() => g.resizeIndex(2 * n), /batch insertion is running/);
  assert.throws(() => g.writeIndexSync(path.join(os.tmpdir(), 'never.bin')), /batch insertion is running/);
  // paused: searches run while the batch waits (its points so far are found)
  let searched = 0;
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 1));
    g.pause();
    if (g.getCurrentCount() > 0) {
      const r = g.searchKnn(queries[i % queries.length], 5, 50);
      assert.ok(r.neighbors.length > 0 && r.neighbors.every((l) => l < n));
      searched++;
    }
    g.resume();
  }
  await running;
  assert.ok(searched > 0);
  assert.equal(g.getCurrentCount(), n);
  assert.equal(new Set(g.getIdsList()).size, n);
  const rBatch = recallOf(g);
  const rOne = recallOf(build(Graph));
  assert.ok(rBatch >= 0.95 && Math.abs(rBatch - rOne) <= 0.02, `recall@10 two threads ${rBatch}, one ${rOne}`);
  // replacing points in a batch keeps the count; capacity is checked before a batch starts
  await g.addPoints(vs.subarray(0, 10 * d), labels.subarray(0, 10), 2);
  assert.equal(g.getCurrentCount(), n);
  assert.throws(() => g.addPoints(vs.subarray(0, d), Uint32Array.of(n + 1), 1), /not enough capacity/);
  // the exact scan reads the vectors the graph holds: point 3 is at distance 0 from itself
  const near = g.exactKnn(Float32Array.from(data[3]), Int32Array.of(5, 3, 9), 3, 2, new Uint8Array(n).fill(1));
  assert.equal(near.neighbors[0], 3);
  assert.ok(Math.abs(near.distances[0]) < 1e-5 && near.distances[1] > near.distances[0], `distances ${near.distances}`);
  assert.equal(typeof (await mallocTrim()), 'boolean');
});

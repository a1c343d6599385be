// The hnswlib build for this CPU (scripts/build-hnswlib.mjs, src/vector/engine/hnswlib.ts):
// installed and loaded when the CPU has its instructions, and interchangeable with the portable
// build — same neighbours, same file format.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import portable from 'hnswlib-node';
import { hnswlib, hnswlibAddonPath, hnswlibBuild, supportedLevels } from '../../src/vector/engine/hnswlib.js';

const levels = supportedLevels();
const noLevel = levels.length === 0 ? `this CPU (${process.arch}) has no x86-64-v3/v4 level: the portable build is the only one` : false;

test('the install builds hnswlib for the best level this CPU has, and svc loads it', { skip: noLevel }, () => {
  assert.ok(fs.existsSync(hnswlibAddonPath(levels[0])), `postinstall should have built ${hnswlibAddonPath(levels[0])}`);
  assert.equal(hnswlibBuild, levels[0]);
  assert.notEqual(hnswlib, portable);
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

test('the host build finds the same neighbours as the portable build and reads its files', { skip: noLevel }, () => {
  const n = 3000;
  const d = 96;
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  const data = Array.from({ length: n }, () => Array.from({ length: d }, rnd));
  const queries = Array.from({ length: 100 }, () => Array.from({ length: d }, rnd));
  const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i], 0);
  const norm = (a: number[]) => Math.sqrt(dot(a, a));
  const exact = queries.map((q) =>
    data
      .map((v, i) => ({ i, s: dot(q, v) / norm(q) / norm(v) }))
      .sort((a, b) => b.s - a.s)
      .slice(0, 10)
      .map((x) => x.i),
  );
  const build = (lib: typeof portable) => {
    const idx = new lib.HierarchicalNSW('cosine', d);
    idx.initIndex({ maxElements: n, m: 16, efConstruction: 100, randomSeed: 100 });
    data.forEach((v, i) => idx.addPoint(v, i));
    idx.setEf(200);
    return idx;
  };
  const recall = (idx: InstanceType<typeof portable.HierarchicalNSW>) => {
    let hit = 0;
    queries.forEach((q, k) => {
      const got = new Set(idx.searchKnn(q, 10).neighbors);
      hit += exact[k].filter((i) => got.has(i)).length;
    });
    return hit / (queries.length * 10);
  };
  const host = build(hnswlib);
  const base = build(portable);
  const rHost = recall(host);
  const rBase = recall(base);
  assert.ok(rHost >= 0.95 && rBase >= 0.95, `recall@10 host ${rHost}, portable ${rBase}`);
  assert.ok(Math.abs(rHost - rBase) <= 0.02, `recall@10 host ${rHost}, portable ${rBase}`);

  // a graph written by the host build loads in the portable build with the same answers
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-hnswlib-'));
  try {
    const file = path.join(dir, 'graph.bin');
    host.writeIndexSync(file);
    const back = new portable.HierarchicalNSW('cosine', d);
    back.readIndexSync(file);
    back.setEf(200);
    let same = 0;
    for (const q of queries) {
      const a = host.searchKnn(q, 10).neighbors;
      const b = back.searchKnn(q, 10).neighbors;
      if (a.join() === b.join()) same++;
    }
    assert.ok(same >= 95, `${same}/100 queries with identical top 10`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

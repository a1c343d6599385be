/**
 * `npm run bench:vector-filtered` — the filtered dense query path of the vector engine, in-process
 * (no HTTP): CPU time per query of `runQuery` + result formatting, unfiltered and at the four
 * filter selectivities of `bench/vector.ts` (0.1 %, 1 %, 10 %, 50 %), with recall@10 against the
 * exact filtered top-10. Each filtered pass is paired with an unfiltered pass right before it
 * (same machine load); the ratio printed is the median over the pairs of unfiltered ÷ filtered
 * CPU time, i.e. filtered throughput as a share of unfiltered throughput on one core.
 *
 * The index (clustered data, `bench/lib/vector-data.ts`; metadata `{s: i % 1000}`) is built once
 * through the engine's own write path (SQLite + graph) into `BENCH_DIR` and reopened from its
 * snapshot on later runs, so profiling runs start in seconds.
 *
 * Env: `BENCH_N` (default 100000), `BENCH_D` (128), `BENCH_QUERIES` (200), `BENCH_EF` (efSearch,
 * 32), `BENCH_PAIRS` (paired passes per filter, 5), `BENCH_FILTERS` (e.g. `1%,10%`; default all four), `BENCH_DIR` (default
 * `<tmp>/svc-bench-vfilter-<N>x<D>`, kept between runs), `BENCH_PATH` (`exact` or `post`: force one
 * filtered strategy, to measure both), `BENCH_OUT` (report file, default `docs/readme/vector-bench.md`,
 * `-` for none: the run replaces its own section there). Run under `node --cpu-prof` (e.g.
 * `node --cpu-prof --import tsx bench/vector-filtered.ts`) to see where the time goes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_HNSW, type IndexDefinition } from '../src/vector/definitions.js';
import { FlatDense } from '../src/vector/engine/dense.js';
import { hnswlibBuild } from '../src/vector/engine/hnswlib.js';
import { VectorIndex } from '../src/vector/engine/vector-index.js';
import { createLogger } from '../src/logger.js';
import { runQuery } from '../src/vector/query/execute.js';
import { formatScored } from '../src/vector/query/records.js';
import { recallOf } from './lib/stats.js';
import { writeSection } from './lib/report.js';
import { FILTERED_HEADING, NOTES_HEADING } from './lib/vector-notes.js';
import { clustered, FILTERS, latentMap } from './lib/vector-data.js';

const N = Number(process.env.BENCH_N ?? 100_000);
const D = Number(process.env.BENCH_D ?? 128);
const QN = Number(process.env.BENCH_QUERIES ?? 200);
const EF = Number(process.env.BENCH_EF ?? 32);
const PAIRS = Number(process.env.BENCH_PAIRS ?? 5);
const DIR = process.env.BENCH_DIR ?? path.join(os.tmpdir(), `svc-bench-vfilter-${N}x${D}`);
const K = 10;
const OUT = process.env.BENCH_OUT ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/readme/vector-bench.md');
const load0 = os.loadavg()[0];
/** Table rows of the report: filter, µs/query, share of unfiltered, recall@10. */
const rows: string[] = [];

const def: IndexDefinition = { name: 'default', type: 'DENSE', dimension: D, metric: 'COSINE', embedder: {}, hnsw: { ...DEFAULT_HNSW, efSearch: EF } };
const logger = createLogger('warn');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const w = latentMap(D);
const data = clustered(N, D, 2, w);
const queries = clustered(QN, D, 3, w);

let idx = new VectorIndex(def, DIR, logger);
if ((idx.ns('')?.count ?? 0) !== N) {
  const t0 = performance.now();
  await idx.reset('', true);
  for (let i = 0; i < N; i += 1000) {
    await idx.upsert('', data.slice(i, i + 1000).map((vector, j) => ({ id: `v${i + j}`, vector, metadata: { s: (i + j) % 1000 } })));
  }
  await idx.whenIndexed();
  console.log(`built ${N}×${D} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  await idx.close();
  idx = new VectorIndex(def, DIR, logger);
}
// records newer than the snapshot are queued for the graph: insert them before measuring
await idx.whenIndexed();
if (process.env.BENCH_SQLITE_PRAGMA) idx.store.db.pragma(process.env.BENCH_SQLITE_PRAGMA);
const ns = idx.ns('')!;
// BENCH_PATH=exact|post: every filtered query takes that path (the chooser's estimate is overridden)
if (process.env.BENCH_PATH) ns.dense!.scanCost = () => (process.env.BENCH_PATH === 'exact' ? 0 : Infinity);
console.log(`index: ${ns.count} records, loaded ${JSON.stringify(idx.loadStats)}, dir ${DIR}`);

const flat = new FlatDense(D, 'COSINE', N);
data.forEach((v, i) => flat.add(i, v));
const request = (vector: number[], filter?: string) => ({
  vector, filter, topK: K, useIdf: false, weightingGiven: false, fusion: 'RRF' as const, mode: 'HYBRID' as const,
  includeVectors: false, includeMetadata: false, includeData: false,
});

/** One pass over the queries: CPU µs per query and the labels found. */
function pass(filter?: string): { us: number; got: number[][] } {
  const got: number[][] = [];
  const c0 = process.cpuUsage();
  for (const q of queries) {
    const hits = runQuery(idx, ns, request(q, filter), K, K);
    formatScored(idx, ns, hits, request(q));
    got.push(hits.map((h) => h.label));
  }
  const c = process.cpuUsage(c0);
  return { us: (c.user + c.system) / QN, got };
}

pass();
const unfilteredTruth = queries.map((q) => flat.search(q, K).map((x) => x.label));
const base = pass();
const baseRecall = recallOf(base.got, unfilteredTruth).toFixed(3);
console.log(`unfiltered: ${base.us.toFixed(0)} µs/query, recall@10 ${baseRecall} (efSearch ${EF})`);
rows.push(`| none | ${base.us.toFixed(0)} | – | ${baseRecall} |`);
for (const f of FILTERS.filter((x) => !process.env.BENCH_FILTERS || process.env.BENCH_FILTERS.split(',').includes(x.name))) {
  const truth = queries.map((q) => flat.search(q, K, f.keep).map((x) => x.label));
  pass(f.text); // warm-up (filter match cached)
  const ratios: number[] = [];
  const us: number[] = [];
  let recall = 0;
  for (let i = 0; i < PAIRS; i++) {
    const u = pass();
    const r = pass(f.text);
    ratios.push(u.us / r.us);
    us.push(r.us);
    recall = recallOf(r.got, truth);
  }
  console.log(`filter ${f.name.padEnd(4)} (${f.text}): ${median(us).toFixed(0)} µs/query, ${(100 * median(ratios)).toFixed(0)} % of unfiltered, recall@10 ${recall.toFixed(3)}`);
  rows.push(`| ${f.name} (\`${f.text}\`) | ${median(us).toFixed(0)} | ${(100 * median(ratios)).toFixed(0)} % | ${recall.toFixed(3)} |`);
}
console.log(`costs: ${JSON.stringify(ns.dense!.costs)}`);
if (OUT !== '-' && !process.env.BENCH_PATH && !process.env.BENCH_FILTERS) {
  const text = [
    FILTERED_HEADING,
    '',
    `Run ${new Date().toISOString()} on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, Node ${process.version}, hnswlib build ${hnswlibBuild}, 1-minute load average ${load0.toFixed(2)} at the start, ${os.loadavg()[0].toFixed(2)} at the end. ${N.toLocaleString('en-US')} × ${D} clustered vectors (COSINE, metadata \`s = i % 1000\`), efSearch ${EF}, ${QN} queries, topK ${K}; engine level (\`runQuery\` + result formatting, no HTTP), CPU time per query. Each filtered pass is paired with an unfiltered pass right before it; share = median over ${PAIRS} pairs of unfiltered ÷ filtered CPU time (filtered throughput as a share of unfiltered, one core); recall@10 against the exact filtered top-10.`,
    '',
    '| filter | µs/query | share of unfiltered | recall@10 |',
    '|---|---:|---:|---:|',
    ...rows,
    '',
  ].join('\n');
  writeSection(OUT, FILTERED_HEADING, text, NOTES_HEADING);
  console.log(`written to ${OUT}`);
}
await idx.close();

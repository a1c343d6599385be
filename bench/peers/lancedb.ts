/**
 * LanceDB (`@lancedb/lancedb`, in-process, embedded) as a peer in `npm run bench:vector`
 * Not a dependency of svc: `bench/peers/package.json` pins 0.37.1 (the
 * newest release whose `engines` allows Node 20; 0.38+ need Node 22) and `apache-arrow` 18.1.0
 * (its peer range `>=15 <=18.1`), installed on first use by `./install.ts` (the native library is
 * the npm platform package `@lancedb/lancedb-linux-x64-gnu`, no install script needed).
 *
 * Measured (LanceDB docs: "vector search", "ANN indexes"): a table in a temp dir with columns
 * `id` (int), `vector` (fixed-size list of float32), `s` (int, `i % 1000`, for filters); flat search
 * (`bypassVectorIndex()`, exact) on a subset of queries; then an `IVF_HNSW_SQ` index
 * (`Index.hnswSq`, cosine, one partition, m 16, efConstruction 150) queried with `ef` swept until
 * recall@10 >= 0.95 (with `refineFactor` re-ranking if SQ alone stays below); queries one at a time
 * (1 client) and 16 in flight (16 clients); filtered queries (`where`, pre-filter) at that ef.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load, recallOf } from '../lib/stats.js';
import { ensurePeer, importPeer } from './install.js';

/**
 * Installs `bench/peers` (`./install.ts`) when one of the vector peers (LanceDB, USearch, Chroma)
 * is missing. Returns an error text instead of throwing when it cannot be installed.
 */
export function ensurePeers(): string | undefined {
  for (const name of ['@lancedb/lancedb', 'usearch', 'chromadb']) {
    const err = ensurePeer(name);
    if (err) return err;
  }
  return undefined;
}

export interface LanceInput {
  data: number[][];
  queries: number[][];
  /** Exact top-10 labels per query (ground truth), unfiltered and per filter. */
  truth: number[][];
  filters: { name: string; where: string; truth: number[][] }[];
  /** Adds one result row to the report. */
  add(system: string, what: string, value: string): void;
  fmt(x: number, digits?: number): string;
}

/**
 * Builds and measures LanceDB on `input` (module doc). Rows go to `input.add`. Errors (the package
 * cannot be installed or loaded) are reported as a row, not thrown.
 */
export async function runLanceDb(input: LanceInput): Promise<void> {
  const { data, queries, truth, add, fmt } = input;
  const sys = 'LanceDB 0.37.1 in-process';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let lancedb: any;
  try {
    lancedb = await importPeer('@lancedb/lancedb');
  } catch (err) {
    return add(sys, 'not run', (err as Error).message);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-lancedb-bench-'));
  try {
    const db = await lancedb.connect(dir);
    let t = performance.now();
    const rows = data.map((v, i) => ({ id: i, vector: Float32Array.from(v), s: i % 1000 }));
    const table = await db.createTable('bench', rows);
    const ingest = (performance.now() - t) / 1000;
    add(sys, 'ingest (createTable, one batch)', `${fmt(ingest, 1)} s (${fmt(data.length / ingest)} vec/s)`);
    const ids = (r: { id: number | bigint }[]) => r.map((x) => Number(x.id));

    // Flat (exact) search on a subset: it scans every vector per query.
    const flatN = Math.min(queries.length, 50);
    const flat = await load(flatN, 1, (i): Promise<{ id: number }[]> => table.vectorSearch(queries[i]).distanceType('cosine').bypassVectorIndex().limit(10).select(['id', '_distance']).toArray());
    add(sys, 'flat (bypassVectorIndex), 1 client', `${fmt(flat.qps)} QPS @ recall ${recallOf(flat.results.map(ids), truth.slice(0, flatN)).toFixed(3)} (${flatN} queries)`);

    t = performance.now();
    await table.createIndex('vector', { config: lancedb.Index.hnswSq({ distanceType: 'cosine', numPartitions: 1, m: 16, efConstruction: 150 }) });
    const build = (performance.now() - t) / 1000;
    add(sys, 'build IVF_HNSW_SQ (1 partition, m 16, efC 150)', `${fmt(build, 1)} s (${fmt(data.length / build)} vec/s)`);

    const search = (q: number[], ef: number, refine: number, where?: string): Promise<{ id: number }[]> => {
      let s = table.vectorSearch(q).distanceType('cosine').ef(ef).limit(10).select(['id', '_distance']);
      if (refine > 1) s = s.refineFactor(refine);
      if (where) s = s.where(where);
      return s.toArray();
    };
    let chosen: { ef: number; refine: number } | undefined;
    for (const refine of [1, 4]) {
      for (const ef of [16, 32, 64, 128, 256, 512]) {
        const r = await load(queries.length, 1, (i) => search(queries[i], ef, refine));
        const rec = recallOf(r.results.map(ids), truth);
        add(sys, `ef ${ef}${refine > 1 ? `, refineFactor ${refine}` : ''}, 1 client`, `${fmt(r.qps)} QPS @ recall ${rec.toFixed(3)}`);
        if (rec >= 0.95) {
          chosen = { ef, refine };
          break;
        }
      }
      if (chosen) break;
    }
    chosen ??= { ef: 512, refine: 4 };
    const label = `ef ${chosen.ef}${chosen.refine > 1 ? `, refineFactor ${chosen.refine}` : ''}`;
    const r16 = await load(queries.length, 16, (i) => search(queries[i], chosen!.ef, chosen!.refine));
    add(sys, `${label}, 16 clients (16 queries in flight)`, `${fmt(r16.qps)} QPS @ recall ${recallOf(r16.results.map(ids), truth).toFixed(3)}`);
    for (const f of input.filters) {
      const r = await load(queries.length, 1, (i) => search(queries[i], chosen!.ef, chosen!.refine, f.where));
      add(sys, `filter ${f.name} (where, pre-filter), ${label}, 1 client`, `${fmt(r.qps)} QPS @ recall ${recallOf(r.results.map(ids), f.truth).toFixed(3)}`);
    }
  } catch (err) {
    add(sys, 'failed', (err as Error).message.split('\n')[0]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

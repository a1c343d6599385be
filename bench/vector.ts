/**
 * `npm run bench:vector` — the vector area against its ceiling and baseline, in one run
 * (the peers):
 *
 * - **svc (HTTP)**: `node bin/svc.js serve` with `SVC_AREAS=vector` as a child process; vectors
 *   upserted in batches of 1,000 through `/upsert`; queries `POST /query {vector, topK: 10}`:
 *   recall measured with sequential requests, throughput with `wrk` (C, one thread, keep-alive,
 *   pre-encoded bodies cycling over the query set) at 1 and 16 connections. Each throughput cell
 *   alternates REPS × (~1 s in-process hnswlib at the same ef, one wrk run) and reports the
 *   medians and the median of the paired ratios, so both sides see the same machine load.
 * - **hnswlib in-process** (the ceiling; svc's addon, the build svc loads, called directly — also
 *   built by batch insertion on every core): the same graph parameters (M 16, efConstruction 100,
 *   same seed and insertion order, so the same graph), `searchKnn` called directly.
 * - **brute force** (exact, `FlatDense`): also the ground truth for recall@10.
 * - **LanceDB** (`@lancedb/lancedb` 0.37.1, in-process, the peer users pick): flat search and an
 *   IVF_HNSW_SQ index, ef swept to recall@10 >= 0.95 (`bench/peers/lancedb.ts`; installed on first
 *   use into `bench/peers/node_modules`, not a dependency of svc). `BENCH_LANCEDB=0` skips it.
 *
 * Data: "clustered" = 16-d latent Gaussian × fixed random 16×D map + 0.1 Gaussian noise (closer to
 * real embeddings than i.i.d. noise); COSINE. Sets: 100k × 128 and 20k × 768.
 * ef is swept in-process; svc runs with the smallest ef reaching recall@10 >= 0.95 in-process
 * (same graph, so the same recall; the HTTP recall is measured and printed too).
 * Filtered queries: metadata `s = i % 1000`, filters `s < 1`, `s < 10`, `s < 100`, `s < 500`
 * (selectivity 0.1 %, 1 %, 10 %, 50 %): recall@10 against the exact filtered top-10 and wrk QPS at
 * 1 client, each run paired with an unfiltered wrk run (ratio = median of the pairs).
 * Writes while reading: sequential query latency (p50/p99) idle, then with a writer upserting
 * batches of 100 new vectors as fast as they are accepted (`BENCH_STREAM_SECONDS`, default 10).
 * Restart: svc stopped with SIGKILL right after the build (no closing snapshot: the records newer
 * than the last periodic snapshot are replayed), then with SIGTERM (closing snapshot), and started
 * again; time from spawn until the index is loaded (a query answers 200; the port answers 503 while it loads). `--million` (or `BENCH_MILLION=1`): one set of
 * `BENCH_MILLION_N` (default 1,000,000) × 128 instead, svc only (no in-process build, no peers),
 * 100 queries, recall and QPS at ef 32/64/128 (svc restarted per ef, from its snapshot).
 * Peers (`BENCH_PEERS`, default `lancedb,usearch,chroma`; `none` skips them): see bench/peers/.
 * `BENCH_QUANTIZATION=int8` (also with `--million`): svc's index is defined with
 * `"quantization": "int8"` (8-bit codes, no graph: every query scans them) — svc cells only (no
 * in-process hnswlib, no peers), memory against raw float32 vectors (N·D·4, no links), one QPS
 * cell instead of the ef sweep; the rows go to a section of their own ({@link INT8_HEADING}).
 * Memory: child RSS growth vs raw size = vectors (N·D·4) + level-0 links (N·(2M·4 + 4)) + labels
 * (N·8), sampled after forced full GCs (the child runs with `--inspect=127.0.0.1:0`;
 * `bench/lib/inspector-memory.ts`) at start, at N/2 and after the build (the N/2 and end samples
 * once the upload parse worker has stopped: {@link settledMemory}), split into V8 heap and the
 * rest (native: hnswlib, SQLite, malloc); also right after the last upsert without a GC, scaled
 * per 100k vectors, and the marginal growth of the second half of the build (the per-vector cost
 * without the fixed base).
 *
 * Env: `BENCH_SETS` (default `100000x128,20000x768`), `BENCH_QUERIES` (default 300),
 * `BENCH_SECONDS` (wrk run, default 3), `BENCH_REPS` (runs per cell, default 3), `BENCH_OUT` (default `docs/readme/vector-bench.md`), `BENCH_PROFILE=<dir>` (svc writes a CPU profile there),
 * `BENCH_SVC_NODE_FLAGS` (extra node flags for the svc process only, e.g. `--max-semi-space-size=1`),
 * `BENCH_LANCEDB` (`0` skips LanceDB), `BENCH_AB_NODE=<node>` + `BENCH_AB_ROOT=<checkout>` (instead of all
 * the above: this Node.js vs that one, interleaved, on the first set: {@link abRun}; `BENCH_AB_EF`).
 */
import { postgresRows } from './vector-pg.js';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { Graph, hnswlibBuild, type HnswGraph } from '../src/vector/engine/hnswlib.js';
import { FlatDense, storedForm } from '../src/vector/engine/dense.js';
import { PARSE_WORKER_IDLE_MS } from '../src/vector/http/upload-parse.js';
import { MEMORY_TRIM_QUIET_MS, TRIM_CHECK_MS } from '../src/vector/index.js';
import { INSERT_THREADS } from '../src/vector/engine/vector-index.js';
import { CHECKPOINT_IDLE_MS, CHECKPOINT_INTERVAL_MS } from '../src/vector/engine/store.js';
import { runChroma } from './peers/chroma.js';
import { ensurePeers, runLanceDb } from './peers/lancedb.js';
import { runUsearch } from './peers/usearch.js';
import { inspectorUrl, memoryAfterGc, type ChildMemory } from './lib/inspector-memory.js';
import { FILTERED_HEADING, INT8_HEADING, LANCEDB_NOTE, MILLION_HEADING, NOTES, NOTES_HEADING } from './lib/vector-notes.js';
import { sectionOf, writeSection } from './lib/report.js';
import { load, percentile, recallOf } from './lib/stats.js';
import { abOrder, abRatios, abVariants, fmtSpread, type SvcVariant } from './lib/ab.js';
import { clustered, FILTERS, latentMap } from './lib/vector-data.js';
import { requirePrograms } from './lib/needs.js';
import { adoptChild, adoptTempDir } from './lib/proc.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
/** Repetitions per throughput cell (median reported; in-process and HTTP interleaved). */
const REPS = Number(process.env.BENCH_REPS ?? 3);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * QPS of `bodies` (pre-encoded JSON, cycled) POSTed to `url` over `connections` keep-alive
 * connections with Debian's `wrk` (one thread: a C client that takes far less CPU from svc on
 * this 2-core machine than autocannon did). Requests are formatted once in `init`.
 * @throws Error on wrk failure, socket errors or any non-2xx answer.
 */
/** CPU seconds (user + system) process `pid` has used so far (`/proc/<pid>/stat`, 100 Hz ticks). */
export function cpuSeconds(pid: number): number {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / 100;
}

/**
 * {@link wrkQps} plus the server's CPU time per request (µs) when `pid` is given: on a machine
 * shared with other jobs the wall-clock QPS follows the load, the CPU cost per request much less.
 */
async function wrkCpu(url: string, token: string, bodies: string[], connections: number, workDir: string, pid: number): Promise<{ qps: number; cpuUs: number }> {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  const qps = await wrkQps(url, token, bodies, connections, workDir);
  const requests = (qps * (performance.now() - t0)) / 1000;
  return { qps, cpuUs: ((cpuSeconds(pid) - c0) * 1e6) / requests };
}

async function wrkQps(url: string, token: string, bodies: string[], connections: number, workDir: string): Promise<number> {
  const bodyFile = path.join(workDir, 'wrk-bodies.txt');
  fs.writeFileSync(bodyFile, bodies.join('\n') + '\n');
  const script = path.join(workDir, 'wrk.lua');
  fs.writeFileSync(script, `wrk.method = "POST"
wrk.headers["authorization"] = "Bearer ${token}"
wrk.headers["content-type"] = "application/json"
local reqs = {}
local i = 0
init = function(args)
  local f = assert(io.open("${bodyFile}", "rb"))
  for line in f:lines() do reqs[#reqs + 1] = wrk.format(nil, nil, nil, line) end
  f:close()
end
request = function()
  i = i + 1
  if i > #reqs then i = 1 end
  return reqs[i]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKRESULT %d %d %d %d\\n", summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status))
end
`);
  const out = await new Promise<string>((resolve, reject) => {
    const p = adoptChild(spawn('wrk', ['-t1', `-c${connections}`, `-d${SECONDS}s`, '--timeout', '10s', '-s', script, url], { stdio: ['ignore', 'pipe', 'pipe'] }), 'wrk');
    let text = '';
    p.stdout!.on('data', (b) => (text += b));
    p.stderr!.on('data', (b) => (text += b));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exit ${code}: ${text}`))));
  });
  const m = /WRKRESULT (\d+) (\d+) (\d+) (\d+)/.exec(out);
  if (!m) throw new Error(`wrk: no result\n${out}`);
  const [requests, us, sockErr, status] = m.slice(1).map(Number);
  if (sockErr || status) throw new Error(`wrk: ${sockErr} socket errors, ${status} non-2xx`);
  return requests / (us / 1e6);
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const M = 16;
const EF_C = 100;
/** Row name of the in-process ceiling: hnswlib in svc's addon (the build svc loads), called directly. */
const IN_PROCESS = 'hnswlib in-process';
const MILLION = process.argv.includes('--million') || process.env.BENCH_MILLION === '1';
const QN = Number(process.env.BENCH_QUERIES ?? (MILLION ? 100 : 300));
const SETS = MILLION
  ? [[Number(process.env.BENCH_MILLION_N ?? 1_000_000), 128] as [number, number]]
  : (process.env.BENCH_SETS ?? '100000x128,20000x768').split(',').map((s) => s.split('x').map(Number) as [number, number]);
/** svc's index holds 8-bit codes and no graph (`"quantization": "int8"`). */
const INT8 = process.env.BENCH_QUANTIZATION === 'int8';
if (process.env.BENCH_QUANTIZATION && !INT8) throw new Error(`BENCH_QUANTIZATION=${process.env.BENCH_QUANTIZATION}: expected int8`);
const PEERS = new Set(MILLION || INT8 ? [] : (process.env.BENCH_PEERS ?? 'lancedb,usearch,chroma').split(','));
const STREAM_SECONDS = Number(process.env.BENCH_STREAM_SECONDS ?? 10);
const OUT = process.env.BENCH_OUT ?? path.join(root, 'docs/readme/vector-bench.md');
/** Sections of the report written by other modes (`--million`, `bench:vector-filtered`): a full run keeps them. */
const KEPT_SECTIONS = [MILLION_HEADING, INT8_HEADING, FILTERED_HEADING];

interface Row {
  set: string;
  system: string;
  what: string;
  value: string;
}
const rows: Row[] = [];
const add = (set: string, system: string, what: string, value: string) => {
  rows.push({ set, system, what, value });
  console.log(`${set} | ${system} | ${what} | ${value}`);
};

async function startSvc(dataDir: string, dim: number, ef: number, variant?: SvcVariant, logLevel = 'warn'): Promise<{ child: ChildProcess; url: string; token: string; inspector: string; startMs: number; log: () => string }> {
  const t0 = performance.now();
  const file = path.join(dataDir, 'indexes.json');
  const dense = INT8 ? { quantization: 'int8' } : { hnsw: { m: M, efConstruction: EF_C, efSearch: ef } };
  fs.writeFileSync(file, JSON.stringify([{ name: 'default', type: 'DENSE', dimension: dim, metric: 'COSINE', ...dense }]));
  const prof = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  prof.push(...(process.env.BENCH_SVC_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean));
  // --inspect: the bench forces full GCs before memory samples (bench/lib/inspector-memory.ts)
  const svcRoot = variant?.root ?? root;
  const child = adoptChild(spawn(variant?.node ?? process.execPath, ['--inspect=127.0.0.1:0', ...prof, path.join(svcRoot, 'bin/svc.js'), 'serve'], {
    cwd: svcRoot,
    env: {
      ...process.env,
      SVC_AREAS: 'vector', SVC_VECTOR_PORT: '0', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: logLevel, SVC_VECTOR_INDEXES: file,
      ...variant?.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  }), 'svc');
  let log = '';
  const inspector = inspectorUrl(child.stderr!, (text) => (logLevel === 'warn' ? process.stderr.write(text) : (log += text)));
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (b) => {
      out += b;
      const m = /^vector\s+(http:\/\/\S+)/m.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (c) => reject(new Error(`svc exited ${c}`)));
  });
  const creds = JSON.parse(fs.readFileSync(path.join(dataDir, 'credentials.json'), 'utf8'));
  const token = creds['vector.default.token'];
  // ready = the index is loaded: a query answers 200 (503 + Retry-After while it loads)
  const probe = JSON.stringify({ vector: new Array(dim).fill(1), topK: 1 });
  for (;;) {
    const res = await request(`${url}/query`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: probe }).catch(() => undefined);
    await res?.body.dump();
    if (res?.statusCode === 200) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const startMs = performance.now() - t0;
  return { child, url, token, inspector: await inspector, startMs, log: () => log };
}

function rssBytes(pid: number): number {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(s)![1]) * 1024;
}

const agent = new Agent({ connections: 32, pipelining: 1, keepAliveTimeout: 60_000 });
async function post(url: string, token: string, body: unknown): Promise<any> {
  return postText(url, token, JSON.stringify(body));
}

/** {@link post} with the body already encoded. */
async function postText(url: string, token: string, text: string): Promise<any> {
  const res = await request(url, { method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: text });
  const json = (await res.body.json()) as any;
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${JSON.stringify(json)}`);
  return json.result;
}

const fmt = (x: number, d = 0) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const mb = (b: number) => `${fmt(b / 1048576, 1)} MB`;

async function stopSvc(svc: { child: ChildProcess }, signal: NodeJS.Signals): Promise<void> {
  const gone = new Promise((r) => (svc.child.exitCode !== null || svc.child.signalCode !== null ? r(null) : svc.child.once('exit', r)));
  svc.child.kill(signal);
  await gone;
}

/** Delay (ms) after which V8 frees the pooled heap pages of a stopped worker (settledMemory). */
const V8_PAGE_POOL_RELEASE_MS = 8000;

/**
 * Memory after a forced full GC, sampled once svc's upload parse worker has stopped (it stops
 * {@link PARSE_WORKER_IDLE_MS} after its last body; until then its own heap holds the parsed
 * bodies' garbage, which the inspector's GC of the main thread does not collect) and so has the
 * WAL checkpoint worker (~9 MB, alive while writes arrive: it stops {@link CHECKPOINT_IDLE_MS}
 * after the checkpoint {@link CHECKPOINT_INTERVAL_MS} after the last commit), and after svc's
 * `malloc_trim` once writes are quiet ({@link MEMORY_TRIM_QUIET_MS}). A stopped worker's heap
 * pages are not unmapped at once: V8 (13.x, Node 24) moves them to a page pool shared by all
 * isolates of the process and frees what is left of them {@link V8_PAGE_POOL_RELEASE_MS} later
 * (a delayed task on the main isolate, V8's `src/heap/page-pool.cc`), so the sample waits for that too.
 */
async function settledMemory(inspector: string): Promise<ChildMemory> {
  const workersStopped = Math.max(PARSE_WORKER_IDLE_MS, CHECKPOINT_INTERVAL_MS + CHECKPOINT_IDLE_MS);
  await new Promise((r) => setTimeout(r, Math.max(workersStopped + V8_PAGE_POOL_RELEASE_MS, MEMORY_TRIM_QUIET_MS + 2 * TRIM_CHECK_MS) + 500));
  return memoryAfterGc(inspector);
}

/** Waits until svc reports no vector queued for graph insertion and no rebuild (`info`). */
async function waitIndexed(svc: { url: string; token: string }): Promise<void> {
  for (;;) {
    const info = await post(`${svc.url}/info`, svc.token, {});
    if (!info.indexingVectorCount && !info.rebuilding) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Sequential queries: latency of each (ms). */
async function latencies(url: string, token: string, bodies: unknown[], until?: () => boolean): Promise<number[]> {
  const lat: number[] = [];
  for (let i = 0; until ? !until() : i < bodies.length; i++) {
    const t0 = performance.now();
    await post(url, token, bodies[i % bodies.length]);
    lat.push(performance.now() - t0);
  }
  return lat;
}

/**
 * Writes while reading: sequential queries (`plain`, cycled) for {@link STREAM_SECONDS} while a
 * writer upserts batches of 100 new `d`-dimensional vectors (latent map `w`) as fast as they are
 * accepted, then waits until svc has indexed them. The bodies are encoded first: JSON.stringify
 * of 100 vectors (~10 ms at 768-d) on this process's event loop would delay the queries' timings
 * too. Past the last body the stream starts over (updates instead of new vectors). Returns the
 * query latency p50/p99 (ms), vectors written per second and queries per second.
 */
async function writeWhileRead(svc: { url: string; token: string }, d: number, w: ReturnType<typeof latentMap>, plain: unknown[]): Promise<{ p50: number; p99: number; written: number; qps: number }> {
  const extra = clustered(d >= 512 ? 10_000 : 30_000, d, 4, w);
  const writes: string[] = [];
  for (let b = 0; b < extra.length; b += 100) writes.push(JSON.stringify(extra.slice(b, b + 100).map((v, j) => ({ id: `w${b + j}`, vector: v, metadata: { s: (b + j) % 1000 } }))));
  let writing = true;
  let written = 0;
  const writer = (async () => {
    for (let b = 0; writing; b = (b + 1) % writes.length) {
      await postText(`${svc.url}/upsert`, svc.token, writes[b]);
      written += 100;
    }
  })();
  const ts = performance.now();
  const during = await latencies(`${svc.url}/query`, svc.token, plain, () => performance.now() - ts > STREAM_SECONDS * 1000);
  writing = false;
  await writer;
  const secs = (performance.now() - ts) / 1000;
  await waitIndexed(svc);
  return { p50: percentile(during, 50), p99: percentile(during, 99), written: written / secs, qps: during.length / secs };
}

async function runSet(n: number, d: number): Promise<void> {
  const set = `${n >= 1e6 ? `${n / 1e6}M` : `${n / 1000}k`}×${d}`;
  console.log(`\n== ${set} ==`);
  const w = latentMap(d);
  const data = clustered(n, d, 2, w);
  const queries = clustered(QN, d, 3, w);
  const filters = FILTERS;

  // Brute force: ground truth and its QPS.
  const flat = new FlatDense(d, 'COSINE', n);
  data.forEach((v, i) => flat.add(i, v));
  let t = performance.now();
  const truth = queries.map((q) => flat.search(q, 10).map((x) => x.label));
  add(set, 'brute force (JS, exact)', 'QPS @ recall 1.0, 1 client', fmt((QN / (performance.now() - t)) * 1000));
  const ftruth = filters.map((f) => queries.map((q) => flat.search(q, 10, f.keep).map((x) => x.label)));

  // In-process hnswlib-node: the ceiling (not in the million run: svc's own build is the measure).
  let efStar = 32;
  let h: HnswGraph | undefined;
  const sq = queries.map((q) => Float32Array.from(storedForm('COSINE', q)));
  if (!MILLION && !INT8) {
    const stored = data.map((v) => Float32Array.from(storedForm('COSINE', v)));
    const packed = new Float32Array(n * d);
    stored.forEach((v, i) => packed.set(v, i * d));
    const labels = Uint32Array.from({ length: n }, (_, i) => i);
    // the same graph built by svc's batch insertion on as many threads as svc's indexer uses
    const par = new Graph('ip', d);
    par.initIndex(n, M, EF_C, 100);
    t = performance.now();
    await par.addPoints(packed, labels, INSERT_THREADS);
    const parBuild = (performance.now() - t) / 1000;
    add(set, IN_PROCESS, `build, ${INSERT_THREADS} threads (batch insertion)`, `${fmt(parBuild, 1)} s (${fmt(n / parBuild)} vec/s)`);
    h = new Graph('ip', d);
    h.initIndex(n, M, EF_C, 100);
    const rss0 = process.memoryUsage().rss;
    t = performance.now();
    const cb = process.cpuUsage();
    stored.forEach((v, i) => h!.addPoint(v, i));
    const inBuild = (performance.now() - t) / 1000;
    const cbu = process.cpuUsage(cb);
    const raw = n * d * 4 + n * (2 * M * 4 + 4) + n * 8;
    const grown = process.memoryUsage().rss - rss0;
    add(set, IN_PROCESS, 'build, 1 thread', `${fmt(inBuild, 1)} s (${fmt(n / inBuild)} vec/s), CPU ${fmt((cbu.user + cbu.system) / 1e6, 1)} s; RSS +${mb(grown)} = ${(grown / raw).toFixed(2)}× raw (incl. the stored-form copies)`);
    efStar = 0;
    for (const ef of [16, 32, 64, 100, 128, 256]) {
      t = performance.now();
      const c0 = process.cpuUsage();
      const got = sq.map((q) => Array.from(h!.searchKnn(q, 10, ef).neighbors));
      const c1 = process.cpuUsage(c0);
      const qps = (QN / (performance.now() - t)) * 1000;
      const rec = recallOf(got, truth);
      add(set, IN_PROCESS, `ef ${ef}`, `${fmt(qps)} QPS @ recall ${rec.toFixed(3)}; CPU ${fmt((c1.user + c1.system) / QN)} µs/query`);
      if (!efStar && rec >= 0.95) efStar = ef;
    }
    efStar ||= 256;
  }

  // svc over HTTP.
  const SVC = INT8 ? 'svc HTTP, int8 (no graph)' : 'svc HTTP';
  /** What the svc cells ran at: the search breadth, or the int8 index's scan. */
  const at = INT8 ? 'int8 scan' : `ef ${efStar}`;
  /** Raw size: float32 vectors + level-0 links + labels; float32 vectors alone for int8. */
  const rawOf = (count: number) => (INT8 ? count * d * 4 : count * d * 4 + count * (2 * M * 4 + 4) + count * 8);
  const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-vector-bench-')));
  let svc: Awaited<ReturnType<typeof startSvc>>;
  try {
    svc = await startSvc(dir, d, efStar);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  try {
    const base = await memoryAfterGc(svc.inspector);
    t = performance.now();
    let half: ChildMemory | undefined;
    const halfAt = Math.floor(n / 2000) * 1000;
    for (let i = 0; i < n; i += 1000) {
      if (i === halfAt) {
        const t0 = performance.now();
        half = await settledMemory(svc.inspector);
        t += performance.now() - t0; // not build time
      }
      await post(`${svc.url}/upsert`, svc.token, data.slice(i, i + 1000).map((v, j) => ({ id: String(i + j), vector: v, metadata: { s: (i + j) % 1000 } })));
    }
    const build = (performance.now() - t) / 1000;
    add(set, SVC, 'build (upsert batches of 1,000, durable, acknowledged)', `${fmt(build, 1)} s (${fmt(n / build)} vec/s)`);
    await waitIndexed(svc);
    const indexed = (performance.now() - t) / 1000;
    // an int8 index has no graph: acknowledged = searchable at full speed
    if (!INT8) add(set, SVC, 'build until every vector is in the graph', `${fmt(indexed, 1)} s (${fmt(n / indexed)} vec/s)`);
    const raw = rawOf(n);
    const peak = rssBytes(svc.child.pid!) - base.rss;
    const end = await settledMemory(svc.inspector);
    const grow = (a: ChildMemory, b: ChildMemory) => {
      const rss = b.rss - a.rss;
      const heap = b.heapTotal - a.heapTotal;
      return { rss, heap, native: rss - heap };
    };
    const g = grow(base, end);
    const per100k = (x: number) => mb((x / n) * 100_000);
    add(set, SVC, 'memory after the build (forced full GC)', `RSS +${mb(g.rss)} (V8 heap +${mb(g.heap)}, rest +${mb(g.native)}; base ${mb(base.rss)}) vs raw${INT8 ? ' float32' : ''} ${mb(raw)} = ${(g.rss / raw).toFixed(2)}×; per 100k vectors +${per100k(g.rss)} vs raw ${per100k(raw)}`);
    add(set, SVC, 'memory right after the last upsert (no forced GC)', `RSS +${mb(peak)} = ${(peak / raw).toFixed(2)}× raw`);
    const halfN = n - halfAt;
    const rawHalf = (raw / n) * halfN;
    const m = grow(half!, end);
    add(set, SVC, `memory, marginal: the last ${fmt(halfN)} vectors (forced GC before and after)`, `RSS +${mb(m.rss)} (V8 heap +${mb(m.heap)}, rest +${mb(m.native)}) vs raw ${mb(rawHalf)} = ${(m.rss / rawHalf).toFixed(2)}×`);

    const plain = queries.map((q) => ({ vector: q, topK: 10 }));
    const bodies = plain.map((b) => JSON.stringify(b));
    const httpRecall = async (extra: object, tr: number[][]) => {
      const r = await load(QN, 1, (i) => post(`${svc.url}/query`, svc.token, { vector: queries[i], topK: 10, ...extra }));
      return recallOf(r.results.map((x: any[]) => x.map((y) => Number(y.id))), tr);
    };
    const rec = await httpRecall({}, truth);
    /** In-process QPS at efStar over ~1 s (whole query set repeated). */
    const inProc = () => {
      let done = 0;
      const t0 = performance.now();
      while (performance.now() - t0 < 1000) for (const q of sq) (h!.searchKnn(q, 10, efStar), done++);
      return (done / (performance.now() - t0)) * 1000;
    };
    const wrk = (b: string[], c: number) => wrkQps(`${svc.url}/query`, svc.token, b, c, dir);
    const wrkc = (b: string[], c: number) => wrkCpu(`${svc.url}/query`, svc.token, b, c, dir, svc.child.pid!);
    for (const c of [1, 16]) {
      const http: number[] = [];
      const cpu: number[] = [];
      const local: number[] = [];
      for (let r = 0; r < REPS; r++) {
        if (h) local.push(inProc());
        const x = await wrkc(bodies, c);
        http.push(x.qps);
        cpu.push(x.cpuUs);
      }
      const vs = h ? ` vs in-process ${fmt(median(local))} QPS = ${(median(http.map((x, i) => x / local[i])) * 100).toFixed(0)}%` : '';
      add(set, SVC, `${at}, ${c} client${c > 1 ? 's' : ''} (wrk)`, `${fmt(median(http))} QPS @ recall ${rec.toFixed(3)}${vs}; svc CPU ${fmt(median(cpu))} µs/query`);
    }
    const idle = await latencies(`${svc.url}/query`, svc.token, [...plain, ...plain]);
    add(set, SVC, `${at}, 1 client, sequential latency`, `p50 ${percentile(idle, 50).toFixed(2)} ms, p99 ${percentile(idle, 99).toFixed(2)} ms`);
    for (const [fi, f] of filters.entries()) {
      const frec = await httpRecall({ filter: f.text }, ftruth[fi]);
      const fb = queries.map((q) => JSON.stringify({ vector: q, topK: 10, filter: f.text }));
      const ratios: number[] = [];
      const cpuRatios: number[] = [];
      const fq: number[] = [];
      const fc: number[] = [];
      for (let r = 0; r < REPS; r++) {
        const u = await wrkc(bodies, 1);
        const x = await wrkc(fb, 1);
        fq.push(x.qps);
        fc.push(x.cpuUs);
        ratios.push(x.qps / u.qps);
        cpuRatios.push(u.cpuUs / x.cpuUs);
      }
      add(set, SVC, `filter ${f.name} (\`${f.text}\`), 1 client (wrk)`, `${fmt(median(fq))} QPS @ recall ${frec.toFixed(3)} = ${(median(ratios) * 100).toFixed(0)}% of unfiltered (paired runs); svc CPU ${fmt(median(fc))} µs/query = ${(median(cpuRatios) * 100).toFixed(0)}% of unfiltered throughput per core`);
    }

    const stream = await writeWhileRead(svc, d, w, plain);
    add(set, SVC, `query latency while upserting batches of 100 (${STREAM_SECONDS} s)`, `p50 ${stream.p50.toFixed(2)} ms, p99 ${stream.p99.toFixed(2)} ms = ${(stream.p99 / percentile(idle, 99)).toFixed(1)}× idle p99; ${fmt(stream.written)} vectors/s written, ${fmt(stream.qps)} queries/s`);

    // Restart: crash (SIGKILL, replay of the records newer than the last snapshot), then clean.
    await stopSvc(svc, 'SIGKILL');
    const wal = path.join(dir, 'vector', 'default.sqlite-wal');
    const walBytes = fs.existsSync(wal) ? fs.statSync(wal).size : 0;
    svc = await startSvc(dir, d, efStar, undefined, 'info');
    const loaded = JSON.parse(svc.log().split('\n').find((l) => l.includes('vector index loaded')) ?? '{}');
    const phases = ['headsMs', 'snapshotWaitMs', 'indexesMs'].filter((p) => p in loaded).map((p) => `${p} ${loaded[p]}`);
    const tail = /vector snapshot (not usable|damaged)/.test(svc.log())
      ? 'no usable snapshot: graph rebuilt from SQLite'
      : `${fmt(loaded.replayed)} records newer than the snapshot replayed; index loaded in ${loaded.ms} ms (${phases.join(', ')}); WAL at the kill ${mb(walBytes)}`;
    add(set, SVC, 'restart after SIGKILL (snapshot + replay queued)', `${fmt(svc.startMs / 1000, 2)} s to ready (a query answers); ${tail}`);
    await waitIndexed(svc);
    await stopSvc(svc, 'SIGTERM');
    svc = await startSvc(dir, d, efStar);
    add(set, SVC, 'restart after SIGTERM (closing snapshot)', `${fmt(svc.startMs / 1000, 2)} s to ready (a query answers); RSS when ready ${mb(rssBytes(svc.child.pid!))}`);
    if (MILLION && !INT8) {
      for (const ef of [32, 64, 128]) {
        await stopSvc(svc, 'SIGTERM');
        svc = await startSvc(dir, d, ef);
        await waitIndexed(svc);
        const r = await httpRecall({}, truth);
        add(set, SVC, `ef ${ef}, 1 client (wrk)`, `${fmt(await wrk(bodies, 1))} QPS @ recall ${r.toFixed(3)} (start ${fmt(svc.startMs / 1000, 2)} s)`);
      }
    }
  } finally {
    await stopSvc(svc, 'SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  if (PEERS.has('usearch')) await runUsearch({ data, queries, truth, efs: [16, 32, 64, 128], add: (system, what, value) => add(set, system, what, value), fmt });
  if (PEERS.has('chroma')) {
    const wrkDir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-chroma-wrk-')));
    await runChroma({
      data,
      queries,
      truth,
      filters: filters.map((f, fi) => ({ name: f.name, lt: f.lt, truth: ftruth[fi] })),
      add: (system, what, value) => add(set, system, what, value),
      fmt,
      wrk: (url, b, c, pid) => wrkCpu(url, '', b, c, wrkDir, pid),
    });
    fs.rmSync(wrkDir, { recursive: true, force: true });
  }
  if (PEERS.has('lancedb')) {
    await runLanceDb({
      data,
      queries,
      truth,
      filters: filters.map((f, fi) => ({ name: f.name, where: f.text, truth: ftruth[fi] })),
      add: (system, what, value) => add(set, system, what, value),
      fmt,
    });
  }
}

/**
 * An A/B run (`lib/ab.ts` {@link abVariants}, e.g. two Node.js versions): on the first set of
 * `BENCH_SETS`, each of `BENCH_REPS` rounds starts both svc variants in turn (the first swapped
 * every round) on a fresh data directory, upserts the set in batches of 1,000 (build vec/s,
 * acknowledged and until indexed), and measures queries (ef `BENCH_AB_EF`, default 64) with wrk at
 * 16 and 1 connections (QPS, svc CPU µs per query at 16), then the sequential latency p99 idle and
 * while writing ({@link writeWhileRead}). Prints medians (min-max) and ratios B/A; writes the table
 * to `BENCH_OUT` only when that is set. Two checkouts on the same Node.js: `BENCH_AB_NODE=$(which
 * node) BENCH_AB_ROOT=<other checkout>`.
 */
async function abRun(ab: [SvcVariant, SvcVariant]): Promise<void> {
  const [n, d] = SETS[0];
  const ef = Number(process.env.BENCH_AB_EF ?? 64);
  const w = latentMap(d);
  const data = clustered(n, d, 2, w);
  const plain = clustered(QN, d, 3, w).map((q) => ({ vector: q, topK: 10 }));
  const bodies = plain.map((q) => JSON.stringify(q));
  const load0 = os.loadavg().map((x) => x.toFixed(1)).join(' ');
  type Cells = { acked: number[]; build: number[]; q16: number[]; cpu16: number[]; q1: number[]; idle99: number[]; stream99: number[]; ratio: number[]; streamed: number[] };
  const cells = (): Cells => ({ acked: [], build: [], q16: [], cpu16: [], q1: [], idle99: [], stream99: [], ratio: [], streamed: [] });
  const runs = new Map<string, Cells>(ab.map((v) => [v.name, cells()]));
  const work = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-vector-ab-')));
  try {
    for (let round = 0; round < REPS; round++) {
      for (const v of abOrder(round, ab[0], ab[1])) {
        const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-vector-ab-data-')));
        const svc = await startSvc(dir, d, ef, v);
        try {
          const t0 = performance.now();
          for (let i = 0; i < n; i += 1000) await post(`${svc.url}/upsert`, svc.token, data.slice(i, i + 1000).map((x, j) => ({ id: String(i + j), vector: x, metadata: { s: (i + j) % 1000 } })));
          const r = runs.get(v.name)!;
          r.acked.push(n / ((performance.now() - t0) / 1000));
          await waitIndexed(svc);
          r.build.push(n / ((performance.now() - t0) / 1000));
          const q16 = await wrkCpu(`${svc.url}/query`, svc.token, bodies, 16, work, svc.child.pid!);
          r.q16.push(q16.qps);
          r.cpu16.push(q16.cpuUs);
          r.q1.push(await wrkQps(`${svc.url}/query`, svc.token, bodies, 1, work));
          const idle = await latencies(`${svc.url}/query`, svc.token, [...plain, ...plain]);
          const stream = await writeWhileRead(svc, d, w, plain);
          r.idle99.push(percentile(idle, 99));
          r.stream99.push(stream.p99);
          r.ratio.push(stream.p99 / percentile(idle, 99));
          r.streamed.push(stream.written);
          console.error(`[bench:vector] ${v.name} round ${round + 1}: build ${fmt(r.acked.at(-1)!)} vec/s acknowledged, ${fmt(r.build.at(-1)!)} vec/s indexed, ${fmt(q16.qps)} QPS at 16 (${fmt(q16.cpuUs)} µs CPU/query), ${fmt(r.q1.at(-1)!)} QPS at 1; p99 idle ${r.idle99.at(-1)!.toFixed(2)} ms, while writing ${stream.p99.toFixed(2)} ms = ${r.ratio.at(-1)!.toFixed(2)}×, ${fmt(stream.written)} vec/s written`);
        } finally {
          await stopSvc(svc, 'SIGTERM');
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }
    }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  const [A, B] = ab.map((v) => runs.get(v.name)!);
  const ms = (x: number) => x.toFixed(2);
  const row = (what: string, a: number[], b: number[], f?: (x: number) => string) => {
    const r = abRatios(a, b);
    return `| ${what} | ${fmtSpread(a, f)} | ${fmtSpread(b, f)} | ${r.ofMedians} | ${r.paired} |`;
  };
  const text = [
    `## Vector bench: ${ab[0].name} vs ${ab[1].name} (interleaved)`,
    '',
    `${new Date().toISOString()}, ${os.cpus().length} CPUs, load average at start ${load0} / end ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}. ${n.toLocaleString('en-US')} × ${d} clustered vectors (COSINE, M ${M}, efConstruction ${EF_C}), queries at ef ${ef}, topK 10, wrk ${SECONDS} s per cell; ${REPS} rounds, each starting both svc variants on a fresh data directory in turn (the first swapped every round): ${ab.map((v) => `${v.name} (\`${path.basename(v.node)} ${path.join(v.root, 'bin/svc.js')}\`)`).join(' and ')}. Cells: median (min-max); "paired" = median (min-max) of the per-round ratio B/A (${ab[1].name} / ${ab[0].name}).`,
    '',
    `| measure | ${ab[0].name} | ${ab[1].name} | B/A (medians) | B/A (paired) |`,
    '| --- | ---: | ---: | ---: | ---: |',
    row('build (upserts of 1,000, acknowledged), vec/s', A.acked, B.acked),
    row('build (upserts of 1,000 until indexed), vec/s', A.build, B.build),
    row('query QPS, 16 connections', A.q16, B.q16),
    row('svc CPU µs per query, 16 connections', A.cpu16, B.cpu16),
    row('query QPS, 1 connection', A.q1, B.q1),
    row('query p99 idle (sequential), ms', A.idle99, B.idle99, ms),
    row(`query p99 while upserting batches of 100 (${STREAM_SECONDS} s), ms`, A.stream99, B.stream99, ms),
    row('p99 while upserting / idle p99', A.ratio, B.ratio, ms),
    row('vectors/s written while querying', A.streamed, B.streamed),
    '',
  ].join('\n');
  console.log(text);
  if (process.env.BENCH_OUT) fs.writeFileSync(process.env.BENCH_OUT, text);
}

requirePrograms('bench:vector', [{ cmd: 'wrk', pkg: 'wrk' }]);
const AB = abVariants(root);
if (AB) {
  await abRun(AB);
  await agent.close();
  process.exit(0);
}

const started = new Date().toISOString();
if (PEERS.size && ![...PEERS].every((p) => p === 'none')) {
  const err = ensurePeers();
  if (err) console.error(`bench/peers: ${err}`);
}
const loadStart = os.loadavg()[0];
for (const [n, d] of SETS) await runSet(n, d);
await agent.close();
// the PostgreSQL store's rows (bench/vector-pg.ts), in the same run; BENCH_PG=0 skips them
const pgTable = MILLION || INT8 || process.env.BENCH_PG === '0' ? undefined : await postgresRows();
const table = [
  '| data | system | measure | result |',
  '|---|---|---|---|',
  ...rows.map((r) => `| ${r.set} | ${r.system} | ${r.what} | ${r.value} |`),
].join('\n');
const pairing = MILLION || INT8 ? 'filtered cells each paired with an unfiltered wrk run' : 'each paired with a ~1 s in-process run at the same\nef (filtered cells: with an unfiltered wrk run)';
const runLine = `Run ${started} on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, Node ${process.version}, hnswlib build ${hnswlibBuild} (svc and in-process), ${QN} queries per cell,
topK 10, COSINE, clustered data (see \`bench/vector.ts\`). svc and the load generator (\`wrk\`, one
thread) share the machine (1-minute load average ${loadStart.toFixed(2)} at the start, ${os.loadavg()[0].toFixed(2)} at the end, on 2 cores): throughput
cells are medians of ${REPS} runs of ${SECONDS} s, ${pairing}, and the percentage is the median of the paired
ratios; expect ±10 points between runs.${INT8 ? ' svc\'s index: `"quantization": "int8"` (8-bit codes, no graph; every query scans them).' : ''}`;
if (INT8) {
  // so does the int8 run (either size)
  writeSection(OUT, INT8_HEADING, `${INT8_HEADING}\n\n${runLine}\n\n${table}\n`, NOTES_HEADING);
} else if (MILLION) {
  // the million run replaces only its own section of the report
  writeSection(OUT, MILLION_HEADING, `${MILLION_HEADING}\n\n${runLine}\n\n${table}\n`, NOTES_HEADING);
} else {
  // a full run rewrites the report, keeping the sections other modes write
  const old = fs.existsSync(OUT) ? fs.readFileSync(OUT, 'utf8') : '';
  const kept = KEPT_SECTIONS.map((h) => sectionOf(old, h)).filter((x) => x !== undefined);
  const pgSection = pgTable && `## PostgreSQL store (\`SVC_VECTOR_DATABASE_URL\`)\n\nReal svc processes on a throw-away PostgreSQL cluster (fsync on), the SQLite column measured the same way in the same run (\`bench/vector-pg.ts\`).\n\n${pgTable}`;
  const report = [`# Vector benchmark (\`npm run bench:vector\`)`, runLine, table, ...(pgSection ? [pgSection] : []), LANCEDB_NOTE, ...kept, NOTES].join('\n\n');
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.writeFileSync(OUT, report.trimEnd() + '\n');
}
console.log('\n' + table + `\n\nwritten to ${OUT}`);

/**
 * `npm run bench:vector` — the vector area against its ceiling and baseline, in one run
 * (issue 6 "Benchmark"; vector-wire.md §D):
 *
 * - **svc (HTTP)**: `node bin/svc.js serve` with `SVC_AREAS=vector` as a child process; vectors
 *   upserted in batches of 1,000 through `/upsert`; queries `POST /query {vector, topK: 10}`:
 *   recall measured with sequential requests, throughput with autocannon (keep-alive, bodies
 *   cycling over the query set) at 1 and 16 connections.
 * - **hnswlib-node in-process** (the ceiling): the same graph parameters (M 16, efConstruction 100,
 *   same seed and insertion order, so the same graph), `searchKnn` called directly.
 * - **brute force** (exact, `FlatDense`): also the ground truth for recall@10.
 * - **LanceDB**: not included (see LANCEDB_NOTE below, printed into the report).
 *
 * Data: "clustered" = 16-d latent Gaussian × fixed random 16×D map + 0.1 Gaussian noise (closer to
 * real embeddings than i.i.d. noise, §D.4); COSINE. Sets: 100k × 128 and 20k × 768.
 * ef is swept in-process; svc runs with the smallest ef reaching recall@10 >= 0.95 in-process
 * (same graph, so the same recall; the HTTP recall is measured and printed too).
 * Filtered queries: metadata `c = i % 10` (10 %) and `p = i % 100` (1 %), filters `c = 3`, `p = 7`.
 * Memory: child RSS after loading minus RSS before (fixed base) vs raw size = vectors (N·D·4) +
 * level-0 links (N·(2M·4 + 4)) + labels (N·8).
 *
 * Env: `BENCH_SETS` (default `100000x128,20000x768`), `BENCH_QUERIES` (default 300),
 * `BENCH_SECONDS` (autocannon run per cell, default 5), `BENCH_OUT` (default `docs/readme/vector-bench.md`), `BENCH_PROFILE=<dir>` (svc writes a CPU profile there).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import hnswlib from 'hnswlib-node';
import { FlatDense, storedForm } from '../src/vector/dense.js';

const autocannon = createRequire(import.meta.url)('autocannon') as (opts: object) => Promise<{ requests: { average: number }; non2xx: number; errors: number }>;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

/** QPS of `bodies` (cycled) POSTed to `url` over `connections` keep-alive connections (autocannon). */
async function cannon(url: string, token: string, bodies: unknown[], connections: number): Promise<number> {
  const u = new URL(url);
  const r = await autocannon({
    url: u.origin,
    connections,
    duration: SECONDS,
    requests: bodies.map((b) => ({ method: 'POST', path: u.pathname, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(b) })),
  });
  if (r.non2xx || r.errors) throw new Error(`autocannon: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return r.requests.average;
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const M = 16;
const EF_C = 100;
const QN = Number(process.env.BENCH_QUERIES ?? 300);
const SETS = (process.env.BENCH_SETS ?? '100000x128,20000x768').split(',').map((s) => s.split('x').map(Number) as [number, number]);
const OUT = process.env.BENCH_OUT ?? path.join(root, 'docs/readme/vector-bench.md');

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function gauss(r: () => number): number {
  return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
}
/** Clustered data: latent 16-d Gaussian × W (16×D) + 0.1 noise. */
function clustered(n: number, d: number, seed: number, w: number[][]): number[][] {
  const r = rng(seed);
  return Array.from({ length: n }, () => {
    const z = Array.from({ length: 16 }, () => gauss(r));
    return Array.from({ length: d }, (_, j) => {
      let s = 0;
      for (let k = 0; k < 16; k++) s += z[k] * w[k][j];
      return s + 0.1 * gauss(r);
    });
  });
}

const recallOf = (got: number[][], truth: number[][]) => {
  let hit = 0;
  got.forEach((g, i) => {
    const t = new Set(truth[i]);
    for (const x of g) if (t.has(x)) hit++;
  });
  return hit / (truth.length * 10);
};

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

async function startSvc(dataDir: string, dim: number, ef: number): Promise<{ child: ChildProcess; url: string; token: string }> {
  const file = path.join(dataDir, 'indexes.json');
  fs.writeFileSync(file, JSON.stringify([{ name: 'default', type: 'DENSE', dimension: dim, metric: 'COSINE', hnsw: { m: M, efConstruction: EF_C, efSearch: ef } }]));
  const prof = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const child = spawn(process.execPath, [...prof, path.join(root, 'bin/svc.js'), 'serve'], {
    cwd: root,
    env: {
      ...process.env,
      SVC_AREAS: 'vector', SVC_VECTOR_PORT: '0', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn', SVC_VECTOR_INDEXES: file,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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
  return { child, url, token: creds['vector.default.token'] };
}

function rssBytes(pid: number): number {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(s)![1]) * 1024;
}

const agent = new Agent({ connections: 32, pipelining: 1, keepAliveTimeout: 60_000 });
async function post(url: string, token: string, body: unknown): Promise<any> {
  const res = await request(url, { method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = (await res.body.json()) as any;
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${JSON.stringify(json)}`);
  return json.result;
}

/** Runs `n` requests over `clients` concurrent loops; returns QPS and the results in order. */
async function load<T>(n: number, clients: number, fn: (i: number) => Promise<T>): Promise<{ qps: number; results: T[] }> {
  const results: T[] = new Array(n);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < n) {
        const i = next++;
        results[i] = await fn(i);
      }
    }),
  );
  return { qps: (n / (performance.now() - t0)) * 1000, results };
}

const fmt = (x: number, d = 0) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const mb = (b: number) => `${fmt(b / 1048576, 1)} MB`;

async function runSet(n: number, d: number): Promise<void> {
  const set = `${n / 1000}k×${d}`;
  console.log(`\n== ${set} ==`);
  const wr = rng(1);
  const w = Array.from({ length: 16 }, () => Array.from({ length: d }, () => gauss(wr) / 4));
  const data = clustered(n, d, 2, w);
  const queries = clustered(QN, d, 3, w);
  const filters = [
    { name: '10%', text: 'c = 3', keep: (i: number) => i % 10 === 3 },
    { name: '1%', text: 'p = 7', keep: (i: number) => i % 100 === 7 },
  ];

  // Brute force: ground truth and its QPS.
  const flat = new FlatDense(d, 'COSINE', n);
  data.forEach((v, i) => flat.add(i, v));
  let t = performance.now();
  const truth = queries.map((q) => flat.search(q, 10).map((x) => x.label));
  add(set, 'brute force (JS, exact)', 'QPS @ recall 1.0, 1 client', fmt((QN / (performance.now() - t)) * 1000));
  const ftruth = filters.map((f) => queries.map((q) => flat.search(q, 10, f.keep).map((x) => x.label)));

  // In-process hnswlib-node: the ceiling.
  const h = new hnswlib.HierarchicalNSW('ip', d);
  h.initIndex({ maxElements: n, m: M, efConstruction: EF_C, randomSeed: 100 });
  t = performance.now();
  const stored = data.map((v) => storedForm('COSINE', v));
  stored.forEach((v, i) => h.addPoint(v, i));
  const inBuild = (performance.now() - t) / 1000;
  add(set, 'hnswlib-node in-process', 'build', `${fmt(inBuild, 1)} s (${fmt(n / inBuild)} vec/s)`);
  let efStar = 0;
  let inQps = 0;
  const sq = queries.map((q) => storedForm('COSINE', q));
  for (const ef of [16, 32, 64, 100, 128, 256]) {
    h.setEf(ef);
    t = performance.now();
    const got = sq.map((q) => h.searchKnn(q, 10).neighbors);
    const qps = (QN / (performance.now() - t)) * 1000;
    const rec = recallOf(got, truth);
    add(set, 'hnswlib-node in-process', `ef ${ef}`, `${fmt(qps)} QPS @ recall ${rec.toFixed(3)}`);
    if (!efStar && rec >= 0.95) {
      efStar = ef;
      inQps = qps;
    }
  }
  efStar ||= 256;
  const inFiltered: number[] = [];
  for (const [fi, f] of filters.entries()) {
    h.setEf(efStar); // same ef as svc: hnswlib keeps searching until ef accepted results
    t = performance.now();
    const got = sq.map((q) => h.searchKnn(q, 10, f.keep).neighbors);
    const qps = (QN / (performance.now() - t)) * 1000;
    inFiltered.push(qps);
    add(set, 'hnswlib-node in-process', `filter ${f.name} (callback)`, `${fmt(qps)} QPS @ recall ${recallOf(got, ftruth[fi]).toFixed(3)}`);
  }

  // svc over HTTP.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-vector-bench-'));
  let svc: Awaited<ReturnType<typeof startSvc>>;
  try {
    svc = await startSvc(dir, d, efStar);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  try {
    const base = rssBytes(svc.child.pid!);
    t = performance.now();
    for (let i = 0; i < n; i += 1000) {
      await post(`${svc.url}/upsert`, svc.token, data.slice(i, i + 1000).map((v, j) => ({ id: String(i + j), vector: v, metadata: { c: (i + j) % 10, p: (i + j) % 100 } })));
    }
    const build = (performance.now() - t) / 1000;
    add(set, 'svc HTTP', 'build (upsert batches of 1,000, durable)', `${fmt(build, 1)} s (${fmt(n / build)} vec/s)`);
    const rss = rssBytes(svc.child.pid!) - base;
    const raw = n * d * 4 + n * (2 * M * 4 + 4) + n * 8;
    add(set, 'svc HTTP', 'memory', `RSS +${mb(rss)} (base ${mb(base)}) vs raw ${mb(raw)} = ${(rss / raw).toFixed(2)}×`);
    // Recall over HTTP (sequential), then throughput with autocannon (separate load generator).
    const q1 = await load(QN, 1, (i) => post(`${svc.url}/query`, svc.token, { vector: queries[i], topK: 10 }));
    const rec = recallOf(q1.results.map((r: any[]) => r.map((x) => Number(x.id))), truth);
    const bodies = queries.map((q) => ({ vector: q, topK: 10 }));
    for (const c of [1, 16]) {
      const qps = await cannon(`${svc.url}/query`, svc.token, bodies, c);
      add(set, 'svc HTTP', `ef ${efStar}, ${c} client${c > 1 ? 's' : ''}`, `${fmt(qps)} QPS @ recall ${rec.toFixed(3)} (${((qps / inQps) * 100).toFixed(0)}% of in-process)`);
    }
    for (const [fi, f] of filters.entries()) {
      const r = await load(QN, 1, (i) => post(`${svc.url}/query`, svc.token, { vector: queries[i], topK: 10, filter: f.text }));
      const frec = recallOf(r.results.map((x: any[]) => x.map((y) => Number(y.id))), ftruth[fi]);
      const qps = await cannon(`${svc.url}/query`, svc.token, queries.map((q) => ({ vector: q, topK: 10, filter: f.text })), 1);
      add(set, 'svc HTTP', `filter ${f.name}, 1 client`, `${fmt(qps)} QPS @ recall ${frec.toFixed(3)} (${((qps / inFiltered[fi]) * 100).toFixed(0)}% of in-process)`);
    }
  } finally {
    svc.child.kill('SIGTERM');
    await new Promise((r) => svc.child.once('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const LANCEDB_NOTE = `LanceDB (\`@lancedb/lancedb\`) is not in this run. Its latest versions need Node >= 22; 0.37.1
declares \`node >= 18\`, but installing it pulls a 178 MB platform package plus optional
\`@huggingface/transformers\` -> \`onnxruntime-node\`, whose install script downloads binaries from GitHub
(blocked here), and it would add a dependency to \`package.json\` for the bench alone. The reference
measured it on this class of machine (vector-wire.md §D.4): 10k Gaussian, flat 97 QPS @ 1.0,
\`Index.hnswSq\` 162 QPS @ 0.95 (in-process, one query at a time).`;

const started = new Date().toISOString();
for (const [n, d] of SETS) await runSet(n, d);
await agent.close();
const table = [
  '| data | system | measure | result |',
  '|---|---|---|---|',
  ...rows.map((r) => `| ${r.set} | ${r.system} | ${r.what} | ${r.value} |`),
].join('\n');
const report = `# Vector benchmark (\`npm run bench:vector\`)

Run ${started} on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, Node ${process.version}, ${QN} queries per cell,
topK 10, COSINE, clustered data (see \`bench/vector.ts\`). svc and the bench client share the machine.

${table}

${LANCEDB_NOTE}
`;
fs.mkdirSync(path.dirname(OUT), { recursive: true });
fs.writeFileSync(OUT, report);
console.log('\n' + table + `\n\nwritten to ${OUT}`);

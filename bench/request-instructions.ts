/**
 * `npm run bench:instructions` — CPU instructions svc spends per kv command and per queue message,
 * counted by `valgrind --tool=callgrind` (a count that does not depend on how loaded the machine
 * is), for two builds side by side: an A/B of the same run.
 *
 * Variants: B is this checkout; A is `BENCH_AB_ROOT=<checkout>` (e.g. a second git worktree of the
 * previous commit, its `node_modules` a link to this one's), run by `BENCH_AB_NODE=<node>` when
 * given (else this Node.js). Without `BENCH_AB_ROOT` only B runs. `--a-env K=V,K=V` / `--b-env`
 * add environment to one side (e.g. `--a-env SVC_METRICS=false`, or A = B = this checkout with
 * `BENCH_AB_ROOT=.` to measure one setting). Each root is built first (`scripts/build.mjs`, skip
 * with `--no-build`) and runs as `node <root>/dist/cli.js serve` under callgrind
 * (`--separate-threads=yes`, `--smc-check=all-non-file`), both processes at the same time.
 *
 * Scenarios (`--scenarios` a comma list, default all of the store's):
 * `SVC_AREAS` holds only the areas of the chosen scenarios (kv alone loads no native addon, so it
 * runs on another Node.js than the one `node_modules` was built for: `BENCH_AB_NODE=/usr/bin/node`).
 * - `kv-set-path` `POST /set/<key>` with a 100-byte body; `kv-get-path` `GET /get/<key>`;
 *   `kv-set-json` / `kv-get-json` `POST /` with `["SET", key, value]` / `["GET", key]` (the SDK's
 *   form). kv runs in the main process on the bench's own redis-server (`SVC_KV_WORKERS=0`), one
 *   connection, one request at a time (`--concurrency` for more).
 * - `kv-pipeline` `POST /pipeline` of 100 SETs over random keys (100-byte values); per request,
 *   so per command is a hundredth. `--kv-cluster`: every kv scenario runs on a Redis Cluster
 *   (3 primaries + 3 replicas, `test/kv/topology-helpers.ts`) through svc's topology router,
 *   instead of the one redis-server (compare "all threads": the router may run in its own thread).
 * - `queue` `POST /v2/publish/<sink>` of a small JSON body, each message awaited at the sink until
 *   delivered (publish, commit and fsync, hand-off, delivery, outcome), one at a time so that no
 *   group commit is shared (sharing depends on timing, which valgrind changes). The store is
 *   SQLite (`--store sqlite`, default; fsync before every acknowledgement) or PostgreSQL
 *   (`--store pg`: a throw-away cluster, one database per variant; svc's process is counted by
 *   callgrind, PostgreSQL's work per message is read from `pg_stat_statements` of that database:
 *   execution ms (depends on load), and WAL bytes and shared blocks hit/dirtied, which do not).
 *
 * Method: after start-up and `--warmup` requests per scenario (the JIT compiles the hot paths),
 * each round zeroes callgrind's counters (`callgrind_control --zero`), sends `--n` requests, dumps
 * them (`--dump`) and divides by `--n`: the main thread (the event loop) and all threads (with
 * V8's compiler and GC helpers and libuv's pool, where the WAL fsync runs). `--rounds` rounds per
 * scenario, the A/B processes measured at the same time; the smallest round is reported (noise
 * only adds) with every round. Under valgrind svc runs ~50x slower, so timer work weighs ~50x more
 * per request than on a real machine: after the rounds the main thread is measured idle for
 * `--idle` seconds, and "net" subtracts that rate times each round's duration. `SVC_METRICS=false`
 * on both sides unless `--a-env`/`--b-env` say otherwise (prom-client samples the event loop every
 * 10 ms: timer work; what the metrics cost per request is `bench:metrics`'s subject). Kernel time
 * (system calls: socket reads and writes, fdatasync) is not counted: callgrind sees user space only.
 *
 * Flags: `--node-flags "<flags>"` (Node.js/V8 flags of both variants, e.g.
 * `--no-concurrent-recompilation`: optimized code is compiled on the main thread, so a round does
 * not depend on when a compiler thread, slow under valgrind, finishes) `--n <default 600>` `--warmup <default 1500>` `--rounds <default 3>` `--idle <s, default 20>`
 * `--store sqlite|pg` `--scenarios <list>` `--concurrency <kv, default 1>` `--no-build` `--keep`
 * (leave the callgrind files for `callgrind_annotate`; their directory is printed) `--out <file>`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describeMachine, machineInfo } from './lib/machine.js';
import { CALLGRIND_PROGRAMS, callgrindControl, dumpInstructions, publishOneByOne, requests, VALGRIND_CPU_PRELOAD, type CallgrindTarget } from './lib/callgrind.js';
import { cleanupAll, freePort, installCleanupHandlers, makeTempDir, runToCompletion, startProcess, type ManagedProcess } from './lib/proc.js';
import { now, startSink, type Sink } from './lib/queue-sink.js';
import { startRedisServer } from './lib/redis.js';
import { startRedisCluster } from '../test/kv/topology-helpers.js';
import { fmtInt } from './lib/stats.js';
import { requirePrograms } from './lib/needs.js';
import { markdownTable } from './lib/table.js';
import { startBenchPostgres, withPg, type BenchPostgres } from './lib/postgres.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const argNum = (name: string, def: number) => Number(arg(name) ?? def);
const flag = (name: string) => process.argv.includes(`--${name}`);
const N = argNum('n', 600);
const WARMUP = argNum('warmup', 1500);
const ROUNDS = argNum('rounds', 3);
/** `--node-flags "<flags>"`: Node.js/V8 flags for both variants (e.g. `--no-concurrent-recompilation`, which NODE_OPTIONS refuses). */
const NODE_FLAGS = (arg('node-flags') ?? '').split(' ').filter((f) => f !== '');
const CONCURRENCY = argNum('concurrency', 1);
const STORE = (arg('store') ?? 'sqlite') as 'sqlite' | 'pg';
const KV_TOKEN = 'bench-kv-token';
const QUEUE_TOKEN = 'bench-queue-token';
const VALUE = 'v'.repeat(100);
const log = (s: string) => process.stderr.write(`[bench:instructions] ${s}\n`);

/** One side of the A/B. */
interface Variant {
  name: string;
  node: string;
  root: string;
  env: Record<string, string>;
}

/** `K=V,K=V` -> object. */
function envArg(s: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of (s ?? '').split(',').filter(Boolean)) {
    const i = kv.indexOf('=');
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

function gitDescribe(root: string): string {
  try {
    const head = execFileSync('git', ['-C', root, 'log', '-1', '--format=%h %s'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim();
    return `${head.slice(0, 60)}${dirty ? ' (+ uncommitted changes)' : ''}`;
  } catch {
    return root;
  }
}

function variants(): Variant[] {
  const b: Variant = { name: 'B', node: process.execPath, root: ROOT, env: envArg(arg('b-env')) };
  const aRoot = process.env.BENCH_AB_ROOT;
  if (!aRoot) return [b];
  const a: Variant = { name: 'A', node: process.env.BENCH_AB_NODE ?? process.execPath, root: path.resolve(aRoot), env: envArg(arg('a-env')) };
  return [a, b];
}

/** A callgrind-run svc process and how to read its counters. */
interface Traced extends CallgrindTarget {
  v: Variant;
  proc: ManagedProcess;
  kvUrl: string;
  queueUrl: string;
  outBase: string;
  dumps: number;
  sink: Sink;
  /** PostgreSQL database of this variant (`--store pg`). */
  db?: { url: string; name: string };
}

async function startTraced(v: Variant, areas: string, redisUrl: string, dir: string, sink: Sink, db?: { url: string; name: string }): Promise<Traced> {
  const [kvPort, queuePort] = [await freePort(), await freePort()];
  const outBase = path.join(dir, `callgrind.${v.name}`);
  const proc = await startProcess({
    name: `svc-callgrind-${v.name}`,
    cmd: 'valgrind',
    args: ['--tool=callgrind', '--smc-check=all-non-file', '--separate-threads=yes', `--callgrind-out-file=${outBase}`, v.node, ...NODE_FLAGS, '--import', VALGRIND_CPU_PRELOAD, path.join(v.root, 'dist/cli.js'), 'serve'],
    cwd: v.root,
    env: {
      ...process.env,
      SVC_AREAS: areas,
      SVC_HOST: '127.0.0.1',
      SVC_KV_PORT: String(kvPort),
      SVC_QUEUE_PORT: String(queuePort),
      SVC_DATA_DIR: path.join(dir, `data-${v.name}`),
      SVC_KV_TOKEN: KV_TOKEN,
      SVC_QUEUE_TOKEN: QUEUE_TOKEN,
      SVC_KV_REDIS_URL: redisUrl,
      SVC_KV_WORKERS: '0',
      SVC_LOG_LEVEL: 'warn',
      // off unless a side asks for it: prom-client's event-loop sampling is timer work that
      // valgrind's slowness inflates per request (its cost is bench:metrics's subject)
      SVC_METRICS: 'false',
      ...(db ? { SVC_QUEUE_DATABASE_URL: db.url } : {}),
      ...v.env,
    },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 1_200_000,
  });
  return { v, proc, pid: proc.pid, kvUrl: `http://127.0.0.1:${kvPort}`, queueUrl: `http://127.0.0.1:${queuePort}`, outBase, dumps: 0, sink, db };
}

interface Scenario {
  id: string;
  name: string;
  run(t: Traced, n: number): Promise<void>;
}

const kvAuth = { authorization: `Bearer ${KV_TOKEN}` };
const PIPELINE = JSON.stringify(Array.from({ length: 100 }, (_, i) => ['SET', `bench:r:${i}:${Math.random().toString(36).slice(2)}`, VALUE]));
const SCENARIOS: Scenario[] = [
  {
    id: 'kv-set-path',
    name: 'kv SET, path form (100 bytes)',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/set/bench:key', method: 'POST', headers: { ...kvAuth, 'content-type': 'application/octet-stream' }, body: VALUE }),
  },
  {
    id: 'kv-get-path',
    name: 'kv GET, path form',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/get/bench:key', method: 'GET', headers: kvAuth }),
  },
  {
    id: 'kv-set-json',
    name: 'kv SET, JSON body (100 bytes)',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/', method: 'POST', headers: { ...kvAuth, 'content-type': 'application/json' }, body: JSON.stringify(['SET', 'bench:key', VALUE]) }),
  },
  {
    id: 'kv-get-json',
    name: 'kv GET, JSON body',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/', method: 'POST', headers: { ...kvAuth, 'content-type': 'application/json' }, body: JSON.stringify(['GET', 'bench:key']) }),
  },
  {
    id: 'kv-pipeline',
    name: 'kv /pipeline of 100 SETs, random keys (100 bytes)',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/pipeline', method: 'POST', headers: { ...kvAuth, 'content-type': 'application/json' }, body: PIPELINE }),
  },
  {
    id: 'queue',
    name: `queue publish + delivery (${STORE === 'pg' ? 'PostgreSQL' : 'SQLite, fsync always'})`,
    run: (t, n) => publishOneByOne(t.queueUrl, QUEUE_TOKEN, t.sink, n),
  },
];

/** Per-database statement counters of `pg_stat_statements` (cumulative). */
interface PgSnap {
  stmts: Map<string, { calls: number; ms: number; wal: number; hit: number; dirtied: number }>;
}

async function pgSnapshot(dbUrl: string, dbName: string): Promise<PgSnap> {
  return withPg(dbUrl, async (c) => {
    const r = await c.query<{ query: string; calls: string; ms: number; wal: string; hit: string; dirtied: string }>(
      `SELECT s.query, sum(s.calls) AS calls, sum(s.total_exec_time) AS ms, sum(s.wal_bytes) AS wal, sum(s.shared_blks_hit) AS hit, sum(s.shared_blks_dirtied) AS dirtied
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 GROUP BY s.query`,
      [dbName],
    );
    const stmts = new Map<string, { calls: number; ms: number; wal: number; hit: number; dirtied: number }>();
    for (const x of r.rows) stmts.set(x.query, { calls: Number(x.calls), ms: Number(x.ms), wal: Number(x.wal), hit: Number(x.hit), dirtied: Number(x.dirtied) });
    return { stmts };
  });
}

/** PostgreSQL's work per message between two snapshots: totals and the top statements by execution time. */
interface PgPerMsg {
  ms: number;
  wal: number;
  hit: number;
  dirtied: number;
  top: { query: string; calls: number; ms: number; wal: number; dirtied: number }[];
}

function pgDiff(a: PgSnap, b: PgSnap, n: number): PgPerMsg {
  const out: PgPerMsg = { ms: 0, wal: 0, hit: 0, dirtied: 0, top: [] };
  for (const [q, y] of b.stmts) {
    if (/pg_stat_statements|pg_database/.test(q)) continue;
    const x = a.stmts.get(q) ?? { calls: 0, ms: 0, wal: 0, hit: 0, dirtied: 0 };
    const d = { calls: y.calls - x.calls, ms: y.ms - x.ms, wal: y.wal - x.wal, hit: y.hit - x.hit, dirtied: y.dirtied - x.dirtied };
    if (d.calls <= 0) continue;
    out.ms += d.ms / n;
    out.wal += d.wal / n;
    out.hit += d.hit / n;
    out.dirtied += d.dirtied / n;
    out.top.push({ query: q.replace(/\s+/g, ' ').slice(0, 100), calls: d.calls / n, ms: d.ms / n, wal: d.wal / n, dirtied: d.dirtied / n });
  }
  out.top.sort((p, q) => q.ms - p.ms);
  out.top = out.top.slice(0, 8);
  return out;
}

interface Measured {
  /** Per round: instructions per request, main thread. */
  main: number[];
  all: number[];
  secs: number[];
  pg: PgPerMsg[];
}

/** Main-thread instructions per second with no requests (timers), measured after the rounds. */
const IDLE_S = argNum('idle', 20);

async function measure(t: Traced, scenarios: Scenario[], pgAdmin?: string): Promise<{ scen: Map<string, Measured>; idleMainPerS: number }> {
  const out = new Map<string, Measured>();
  for (const s of scenarios) {
    const w0 = now();
    await s.run(t, WARMUP);
    log(`${t.v.name}: warm-up ${s.name}, ${WARMUP} in ${((now() - w0) / 1000).toFixed(0)} s`);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of scenarios) {
      // read in the variant's own database: the extension (and its view) is created there
      const before = s.id === 'queue' && pgAdmin && t.db ? await pgSnapshot(t.db.url, t.db.name) : undefined;
      await callgrindControl(t, '--zero');
      const s0 = now();
      await s.run(t, N);
      const c = await dumpInstructions(t);
      const secs = (now() - s0) / 1000;
      const m = out.get(s.id) ?? { main: [], all: [], secs: [], pg: [] };
      m.main.push(c.main / N);
      m.all.push(c.all / N);
      m.secs.push(secs);
      if (before) m.pg.push(pgDiff(before, await pgSnapshot(t.db!.url, t.db!.name), N));
      out.set(s.id, m);
      log(`${t.v.name}: ${s.name}: ${fmtInt(c.main / N)} instructions/request main thread, ${fmtInt(c.all / N)} all (${N} in ${secs.toFixed(0)} s)`);
    }
  }
  await callgrindControl(t, '--zero');
  const i0 = now();
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  const idle = await dumpInstructions(t);
  const idleMainPerS = idle.main / ((now() - i0) / 1000);
  log(`${t.v.name}: idle ${fmtInt(idleMainPerS)} instructions/s in the main thread`);
  return { scen: out, idleMainPerS };
}

async function main(): Promise<void> {
  requirePrograms('bench:instructions', CALLGRIND_PROGRAMS);
  installCleanupHandlers();
  const t0 = now();
  const loadStart = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const vs = variants();
  const wanted = (arg('scenarios') ?? SCENARIOS.map((s) => s.id).join(',')).split(',');
  const scenarios = SCENARIOS.filter((s) => wanted.includes(s.id));
  // only the areas measured (kv alone runs on a Node.js whose ABI the queue's SQLite addon lacks)
  const areas = [scenarios.some((s) => s.id.startsWith('kv')) ? 'kv' : '', scenarios.some((s) => s.id === 'queue') ? 'queue' : ''].filter(Boolean).join(',');
  if (!flag('no-build')) {
    for (const root of new Set(vs.map((v) => v.root))) {
      const b = await runToCompletion('build', process.execPath, [path.join(root, 'scripts/build.mjs')]);
      if (b.code !== 0) throw new Error(`build of ${root} failed: ${b.stderr}`);
    }
  }
  // --keep: a directory the clean-up leaves, for callgrind_annotate
  const dir = flag('keep') ? fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-instructions-')) : makeTempDir('svc-bench-instructions-');
  if (flag('keep')) log(`callgrind files in ${dir}`);
  const redisPort = await freePort();
  await startRedisServer(redisPort, dir);
  const cluster = flag('kv-cluster') ? await startRedisCluster() : undefined;
  const clusterEnv: Record<string, string> = cluster ? { SVC_KV_REDIS_CLUSTER: cluster.seeds } : {};
  let pg: BenchPostgres | undefined;
  if (STORE === 'pg') pg = await startBenchPostgres();
  try {
    const results = await Promise.all(
      vs.map(async (v) => {
        const sink = await startSink();
        const db = pg ? { name: `svc_${v.name.toLowerCase()}`, url: await pg.newDatabase(`svc_${v.name.toLowerCase()}`) } : undefined;
        const s0 = now();
        const t = await startTraced({ ...v, env: { ...clusterEnv, ...v.env } }, areas, cluster ? '' : `redis://127.0.0.1:${redisPort}`, dir, sink, db);
        log(`${v.name}: started under callgrind in ${((now() - s0) / 1000).toFixed(0)} s`);
        try {
          return await measure(t, scenarios, pg?.adminUrl);
        } finally {
          await t.proc.stop('SIGTERM', 600_000);
          await sink.close();
        }
      }),
    );
    const R = 'right' as const;
    const min = (xs: number[]) => Math.min(...xs);
    const rounds = (xs: number[]) => `${fmtInt(min(xs))} (${xs.map(fmtInt).join(' / ')})`;
    const pct = (x: number, y: number) => `${y >= x ? '+' : ''}${(((y - x) / x) * 100).toFixed(1)} %`;
    const cols = [{ header: 'scenario' }];
    const rows = scenarios.map((s) => {
      const ms = results.map((r) => r.scen.get(s.id)!);
      // main thread minus the timer work of as long as the round took under valgrind
      const nets = results.map((r, i) => min(ms[i].main.map((x, k) => x - (r.idleMainPerS * ms[i].secs[k]) / N)));
      const row = [s.name, ...ms.map((m) => rounds(m.main)), ...nets.map(fmtInt), ...ms.map((m) => fmtInt(min(m.all)))];
      if (ms.length === 2) row.push(pct(min(ms[0].main), min(ms[1].main)), pct(nets[0], nets[1]), pct(min(ms[0].all), min(ms[1].all)));
      return row;
    });
    const headers = [
      ...cols,
      ...vs.map((v) => ({ header: `main thread, ${v.name}`, align: R })),
      ...vs.map((v) => ({ header: `net, ${v.name}`, align: R })),
      ...vs.map((v) => ({ header: `all threads, ${v.name}`, align: R })),
      ...(vs.length === 2 ? [{ header: 'main B vs A', align: R }, { header: 'net B vs A', align: R }, { header: 'all B vs A', align: R }] : []),
    ];
    const lines = [
      `## Instructions per request (callgrind)`,
      '',
      `Machine: ${describeMachine(machineInfo())}; load average at start ${loadStart} (instruction counts do not depend on it); ${new Date().toISOString()}. Total run ${((now() - t0) / 60000).toFixed(0)} min.`,
      ...vs.map((v) => `- ${v.name}: ${gitDescribe(v.root)}, ${execFileSync(v.node, ['-v'], { encoding: 'utf8' }).trim()}${Object.keys(v.env).length ? `, ${Object.entries(v.env).map(([k, x]) => `${k}=${x}`).join(' ')}` : ''}`),
      '',
      `\`node dist/cli.js serve\` (\`SVC_AREAS=${areas}\`, no kv workers, queue on ${STORE === 'pg' ? `PostgreSQL ${pg!.version}` : 'SQLite, fsync always'}) under \`valgrind --tool=callgrind --separate-threads=yes\`; ${WARMUP} warm-up requests per scenario, then ${ROUNDS} rounds of ${N}, ${CONCURRENCY} in flight (queue: one message at a time, each until delivered). Instructions per request: main thread (the event loop), smallest round first, then every round; "net" = the smallest round of the main thread minus its timer work with no requests (measured for ${IDLE_S} s after the rounds: ${results.map((r, i) => `${vs[i].name} ${fmtInt(r.idleMainPerS)}`).join(', ')} instructions/s) times the round's duration under valgrind; all threads (smallest round) adds V8's compiler and GC threads and libuv's pool.`,
      '',
      markdownTable(headers, rows),
      '',
    ];
    if (pg) {
      lines.push(`PostgreSQL per message (pg_stat_statements of each variant's database; smallest round by WAL bytes; execution ms depends on the load):`, '');
      const pgRows: string[][] = [];
      results.forEach((r, i) => {
        const ps = r.scen.get('queue')?.pg ?? [];
        if (!ps.length) return;
        const best = ps.reduce((p, q) => (q.wal < p.wal ? q : p));
        pgRows.push([vs[i].name, 'all statements', '', best.ms.toFixed(4), fmtInt(best.wal), best.hit.toFixed(1), best.dirtied.toFixed(2)]);
        for (const x of best.top) pgRows.push([vs[i].name, `\`${x.query.replace(/\|/g, '\\|')}\``, x.calls.toFixed(2), x.ms.toFixed(4), fmtInt(x.wal), '', x.dirtied.toFixed(2)]);
      });
      lines.push(
        markdownTable(
          [{ header: 'variant' }, { header: 'statement' }, { header: 'calls/msg', align: R }, { header: 'exec ms/msg', align: R }, { header: 'WAL bytes/msg', align: R }, { header: 'blocks hit/msg', align: R }, { header: 'blocks dirtied/msg', align: R }],
          pgRows,
        ),
        '',
      );
    }
    const report = lines.join('\n');
    process.stdout.write(report);
    const out = arg('out');
    if (out) fs.writeFileSync(out, report);
  } finally {
    pg?.stop();
    await cluster?.close();
  }
}

main()
  .catch((err) => {
    process.stderr.write(`[bench:instructions] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => cleanupAll());

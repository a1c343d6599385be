/**
 * `npm run bench:vector-pg`: the vector area on PostgreSQL (`SVC_VECTOR_DATABASE_URL`) against the
 * SQLite store, on this machine, with real svc processes (`bin/svc.js serve`) and a throw-away
 * PostgreSQL cluster (fsync on):
 *
 * - upsert throughput on one node, 128-d and 768-d (batches of 100, 4 concurrent clients);
 * - query QPS and p99 (top 10, 8 concurrent clients) with one node, and with two PostgreSQL nodes
 *   sharing the clients;
 * - follower lag p50/p99: a marker written on one node, polled on the other, while a writer keeps
 *   the first node busy (`BENCH_SECONDS`, default 5; `BENCH_PG_LAG_TRACE=1` prints each marker's
 *   time, lag and the vectors written so far to stderr; `BENCH_PG_LAG_DIAG=<dir>` records
 *   PostgreSQL's view of that step into `<dir>` ({@link lagDiagnosis}) and runs the follower at
 *   log level trace (its notifications and catch-up pages in `<dir>/b.log`), and with
 *   `BENCH_PG_NO_AUTOVACUUM=1` turns autovacuum off (the tables keep no statistics, as in a fresh
 *   database's first minute, whatever the machine's speed); `BENCH_PG_ONLY=lag` runs the steps up
 *   to this one and stops);
 * - time to ready (banner) of a node joining the index from an empty data dir, and of a node
 *   restarted on its data dir (local cache and graph snapshot);
 * - joining ({@link joinRows}): with no publication (the records reloaded and the graph rebuilt),
 *   from the copy another node published (`SVC_VECTOR_PUBLISH_MS`), and a restart on the local
 *   snapshot the joiner then has; the time the publication took and its size; the serving node's
 *   query latency p50/p99 (2 clients) while idle and during each of them; for a publication
 *   without the vectors the graph carries (`vectorless.ts`), the joiner's background fill of them
 *   after ready (its duration from the joiner's log, the joiner's CPU time meanwhile) and the serving node's p50/p99 during it
 *   (the restart is measured after the fill). With `BENCH_PG_REBUILD=0` the serving node is
 *   restarted as the publisher and the previous publication deleted, so each run measures a
 *   publication made by the code under test (a kept load made by an older release included).
 *
 * Sizes: `BENCH_PG_N` vectors at 128-d (default 20,000; a quarter at 768-d). `BENCH_PG_ONLY=join`
 * runs the join rows alone (for 1M: `BENCH_PG_N=1000000`); `BENCH_PG_REBUILD=0` skips the join
 * without a publication (minutes at 1M); `BENCH_PG_JOIN_ROUNDS` (1) repeats the join from the
 * publication and the restart after it, alternating (load changes from minute to minute here).
 * `BENCH_PG_KEEP=<dir>` (with `BENCH_PG_ONLY=join`) keeps the loaded PostgreSQL cluster
 * (`<dir>/pg`) and the serving node's data dir (`<dir>/pa`) between runs ({@link keptLoad}): a run
 * reuses them when `<dir>/loaded.json` says they hold a complete load of the same `BENCH_PG_N` and
 * dimension, else it empties `<dir>`, loads, and keeps the result (the 1M load takes 10-40 min
 * here, a reused one a restart of the serving node). Prints one table; `npm run bench:vector`
 * runs it too ({@link postgresRows}) and adds the table to its report.
 */
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { postgresBinDir, runPg, startTestPostgres, withPg } from '../test/helpers/postgres.js';
import { adoptChild, adoptTempDir, freePort, onCleanup } from './lib/proc.js';
import { tempDir } from '../test/helpers/env.js';
import { randomVectors, serveVectorChild } from '../test/vector/helpers.js';

const N = Number(process.env.BENCH_PG_N ?? 20_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const rows: string[] = [];
const add = (what: string, sqlite: string, pg: string) => {
  rows.push(`| ${what} | ${sqlite} | ${pg} |`);
  console.log(`${what} | ${sqlite} | ${pg}`);
};
const fmt = (x: number, d = 0) => x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

type Node = Awaited<ReturnType<typeof serveVectorChild>> & { token: string };

async function post(url: string, token: string, body: string): Promise<any> {
  const r = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${url}: ${r.status} ${text}`);
  return JSON.parse(text);
}

const TOKEN = 'bench-vector-token';

async function start(dir: string, dim: number, pgUrl?: string, more: Record<string, string> = {}): Promise<Node> {
  const env: Record<string, string> = { SVC_VECTOR_DIMENSION: String(dim), SVC_VECTOR_TOKEN: TOKEN, SVC_VECTOR_PUBLISH_MS: '0', ...more };
  if (pgUrl) Object.assign(env, { SVC_VECTOR_DATABASE_URL: pgUrl, SVC_VECTOR_DATABASE_SCHEMA: 'public' });
  const n = await serveVectorChild(dir, env, 600_000);
  adoptChild(n.child, 'svc');
  return { ...n, token: TOKEN };
}

async function stop(n: Node, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  n.child.kill(signal);
  await n.exited();
}

/** Upserts `vecs` in batches of `batch` (100) from 4 clients; resolves to acknowledged vectors per second. */
async function upsertAll(n: Node, vecs: number[][], prefix = 'v', batch = 100): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (;;) {
        const b = next;
        next += batch;
        if (b >= vecs.length) return;
        await post(`${n.url}/upsert`, n.token, JSON.stringify(vecs.slice(b, b + batch).map((v, i) => ({ id: `${prefix}${b + i}`, vector: v }))));
      }
    }),
  );
  return vecs.length / ((performance.now() - t0) / 1000);
}

async function waitIndexed(n: Node, count: number): Promise<void> {
  for (;;) {
    const r = await fetch(`${n.url}/info`, { headers: { authorization: `Bearer ${n.token}` } });
    const i = (await r.json()).result;
    if (i.vectorCount >= count && i.pendingVectorCount === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Queries from 8 clients spread over `nodes` for SECONDS, after one unmeasured second (the load
 * generator, this process, warms up too); QPS and p99 (ms).
 */
async function queryLoad(nodes: Node[], queries: number[][], seconds = SECONDS, warm = true): Promise<{ qps: number; p99: number }> {
  if (warm) await queryLoad(nodes, queries, 1, false);
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  let k = 0;
  await Promise.all(
    Array.from({ length: 8 }, async (_, c) => {
      const n = nodes[c % nodes.length];
      while (performance.now() < end) {
        const t = performance.now();
        await post(`${n.url}/query`, n.token, JSON.stringify({ vector: queries[k++ % queries.length], topK: 10 }));
        lat.push(performance.now() - t);
      }
    }),
  );
  return { qps: lat.length / seconds, p99: pct(lat, 99) };
}

/** Runs every measurement; resolves to the markdown table (SQLite and PostgreSQL columns). */
export async function postgresRows(): Promise<string> {
  rows.length = 0;
  const dirs = tempDir('svc-bench-vpg-');
  adoptTempDir(dirs.dir);
  console.log(`N = ${N} (128-d), ${N / 4} (768-d); ${os.cpus().length} × ${os.cpus()[0]?.model}`);
  const keep = process.env.BENCH_PG_KEEP;
  if (process.env.BENCH_PG_ONLY === 'join') {
    const kept = keep ? await keptLoad(path.resolve(keep)) : undefined;
    const pg = kept ? undefined : await startTestPostgres({ own: true });
    if (pg) onCleanup(() => pg.stop());
    try {
      const db = kept?.url ?? (await pg!.newDatabase());
      const aDir = kept ? path.join(kept.dir, 'pa') : path.join(dirs.dir, 'pa');
      const a = await start(aDir, 128, db);
      if (!kept?.loaded) {
        const t = performance.now();
        // the set-up, not a measurement: batches of 1,000 (the largest the API takes) load faster
        const rate = await upsertAll(a, randomVectors(N, 128, 1), 'v', 1000);
        await waitIndexed(a, N);
        console.log(`loaded ${fmt(N)} × 128 (batches of 1,000) in ${fmt((performance.now() - t) / 1000, 1)} s (${fmt(rate)} vectors/s acknowledged)`);
        kept?.markLoaded();
      } else console.log(`reusing the load of ${fmt(N)} × 128 kept in ${kept.dir}`);
      await stop(await joinRows(db, a, aDir, dirs.dir, randomVectors(500, 128, 2)));
      return table();
    } finally {
      kept?.stop();
      await pg?.stop();
      dirs.cleanup();
    }
  }
  const pg = await startTestPostgres({ own: true });
  onCleanup(() => pg.stop());
  const diag = process.env.BENCH_PG_LAG_DIAG ? await lagDiagnosis(pg.adminUrl, path.resolve(process.env.BENCH_PG_LAG_DIAG)) : undefined;
  const lagOnly = process.env.BENCH_PG_ONLY === 'lag';
  try {
    // 1. upsert throughput, one node
    for (const [dim, n] of lagOnly ? [] : ([[128, N], [768, N / 4]] as const)) {
      const vecs = randomVectors(n, dim, dim);
      const s = await start(path.join(dirs.dir, `s${dim}`), dim);
      const sq = await upsertAll(s, vecs);
      await stop(s);
      const db = await pg.newDatabase();
      const p = await start(path.join(dirs.dir, `p${dim}`), dim, db);
      const pq = await upsertAll(p, vecs);
      await stop(p);
      add(`upsert ${dim}-d, one node, vectors/s (acknowledged)`, fmt(sq), `${fmt(pq)} (${fmt((100 * pq) / sq)} %)`);
    }

    // 2. query QPS: one SQLite node, one and two PostgreSQL nodes
    const vecs = randomVectors(N, 128, 1);
    const queries = randomVectors(500, 128, 2);
    const s = await start(path.join(dirs.dir, 'sq'), 128);
    await upsertAll(s, vecs);
    await waitIndexed(s, N);
    const sq = await queryLoad([s], queries);
    await stop(s);
    const db = await pg.newDatabase();
    const a = await start(path.join(dirs.dir, 'pa'), 128, db);
    await upsertAll(a, vecs);
    await waitIndexed(a, N);
    const pq1 = await queryLoad([a], queries);
    add('query QPS (p99 ms), top 10, 8 clients, one node', `${fmt(sq.qps)} (${fmt(sq.p99, 1)})`, `${fmt(pq1.qps)} (${fmt(pq1.p99, 1)}) (${fmt((100 * pq1.qps) / sq.qps)} %)`);

    // 3. time to ready of a node joining from an empty data dir
    let t = performance.now();
    const b = await start(path.join(dirs.dir, 'pb'), 128, db, diag ? { SVC_LOG_LEVEL: 'trace' } : {});
    const joinEmpty = performance.now() - t;
    await waitIndexed(b, N);
    const pq2 = await queryLoad([a, b], queries);
    add('query QPS (p99 ms), 8 clients over two nodes', '—', `${fmt(pq2.qps)} (${fmt(pq2.p99, 1)})`);

    // 4. follower lag under write load on a
    let writing = true;
    let w = 0;
    const writer = (async () => {
      const more = randomVectors(2000, 128, 3);
      while (writing) {
        await post(`${a.url}/upsert`, a.token, JSON.stringify(more.slice((w % 20) * 100, (w % 20) * 100 + 100).map((v, i) => ({ id: `load${w}-${i}`, vector: v }))));
        w++;
      }
    })();
    const sampling = diag?.sample(db, { a: a.child.pid!, b: b.child.pid! });
    const lags: number[] = [];
    const marker = randomVectors(1, 128, 4)[0];
    const until = performance.now() + SECONDS * 1000;
    for (let i = 0; performance.now() < until; i++) {
      await post(`${a.url}/upsert`, a.token, JSON.stringify([{ id: `marker${i}`, vector: marker }]));
      const t0 = performance.now();
      for (;;) {
        const r = await post(`${b.url}/fetch`, b.token, JSON.stringify({ ids: [`marker${i}`] }));
        if (r.result[0]) break;
        await new Promise((r) => setTimeout(r, 2));
      }
      lags.push(performance.now() - t0);
      if (process.env.BENCH_PG_LAG_TRACE) console.error(`${new Date().toISOString()} marker ${i} lag ${Math.round(performance.now() - t0)} ms, written so far ${w * 100}`);
    }
    writing = false;
    await writer;
    await sampling?.stop({ a: a.log(), b: b.log() });
    const loadRate = (w * 100) / SECONDS;
    add(`follower lag p50 / p99 ms (markers while ~${fmt(loadRate)} vectors/s are written)`, '—', `${fmt(pct(lags, 50), 1)} / ${fmt(pct(lags, 99), 1)} (${lags.length} markers)`);
    if (lagOnly) {
      await Promise.all([stop(a), stop(b)]);
      return table();
    }

    // 5. time to ready: a node restarted on its data dir (local cache + snapshot)
    await stop(b);
    t = performance.now();
    const b2 = await start(path.join(dirs.dir, 'pb'), 128, db);
    const restart = performance.now() - t;
    await stop(b2);
    add(`time to ready, node joining ${fmt(N)} × 128 from an empty data dir, ms`, '—', fmt(joinEmpty));
    add(`time to ready, node restarted on its data dir (cache + snapshot, ~${fmt(N + w * 100)} vectors), ms`, '—', fmt(restart));
    await stop(await joinRows(db, a, path.join(dirs.dir, 'pa'), dirs.dir, queries));
  } finally {
    await pg.stop();
    dirs.cleanup();
  }
  return table();
}

/**
 * The kept load of `BENCH_PG_KEEP`: a PostgreSQL cluster in `<dir>/pg` (started on a free port,
 * stopped fast at the end, kept on disk) with database `bench`, and the serving node's data dir
 * `<dir>/pa`. `loaded` is true when `<dir>/loaded.json` records a complete load of `BENCH_PG_N`
 * vectors of 128 dimensions; otherwise `<dir>` was emptied and a new cluster made, and the caller
 * loads and then calls `markLoaded()`. Throws what initdb/pg_ctl print when they fail.
 */
async function keptLoad(dir: string): Promise<{ dir: string; url: string; loaded: boolean; markLoaded(): void; stop(): void }> {
  const marker = path.join(dir, 'loaded.json');
  const want = JSON.stringify({ n: N, dimension: 128 });
  const loaded = fs.existsSync(marker) && fs.readFileSync(marker, 'utf8') === want;
  const bin = postgresBinDir();
  const pgDir = path.join(dir, 'pg');
  const data = path.join(pgDir, 'data');
  if (!loaded) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(pgDir, { recursive: true });
    fs.writeFileSync(path.join(pgDir, 'pw'), 'bench\n');
    if (process.getuid?.() === 0) execFileSync('chown', ['-R', 'postgres:postgres', pgDir]);
    runPg(path.join(bin, 'initdb'), ['-D', data, '-U', 'svc', `--pwfile=${path.join(pgDir, 'pw')}`, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-instructions']);
  }
  const port = await freePort();
  const pgctl = path.join(bin, 'pg_ctl');
  // a run killed before its end left the cluster running: stop it, to start it on a free port
  if (fs.existsSync(path.join(data, 'postmaster.pid'))) {
    try {
      runPg(pgctl, ['stop', '-m', 'fast', '-t', '300', '-D', data]);
    } catch {
      /* a stale pid file: pg_ctl start handles it */
    }
  }
  runPg(pgctl, ['start', '-w', '-t', '300', '-D', data, '-l', path.join(pgDir, 'log'), '-o', `-p ${port} -k ${pgDir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=32MB`]);
  const admin = `postgres://svc:bench@127.0.0.1:${port}/postgres`;
  if (!loaded) await withPg(admin, (c) => c.query('CREATE DATABASE bench'));
  return {
    dir,
    url: `postgres://svc:bench@127.0.0.1:${port}/bench`,
    loaded,
    markLoaded: () => fs.writeFileSync(marker, want),
    stop: () => runPg(pgctl, ['stop', '-m', 'fast', '-t', '300', '-D', data]),
  };
}

/**
 * `BENCH_PG_LAG_DIAG=<dir>`: PostgreSQL's own view of the lag step. Sets (ALTER SYSTEM, reload)
 * statement logging past 100 ms, `auto_explain` (analyzed plans past 100 ms) and lock-wait logging;
 * `sample` then records `pg_stat_activity` (each backend's state, wait event, statement and age,
 * and which svc node holds its connection, from `ss`) and the ungranted `pg_locks` every 100 ms
 * into `<dir>/activity.jsonl` until `stop`, which also writes both nodes' logs (`a.log`, `b.log`)
 * and the server's log (`pg.log`).
 */
async function lagDiagnosis(adminUrl: string, dir: string) {
  fs.mkdirSync(dir, { recursive: true });
  const settings: [string, string][] = [
    ['log_min_duration_statement', '100'],
    ['log_lock_waits', 'on'],
    ['deadlock_timeout', '100'],
    ['session_preload_libraries', 'auto_explain'],
    ['auto_explain.log_min_duration', '100'],
    ['auto_explain.log_analyze', 'on'],
    ['auto_explain.log_buffers', 'on'],
    ['log_line_prefix', '%m [%p] %a '],
    ['log_autovacuum_min_duration', '0'],
    // BENCH_PG_NO_AUTOVACUUM=1: no ANALYZE at all, as on a fresh database in its first minute
    ...(process.env.BENCH_PG_NO_AUTOVACUUM ? [['autovacuum', 'off'] as [string, string]] : []),
  ];
  const dataDir = await withPg(adminUrl, async (c) => {
    await c.query("LOAD 'auto_explain'"); // its settings are known once loaded
    for (const [k, v] of settings) await c.query(`ALTER SYSTEM SET ${k} = '${v}'`);
    await c.query('SELECT pg_reload_conf()');
    return (await c.query<{ data_directory: string }>('SHOW data_directory')).rows[0].data_directory;
  });
  const pgPort = new URL(adminUrl).port;
  return {
    sample(db: string, nodes: Record<string, number>) {
      let on = true;
      const out = fs.createWriteStream(path.join(dir, 'activity.jsonl'));
      const byPid = new Map(Object.entries(nodes).map(([k, v]) => [v, k]));
      const loop = withPg(db, async (c) => {
        while (on) {
          const t = new Date().toISOString();
          const owner = new Map<number, string>();
          for (const l of execFileSync('ss', ['-tnpH', 'dst', `127.0.0.1:${pgPort}`]).toString().split('\n')) {
            const m = /127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:\d+.*pid=(\d+)/.exec(l);
            if (m) owner.set(Number(m[1]), byPid.get(Number(m[2])) ?? m[2]);
          }
          const act = await c.query(
            `SELECT pid, client_port, state, wait_event_type AS wt, wait_event AS we, round(extract(epoch FROM clock_timestamp() - query_start) * 1000) AS ms,
                    left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q
               FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
          );
          const locks = await c.query(`SELECT pid, locktype, mode, objid FROM pg_locks WHERE NOT granted`);
          out.write(JSON.stringify({ t, act: act.rows.map((r) => ({ node: owner.get(r.client_port) ?? '?', ...r })), waiting: locks.rows }) + '\n');
          await new Promise((r) => setTimeout(r, 100));
        }
      });
      return {
        async stop(logs: Record<string, string>) {
          on = false;
          await loop;
          out.end();
          for (const [k, v] of Object.entries(logs)) fs.writeFileSync(path.join(dir, `${k}.log`), v);
          fs.copyFileSync(path.join(dataDir, '..', 'log'), path.join(dir, 'pg.log'));
        },
      };
    },
  };
}

const table = () => `| measure | SQLite store | PostgreSQL store |\n| --- | --- | --- |\n${rows.join('\n')}`;

/** Query latencies (ms) of 2 clients on `n` until `until` settles (or for `seconds`), after `warm` s unmeasured. */
async function latencies(n: Node, queries: number[][], until: Promise<unknown> | number): Promise<{ p50: number; p99: number; count: number }> {
  let done = false;
  const stopAt = typeof until === 'number' ? performance.now() + until * 1000 : Infinity;
  if (typeof until !== 'number') void until.finally(() => (done = true));
  const lat: number[] = [];
  let k = 0;
  await Promise.all(
    Array.from({ length: 2 }, async () => {
      while (!done && performance.now() < stopAt) {
        const t = performance.now();
        await post(`${n.url}/query`, n.token, JSON.stringify({ vector: queries[k++ % queries.length], topK: 10 }));
        lat.push(performance.now() - t);
      }
    }),
  );
  return { p50: pct(lat, 50), p99: pct(lat, 99), count: lat.length };
}

/** Prints the start-up log lines of `n` that time its phases (download, catch-up, graph load). */
function phases(what: string, n: Node): void {
  for (const l of n.log().split('\n')) {
    if (/"msg":"vector (index (fetched|loaded|published graphs loaded|cache caught up|reloaded|download synced)|snapshot not usable|vectors fill)/.test(l)) console.log(`${what}: ${l}`);
  }
}

/** CPU time (user + system, s) process `pid` used so far (`/proc/<pid>/stat`, clock ticks of `getconf CLK_TCK`). */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/**
 * Waits for the end of `n`'s background fill of vectors (`vector-index.ts` `fill`, its log line);
 * resolves to its duration (ms, from the line) and the CPU time `n` used from the call (right
 * after ready) to then (s, polled every 100 ms: the fill's work and whatever else the node does
 * meanwhile), or undefined when `n` fills nothing (a publication with every vector, or a node of
 * an earlier release). The CPU time depends on the machine's load much less than the duration.
 */
async function fillDone(n: Node): Promise<{ ms: number; cpuS: number } | undefined> {
  const line = (msg: string) => n.log().split('\n').find((l) => l.includes(`"msg":"${msg}"`));
  const cpu0 = cpuSeconds(n.child.pid!);
  for (let waited = 0; ; waited += 100) {
    const done = line('vector vectors filled from PostgreSQL');
    if (done) return { ms: Number(JSON.parse(done).ms), cpuS: cpuSeconds(n.child.pid!) - cpu0 };
    // the fill starts once the index is loaded (before the banner): no line by then, none comes
    if (waited >= 2000 && !line('vector vectors filling from PostgreSQL')) return undefined;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the database holds a publication of `default` covering its sequence number; resolves to its size (bytes). */
async function published(db: string): Promise<number> {
  for (;;) {
    const r = await withPg(db, (c) =>
      c.query<{ ok: boolean; bytes: string }>(
        "SELECT p.seq >= i.seq AS ok, p.bytes FROM vector_indexes i JOIN vector_publications p ON p.index_name = i.name AND p.incarnation = i.incarnation WHERE i.name = 'default'",
      ),
    );
    if (r.rows[0]?.ok) return Number(r.rows[0].bytes);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The join rows: serving node `a` (data dir `aDir`) on `db` answers queries from 2 clients while
 * (1) nothing else happens, (2) node p joins from an empty data dir with no publication in the
 * database (records reloaded, graph rebuilt) — with `BENCH_PG_REBUILD=0` this is skipped and `a`
 * is restarted with publications on instead, to be the publisher — (3) node c joins from an empty
 * data dir from the copy p (or a) published, (4) c restarts on its data dir (local snapshot). Time
 * to ready of each and a's p50/p99 during it. Resolves to the serving node (to stop).
 */
async function joinRows(db: string, a: Node, aDir: string, dir: string, queries: number[][]): Promise<Node> {
  const count = (await withPg(db, (c) => c.query<{ n: string }>("SELECT count(*) AS n FROM vector_records WHERE index_name = 'default'"))).rows[0].n;
  const size = `${fmt(Number(count))} × 128`;
  const lat = (l: { p50: number; p99: number }) => `${fmt(l.p50, 1)} / ${fmt(l.p99, 1)}`;
  const idle = await latencies(a, queries, SECONDS);
  add(`query p50 / p99 ms on a serving node (2 clients), idle, ${size}`, '—', lat(idle));
  /** Starts a node on `nodeDir` while `a` answers queries: the node, its time to ready (ms) and `a`'s latencies meanwhile. */
  const timedStart = async (nodeDir: string, env: Record<string, string>) => {
    const t0 = performance.now();
    const starting = start(nodeDir, 128, db, env);
    const during = await latencies(a, queries, starting);
    const node = await starting;
    return { node, ms: performance.now() - t0, during };
  };
  let p: Node;
  if (process.env.BENCH_PG_REBUILD !== '0') {
    const rebuilt = await timedStart(path.join(dir, 'jp'), { SVC_VECTOR_PUBLISH_MS: '1000' });
    p = rebuilt.node;
    add(`time to ready, node joining ${size} from an empty data dir, no publication (records reloaded, graph rebuilt), ms`, '—', fmt(rebuilt.ms));
    add('query p50 / p99 ms on the serving node meanwhile', '—', lat(rebuilt.during));
  } else {
    await stop(a);
    // a publication left by an earlier run (BENCH_PG_KEEP) is not measured: the publisher makes a new one
    await withPg(db, (c) => c.query("DELETE FROM vector_publications WHERE index_name = 'default'"));
    a = p = await start(aDir, 128, db, { SVC_VECTOR_PUBLISH_MS: '1000', SVC_LOG_LEVEL: 'info' });
  }
  await waitIndexed(p, Number(count));
  const t = performance.now();
  const bytes = await published(db);
  add(`publication of ${size} (SQLite copy + graph snapshot, idle publisher): time to publish after ready, ms; size`, '—', `${fmt(performance.now() - t)}; ${fmt(bytes / 2 ** 20)} MiB`);
  for (const l of p.log().split('\n')) if (/"msg":"vector (copy without|index snapshot published)/.test(l)) console.log(`publisher: ${l}`);
  if (p !== a) await stop(p);
  // BENCH_PG_JOIN_ROUNDS (1) joins and restarts, alternating, each joiner on a new data dir
  const rounds = Number(process.env.BENCH_PG_JOIN_ROUNDS ?? 1);
  for (let round = 0; round < rounds; round++) {
    const jdir = path.join(dir, `jc${round}`);
    console.log(`uptime: ${execFileSync('uptime').toString().trim()}`);
    const join = await timedStart(jdir, { SVC_LOG_LEVEL: 'info' });
    phases('joiner', join.node);
    add(`time to ready, node joining ${size} from an empty data dir, from the published snapshot, ms`, '—', fmt(join.ms));
    add('query p50 / p99 ms on the serving node meanwhile', '—', lat(join.during));
    // a copy without the vectors the graph carries (vectorless.ts): the joiner fills them after ready
    const fill = fillDone(join.node);
    const duringFill = await latencies(a, queries, fill);
    const filled = await fill;
    if (filled) {
      add('vectors filled from PostgreSQL after ready (background), ms', '—', fmt(filled.ms));
      add('joiner CPU from ready to the end of the fill, s', '—', fmt(filled.cpuS, 2));
      add('query p50 / p99 ms on the serving node during the fill', '—', lat(duringFill));
    }
    await waitIndexed(join.node, Number(count));
    await stop(join.node);
    phases('joiner (after stop)', join.node);
    const restart = await timedStart(jdir, { SVC_LOG_LEVEL: 'info' });
    phases('restart', restart.node);
    await stop(restart.node);
    add(`time to ready, that node restarted on its data dir (local snapshot), ms`, '—', fmt(restart.ms));
    add('query p50 / p99 ms on the serving node meanwhile', '—', lat(restart.during));
    add('join / restart', '—', fmt(join.ms / restart.ms, 2));
  }
  console.log(`uptime: ${execFileSync('uptime').toString().trim()}`);
  return a;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) console.log('\n' + (await postgresRows()));

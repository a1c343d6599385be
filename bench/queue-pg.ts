/**
 * The PostgreSQL part of `npm run bench:queue`: svc's PostgreSQL queue store (one node, and two
 * nodes sharing the database) beside graphile-worker and pg-boss (`bench/peers/pg-queues.ts`) on
 * one throw-away PostgreSQL cluster that this bench starts (`bench/lib/postgres.ts`: `fsync=on`,
 * `synchronous_commit=on`). Every system gets its own database on that cluster and delivers to
 * the same local HTTP sink as the rest of the bench.
 *
 * Per system, in this order: a warm-up (2,000 messages, 16 publishers, not reported), then
 * - **throughput**: `n` messages from 64 concurrent publishers (closed loop: each sends its next
 *   message when the previous one was acknowledged); delivered msg/s = n / (last delivery - start);
 * - **steady rate**: an open loop at `rate` msg/s for `secs` seconds (message i is due at
 *   start + i/rate and is sent then whatever is still in flight, so a slow system is not given
 *   time to catch up); latency = due time -> sink receive, p50/p99;
 * - **CPU**: user+system time (from `/proc`) of the system's own processes (the svc node(s), or
 *   the peer's worker process), of PostgreSQL (postmaster and all its children), and of the bench
 *   process (publishers, sink; for the peers also their publisher client), per delivered message;
 * - **where PostgreSQL's time goes**: the top statements by execution time in that database
 *   during the throughput run (`pg_stat_statements`).
 *
 * svc nodes run as `node bin/svc.js serve` with `SVC_AREAS=queue`, one `SVC_DATA_DIR` each, the
 * same `SVC_QUEUE_TOKEN` and signing keys, and `SVC_QUEUE_DATABASE_URL`; with two nodes,
 * message i is published to node i mod 2. A build whose queue ignores `SVC_QUEUE_DATABASE_URL`
 * (no table appears in the database after start) or refuses it is reported as "svc PostgreSQL
 * store not available in this build" and its rows are skipped.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { clusterCpuMs, resetStatements, startBenchPostgres, topStatements, treeCpuMs, walStats, withPg, type BenchPostgres, type StatementTime, type WalStats } from './lib/postgres.js';
import { installCleanupHandlers, startProcess, type ManagedProcess } from './lib/proc.js';
import { closedLoop, now, type Sink } from './lib/queue-sink.js';
import { percentile } from './lib/stats.js';
import { openPeerPublisher, PG_PEERS, type PgPeer } from './peers/pg-queues.js';
import { ensurePeer } from './peers/install.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOKEN = 'bench-token';
const SIGNING = { SVC_QUEUE_CURRENT_SIGNING_KEY: 'sig_benchcurrent0000000000000000', SVC_QUEUE_NEXT_SIGNING_KEY: 'sig_benchnext00000000000000000000' };

export interface PgOptions {
  sink: Sink;
  /** Messages of the throughput run (64 publishers). */
  n: number;
  /** Open-loop rate, msg/s, and its duration, s. */
  rate: number;
  secs: number;
  /** Skip graphile-worker / pg-boss (e.g. no registry access). */
  skipPeers?: boolean;
}

/** Result of one system on PostgreSQL. */
export interface PgRow {
  system: string;
  /** How it is set up (worker settings, nodes). */
  setup: string;
  /** Set when the system could not be measured; the other fields are then absent. */
  skipped?: string;
  delivered?: number;
  accepted?: number;
  p50?: number;
  p99?: number;
  rateDelivered?: number;
  rateP50?: number;
  rateP99?: number;
  /** Deliveries missing at the end of the steady-rate run (the system fell behind by that many). */
  rateMissing?: number;
  /** CPU µs per delivered message in the throughput run: the system's processes, PostgreSQL, the bench process. */
  cpuSys?: number;
  cpuPg?: number;
  cpuLoad?: number;
  top?: StatementTime[];
  /** WAL of the throughput run, per delivered message (bytes, records, flushes). */
  wal?: WalStats;
}

export interface PgResult {
  version: string;
  rows: PgRow[];
}

/** One system under test: its processes and how a message is published to it. */
interface System {
  pids: number[];
  /** Publishes message number `i` with `payload`; resolves when the system acknowledged it. */
  publish(payload: { t: number; r: string }, i: number): Promise<void>;
  close(): Promise<void>;
}

let runSeq = 0;

async function measure(sys: System, pg: BenchPostgres, dbName: string, opts: PgOptions): Promise<Omit<PgRow, 'system' | 'setup'>> {
  const { sink } = opts;
  const errors: string[] = [];
  const send = (r: string) => (i: number, t = now()) =>
    sys.publish({ t, r }, i).catch((err: Error) => {
      if (errors.length < 3) errors.push(err.message);
    });
  // warm-up (JIT, pools, prepared statements)
  let r = `w${++runSeq}`;
  const warm = sink.expect(2000, r, 120_000);
  await closedLoop(2000, 16, send(r));
  await warm;
  await withPg(pg.adminUrl, (c) => c.query('CHECKPOINT'));
  await resetStatements(pg.adminUrl);

  // throughput at 64 publishers
  r = `n${++runSeq}`;
  const cpu0 = { sys: treeCpuMs(sys.pids), pg: clusterCpuMs(pg.pid), load: treeCpuMs([process.pid]) };
  const delivered = sink.expect(opts.n, r, 300_000);
  const t0 = now();
  const pubMs = await closedLoop(opts.n, 64, send(r));
  const d = await delivered;
  const got = d.lat.length;
  const per = (ms: number) => (ms * 1000) / Math.max(1, got);
  const cpu = { cpuSys: per(treeCpuMs(sys.pids) - cpu0.sys), cpuPg: per(clusterCpuMs(pg.pid) - cpu0.pg), cpuLoad: per(treeCpuMs([process.pid]) - cpu0.load) };
  const top = await topStatements(pg.adminUrl, dbName, 12);
  const w = await walStats(pg.adminUrl);
  const wal = { bytes: w.bytes / Math.max(1, got), records: w.records / Math.max(1, got), syncs: w.syncs / Math.max(1, got) };
  if (errors.length) throw new Error(`publish failed: ${errors.join('; ')}`);
  if (!d.complete) throw new Error(`only ${got} of ${opts.n} messages delivered within 300 s`);
  const through = { delivered: got / ((d.lastAt - t0) / 1000), accepted: opts.n / (pubMs / 1000), p50: percentile(d.lat, 50), p99: percentile(d.lat, 99), ...cpu, top, wal };
  if (opts.secs <= 0) return through; // A/B runs: throughput only

  // steady rate, open loop
  await new Promise((res) => setTimeout(res, 1000));
  r = `s${++runSeq}`;
  const total = Math.round(opts.rate * opts.secs);
  const rateDone = sink.expect(total, r, opts.secs * 1000 + 30_000);
  const fire = send(r);
  const start = now() + 20;
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((now() - start) * opts.rate) / 1000) + 1);
    for (; sent < due; sent++) void fire(sent, start + (sent * 1000) / opts.rate);
    await new Promise((res) => setTimeout(res, 1));
  }
  const s = await rateDone;
  if (errors.length) throw new Error(`publish failed: ${errors.join('; ')}`);
  return {
    ...through,
    rateDelivered: s.lat.length / ((s.lastAt - start) / 1000),
    rateP50: percentile(s.lat, 50),
    rateP99: percentile(s.lat, 99),
    rateMissing: total - s.lat.length,
  };
}

/** Starts `nodes` svc queue nodes on `dbUrl`; returns undefined when this build has no PostgreSQL store. */
async function startSvcNodes(nodes: number, dbUrl: string, root = ROOT): Promise<{ procs: ManagedProcess[]; urls: string[]; dirs: string[] } | string> {
  const procs: ManagedProcess[] = [];
  const dirs: string[] = [];
  const urls: string[] = [];
  try {
    for (let k = 0; k < nodes; k++) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `svc-bench-pgnode${k}-`));
      dirs.push(dir);
      const p = await startProcess({
        name: `svc node ${k + 1}`,
        cmd: process.execPath,
        // BENCH_SVC_NODE_ARGS: extra node flags for the svc nodes, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`
        args: [...(process.env.BENCH_SVC_NODE_ARGS ?? '').split(' ').filter(Boolean), path.join(root, 'bin/svc.js'), 'serve'],
        cwd: root,
        env: { ...process.env, SVC_AREAS: 'queue', SVC_QUEUE_PORT: '0', SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'warn', SVC_QUEUE_TOKEN: TOKEN, ...SIGNING, SVC_QUEUE_DATABASE_URL: dbUrl },
        readyPattern: /^queue\s+http:\/\/\S+/m,
        readyTimeoutMs: 120_000,
      });
      procs.push(p);
      urls.push(/^queue\s+(http:\/\/\S+)/m.exec(p.output())![1]);
    }
  } catch (err) {
    for (const p of procs) await p.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    return `svc did not start with SVC_QUEUE_DATABASE_URL: ${(err as Error).message.split('\n').slice(0, 3).join(' / ')}`;
  }
  const tables = await withPg(dbUrl, async (c) => Number((await c.query(`SELECT count(*) AS n FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)).rows[0].n));
  if (tables === 0) {
    for (const p of procs) await p.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    return 'svc PostgreSQL store not available in this build (svc started but created no table in the database)';
  }
  return { procs, urls, dirs };
}

async function svcSystem(nodes: number, dbUrl: string, sink: Sink, root = ROOT): Promise<System | string> {
  const started = await startSvcNodes(nodes, dbUrl, root);
  if (typeof started === 'string') return started;
  const pools = started.urls.map((u) => new Pool(u, { connections: Math.ceil(64 / nodes), pipelining: 1 }));
  const dest = `/v2/publish/${sink.url}/svc-pg`;
  return {
    pids: started.procs.map((p) => p.pid),
    async publish(payload, i) {
      const res = await pools[i % pools.length].request({
        path: dest,
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`publish answered ${res.statusCode}: ${text.slice(0, 200)}`);
    },
    async close() {
      for (const p of pools) await p.close();
      for (const p of started.procs) await p.stop();
      for (const d of started.dirs) fs.rmSync(d, { recursive: true, force: true });
    },
  };
}

async function peerSystem(peer: PgPeer, dbUrl: string, sink: Sink): Promise<System | string> {
  const installErr = ensurePeer(PG_PEERS[peer].pkg);
  if (installErr) return installErr;
  const worker = await startProcess({
    name: `${peer} worker`,
    cmd: process.execPath,
    args: ['--import', 'tsx', path.join(ROOT, 'bench/peers/pg-worker.ts'), peer, dbUrl, sink.url],
    cwd: ROOT,
    readyPattern: /worker ready/,
    readyTimeoutMs: 120_000,
  }).catch((err: Error) => err.message.split('\n').slice(0, 4).join(' / '));
  if (typeof worker === 'string') return worker;
  const pub = await openPeerPublisher(peer, dbUrl);
  return {
    pids: [worker.pid],
    publish: (payload) => pub.publish(payload),
    async close() {
      await pub.close();
      await worker.stop('SIGKILL');
    },
  };
}

/** Runs the PostgreSQL part (module doc). Errors of one system become a skipped row. */
export async function benchPostgres(opts: PgOptions): Promise<PgResult> {
  installCleanupHandlers(); // Ctrl-C or a crash stops the svc nodes and peer workers too
  let pg: BenchPostgres;
  try {
    pg = await startBenchPostgres();
  } catch (err) {
    const why = `PostgreSQL did not start: ${(err as Error).message.split('\n')[0]}`;
    return { version: '(none)', rows: [{ system: 'all PostgreSQL rows', setup: '', skipped: why }] };
  }
  const rows: PgRow[] = [];
  try {
    const systems: { system: string; setup: string; db: string; open: (url: string) => Promise<System | string> }[] = [
      { system: 'svc, 1 node', setup: 'SVC_QUEUE_DATABASE_URL, 64 publishers on the node', db: 'svc1', open: (u) => svcSystem(1, u, opts.sink) },
      { system: 'svc, 2 nodes', setup: 'two svc processes on one database, publishers spread over both', db: 'svc2', open: (u) => svcSystem(2, u, opts.sink) },
    ];
    if (!opts.skipPeers) {
      systems.push(
        { system: `graphile-worker ${PG_PEERS['graphile-worker'].version}`, setup: 'addJob; worker concurrentJobs 64, localQueue 500, completeJobBatchDelay 0', db: 'graphile', open: (u) => peerSystem('graphile-worker', u, opts.sink) },
        { system: `pg-boss ${PG_PEERS['pg-boss'].version}`, setup: 'send; work batchSize 16 x localConcurrency 4, LISTEN/NOTIFY', db: 'pgboss', open: (u) => peerSystem('pg-boss', u, opts.sink) },
      );
    }
    for (const s of systems) {
      process.stderr.write(`postgres: ${s.system}...\n`);
      const url = await pg.newDatabase(s.db);
      let sys: System | string;
      try {
        sys = await s.open(url);
      } catch (err) {
        sys = (err as Error).message.split('\n')[0];
      }
      if (typeof sys === 'string') {
        rows.push({ system: s.system, setup: s.setup, skipped: sys });
        continue;
      }
      try {
        rows.push({ system: s.system, setup: s.setup, ...(await measure(sys, pg, s.db, opts)) });
      } catch (err) {
        rows.push({ system: s.system, setup: s.setup, skipped: `failed: ${(err as Error).message.split('\n')[0]}` });
      } finally {
        await sys.close();
      }
    }
    return { version: pg.version, rows };
  } finally {
    pg.stop();
  }
}

const f0 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : Math.round(x).toLocaleString('en-US'));
const f2 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '–' : x < 10 ? x.toFixed(2) : x.toFixed(1));
const ratio = (a: number | undefined, b: number | undefined) => (a && b ? `${(a / b).toFixed(2)}x` : '–');

/**
 * The markdown section of the PostgreSQL rows: the table, the same-run ratios of svc to each peer
 * (and to BullMQ on redis when `bullmq64`, its row at 64 publishers, was measured in this run:
 * shown as a row too), WAL per message and the top statements per system.
 */
export function formatPg(res: PgResult, opts: PgOptions, bullmq64?: { delivered: number; accepted: number; p50: number; p99: number; cpuUs?: number; loadCpuUs?: number }): string[] {
  const by = (prefix: string) => res.rows.find((r) => r.system.startsWith(prefix) && !r.skipped);
  const svc1 = by('svc, 1 node');
  const lines = [
    `## Queue on PostgreSQL`,
    ``,
    `PostgreSQL ${res.version} started by the bench (initdb in a temp dir; fsync=on, synchronous_commit=on: every acknowledged publish is flushed to the WAL), one database per system, same sink as above. ` +
      `Throughput: ${opts.n} messages from 64 concurrent publishers (closed loop). Steady rate: an open loop at ${opts.rate} msg/s for ${opts.secs} s, latency from each message's due time to the sink. ` +
      `CPU per delivered message (throughput run, /proc): "system" = the svc node(s), or the peer's worker process; "postgres" = the postmaster and all its children; "bench" = this process (publishers and sink; for the peers also their publisher client, as for BullMQ above).`,
    ``,
    `| system | setup | delivered msg/s @64 | accepted msg/s @64 | p50 / p99 @64 (ms) | vs svc 1 node | @${opts.rate}/s: delivered msg/s | @${opts.rate}/s: p50 / p99 (ms) | CPU µs/msg: system | postgres | bench |`,
    `| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |`,
  ];
  for (const r of res.rows) {
    if (r.skipped) {
      lines.push(`| ${r.system} | ${r.setup} | not run: ${r.skipped.replace(/\|/g, '/')} | | | | | | | | |`);
      continue;
    }
    const missing = r.rateMissing ? ` (${r.rateMissing} late)` : '';
    lines.push(
      `| ${r.system} | ${r.setup} | ${f0(r.delivered)} | ${f0(r.accepted)} | ${f2(r.p50)} / ${f2(r.p99)} | ${ratio(r.delivered, svc1?.delivered)} | ${f0(r.rateDelivered)}${missing} | ${f2(r.rateP50)} / ${f2(r.rateP99)} | ${f0(r.cpuSys)} | ${f0(r.cpuPg)} | ${f0(r.cpuLoad)} |`,
    );
  }
  if (bullmq64) {
    const b = bullmq64;
    lines.push(
      `| BullMQ on redis (same run, not PostgreSQL) | Queue.add; worker concurrency 64; appendfsync everysec | ${f0(b.delivered)} | ${f0(b.accepted)} | ${f2(b.p50)} / ${f2(b.p99)} | ${ratio(b.delivered, svc1?.delivered)} | – | – | ${f0(b.cpuUs)} (worker + redis-server) | – | ${f0(b.loadCpuUs)} |`,
    );
  }
  lines.push(``);
  const peers = [by('graphile-worker'), by('pg-boss')];
  for (const s of [svc1, by('svc, 2 nodes')]) {
    if (!s) continue;
    const parts = peers.filter((p) => p).map((p) => `${ratio(s.delivered, p!.delivered)} of ${p!.system.split(' ')[0]}`);
    if (bullmq64) parts.push(`${ratio(s.delivered, bullmq64.delivered)} of BullMQ on redis`);
    if (parts.length) lines.push(`- ${s.system}: delivered msg/s at 64 publishers = ${parts.join(', ')}.`);
  }
  const withWal = res.rows.filter((r) => r.wal);
  if (withWal.length) {
    lines.push(``, `WAL per delivered message in the throughput run (pg_stat_wal; a flush is one fdatasync of the WAL, shared by the commits waiting at that moment):`, ``);
    for (const r of withWal) lines.push(`- ${r.system}: ${f0(r.wal!.bytes)} bytes, ${r.wal!.records.toFixed(1)} records, ${r.wal!.syncs.toFixed(2)} flushes (${(1 / Math.max(1e-9, r.wal!.syncs)).toFixed(1)} messages per flush).`);
  }
  const withTop = res.rows.filter((r) => r.top?.length);
  if (withTop.length) {
    lines.push(``, `Where PostgreSQL's time goes (pg_stat_statements, throughput run, top statements by execution time in the system's database):`, ``, `| system | statement | calls | execution ms | share of execution | planning ms |`, `| --- | --- | ---: | ---: | ---: | ---: |`);
    for (const r of withTop) {
      for (const t of r.top!) lines.push(`| ${r.system} | \`${t.query.replace(/\|/g, '/').replace(/`/g, "'")}\` | ${t.calls} | ${t.totalMs.toFixed(0)} | ${(t.share * 100).toFixed(0)}% | ${t.planMs.toFixed(0)} |`);
    }
  }
  lines.push(``);
  return lines;
}

/** One side of {@link benchPostgresAb}: a name and the checkout whose `bin/svc.js` runs. */
export interface PgAbVariant {
  name: string;
  root: string;
}

/**
 * Interleaved A/B of svc's PostgreSQL store, one node (`npm run bench:queue -- --pg-ab`, with
 * `BENCH_AB_ROOT=<checkout>` as A and this checkout as B): one cluster; `repeat` rounds, in each
 * both variants run the throughput part of {@link measure} (warm-up, then `opts.n` messages from
 * 64 publishers) on a fresh database each, the first of the round swapped every round (`lib/ab.ts`).
 * Prints per round and returns the markdown section: medians (min-max) and paired ratios B/A of
 * delivered msg/s, svc CPU, PostgreSQL CPU and WAL per message, and the top statements of each
 * variant's last round per delivered message (execution µs, rows, WAL bytes).
 */
export async function benchPostgresAb(opts: PgOptions, ab: [PgAbVariant, PgAbVariant], repeat: number): Promise<string[]> {
  installCleanupHandlers();
  const { abOrder, abRatios, fmtSpread } = await import('./lib/ab.js');
  const loadAtStart = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  const pg = await startBenchPostgres();
  const runs = new Map<string, PgRow[]>(ab.map((v) => [v.name, []]));
  try {
    for (let round = 0; round < repeat; round++) {
      for (const v of abOrder(round, ab[0], ab[1])) {
        const db = `ab${round}_${ab.indexOf(v)}`;
        const url = await pg.newDatabase(db);
        const sys = await svcSystem(1, url, opts.sink, v.root);
        if (typeof sys === 'string') throw new Error(`${v.name}: ${sys}`);
        try {
          const row = { system: v.name, setup: '', ...(await measure(sys, pg, db, { ...opts, secs: 0 })) };
          runs.get(v.name)!.push(row);
          process.stderr.write(
            `[pg-ab] round ${round + 1} ${v.name}: ${f0(row.delivered)} msg/s, svc ${f0(row.cpuSys)} µs/msg, postgres ${f0(row.cpuPg)} µs/msg, WAL ${f0(row.wal?.bytes)} B/msg, load ${os.loadavg()[0].toFixed(1)}\n`,
          );
        } finally {
          await sys.close();
        }
      }
    }
  } finally {
    pg.stop();
  }
  const [a, b] = ab.map((v) => runs.get(v.name)!);
  const cell = (get: (r: PgRow) => number) => {
    const x = abRatios(a.map(get), b.map(get));
    return `${fmtSpread(a.map(get))} | ${fmtSpread(b.map(get))} | ${x.paired}`;
  };
  const lines = [
    `## Queue on PostgreSQL: ${ab[0].name} vs ${ab[1].name} (interleaved)`,
    ``,
    `${new Date().toISOString()}, ${os.cpus().length} CPUs, Node ${process.version}, PostgreSQL ${pg.version}, load average at start ${loadAtStart} / end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}. ` +
      `One svc node per variant on a fresh database of one bench cluster (fsync=on, synchronous_commit=on), ${opts.n} messages from 64 publishers after a 2,000-message warm-up; ${repeat} rounds, the two alternating. ` +
      `Cells: median (min-max) over the rounds; paired = median (min-max) of the per-round ratio B/A. CPU from /proc per delivered message.`,
    ``,
    `| per delivered message | A: ${ab[0].name} | B: ${ab[1].name} | B/A (paired) |`,
    `| --- | ---: | ---: | ---: |`,
    `| delivered msg/s | ${cell((r) => r.delivered!)} |`,
    `| svc CPU µs | ${cell((r) => r.cpuSys!)} |`,
    `| PostgreSQL CPU µs | ${cell((r) => r.cpuPg!)} |`,
    `| bench process CPU µs | ${cell((r) => r.cpuLoad!)} |`,
    `| WAL bytes | ${cell((r) => r.wal!.bytes)} |`,
    `| WAL flushes | ${cell((r) => r.wal!.syncs * 1000)} (×1000) |`,
    ``,
    `Top statements of each variant's last round, per delivered message (pg_stat_statements):`,
    ``,
    `| variant | statement | calls | exec µs/msg | plan µs/msg | rows/msg | WAL B/msg | share |`,
    `| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |`,
  ];
  for (const [v, rs] of [[ab[0], a], [ab[1], b]] as const) {
    const last = rs[rs.length - 1];
    const per = (x: number) => x / opts.n;
    for (const t of last?.top ?? []) {
      lines.push(`| ${v.name} | \`${t.query.replace(/\|/g, '/').replace(/`/g, "'")}\` | ${t.calls} | ${(per(t.totalMs) * 1000).toFixed(1)} | ${(per(t.planMs) * 1000).toFixed(1)} | ${per(t.rows).toFixed(2)} | ${f0(per(t.walBytes))} | ${(t.share * 100).toFixed(0)}% |`);
    }
  }
  lines.push(``);
  return lines;
}

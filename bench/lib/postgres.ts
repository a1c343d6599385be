/**
 * A throw-away PostgreSQL cluster for the bench scripts, and CPU accounting of its processes.
 *
 * {@link startBenchPostgres}: `initdb` into a `mkdtemp` directory, `pg_ctl start` on a free
 * loopback port (unix socket in the same directory), password (SCRAM) auth for TCP, the same way
 * `test/helpers/postgres.ts` starts one for the tests (binaries from `postgresBinDir()` there;
 * run as user `postgres` when the bench runs as root, since PostgreSQL refuses root). Durable as
 * a production server: `fsync=on`, `synchronous_commit=on` (a COMMIT returns after its WAL flush),
 * `full_page_writes=on`, all PostgreSQL 15 defaults, stated explicitly. Other settings:
 * `max_connections=300` (svc nodes, peers and publishers at once), `shared_buffers=128MB`,
 * `pg_stat_statements` preloaded (where the database time goes, {@link topStatements}).
 * `stop()` stops the server (`-m fast`) and removes the directory; a process exit does too.
 *
 * {@link clusterCpuMs}: user+system CPU (ms) of the postmaster and all its children
 * (`/proc/<pid>/stat`, 100 Hz ticks), including children that exited and were reaped by the
 * postmaster (its `cutime`/`cstime`), so short-lived backends are counted too.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { postgresBinDir, runPg, withPg } from '../../test/helpers/postgres.js';

export { withPg };

const asRoot = process.getuid?.() === 0;
import { freePort } from './proc.js';

export interface BenchPostgres {
  /** URL of the maintenance database `postgres` (user `svc`, SCRAM password). */
  adminUrl: string;
  /** PID of the postmaster (first line of `postmaster.pid`). */
  pid: number;
  /** PostgreSQL server version (`SHOW server_version`). */
  version: string;
  /** Creates an empty database `name` and returns its URL. */
  newDatabase(name: string): Promise<string>;
  /** Stops the server and removes its directory. Idempotent. */
  stop(): void;
}

const USER = 'svc';
const PASSWORD = 'svc-bench-password';
/** Starts the bench's own cluster (module doc). @throws Error when the binaries are missing or it does not start. */
export async function startBenchPostgres(): Promise<BenchPostgres> {
  const bin = postgresBinDir();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-pg-'));
  const data = path.join(dir, 'data');
  const pwfile = path.join(dir, 'pw');
  fs.writeFileSync(pwfile, PASSWORD + '\n');
  if (asRoot) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', stop);
    try {
      runPg(path.join(bin, 'pg_ctl'), ['stop', '-m', 'fast', '-w', '-D', data]);
    } catch {
      /* not running */
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stop);
  try {
    runPg(path.join(bin, 'initdb'), ['-D', data, '-U', USER, `--pwfile=${pwfile}`, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-instructions']);
    const port = await freePort();
    const settings = {
      listen_addresses: '127.0.0.1',
      max_connections: '300',
      shared_buffers: '128MB',
      fsync: 'on',
      synchronous_commit: 'on',
      full_page_writes: 'on',
      shared_preload_libraries: 'pg_stat_statements',
      'pg_stat_statements.track': 'top',
      'pg_stat_statements.track_planning': 'on',
    };
    const opts = [`-p ${port}`, `-k ${dir}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ');
    runPg(path.join(bin, 'pg_ctl'), ['start', '-w', '-t', '120', '-D', data, '-l', path.join(dir, 'log'), '-o', opts]);
    const pid = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const adminUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
    const version = await withPg(adminUrl, async (c) => (await c.query<{ server_version: string }>('SHOW server_version')).rows[0].server_version);
    return {
      adminUrl,
      pid,
      version,
      async newDatabase(name) {
        await withPg(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`));
        const u = new URL(adminUrl);
        u.pathname = `/${name}`;
        await withPg(u.toString(), (c) => c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements'));
        return u.toString();
      },
      stop,
    };
  } catch (err) {
    stop();
    throw err;
  }
}

/** utime+stime (and, with `children`, cutime+cstime) of `/proc/<pid>/stat` in ms; 0 when it is gone. */
function statMs(pid: number, children: boolean): number {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 0;
  }
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields after the command: [0]=state (field 3) ... [11]=utime (14), [12]=stime, [13]=cutime, [14]=cstime
  const ticks = Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0);
  return (ticks * 1000) / 100;
}

/** Parent pid of every process (`/proc/<pid>/stat` field 4). */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      out.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/**
 * CPU ms used so far by the process tree under each of `roots` (the roots with their reaped
 * children's time, plus every live descendant). Summed over all roots.
 */
export function treeCpuMs(roots: number[]): number {
  const pp = parents();
  let total = 0;
  const seen = new Set<number>();
  const walk = (pid: number) => {
    if (seen.has(pid)) return;
    seen.add(pid);
    total += statMs(pid, true); // a live descendant's own reaped children are in its cutime
    for (const [child, parent] of pp) if (parent === pid) walk(child);
  };
  for (const r of roots) walk(r);
  return total;
}

/** CPU ms used so far by the PostgreSQL cluster whose postmaster is `pid` (module doc). */
export function clusterCpuMs(pid: number): number {
  return treeCpuMs([pid]);
}

/** One row of {@link topStatements}. */
export interface StatementTime {
  query: string;
  calls: number;
  /** Total execution time, ms. */
  totalMs: number;
  /** Total planning time, ms (`track_planning`; a statement prepared once is planned rarely). */
  planMs: number;
  /** Share of all statements' execution time in this database, 0..1. */
  share: number;
  /** Rows the statement returned or changed, summed over its calls. */
  rows: number;
  /** WAL bytes the statement generated, summed over its calls. */
  walBytes: number;
}

/** Empties `pg_stat_statements` (all databases) and the cluster's WAL counters (`pg_stat_wal`). */
export async function resetStatements(adminUrl: string): Promise<void> {
  await withPg(adminUrl, (c) => c.query(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset(); SELECT pg_stat_reset_shared('wal')`));
}

/** WAL written since the last {@link resetStatements} (`pg_stat_wal`, whole cluster). */
export interface WalStats {
  /** Bytes of WAL generated. */
  bytes: number;
  /** WAL records generated. */
  records: number;
  /** WAL flushes to disk (`wal_sync`: one fsync/fdatasync each; concurrent commits share one). */
  syncs: number;
}

/** Reads {@link WalStats}. */
export async function walStats(adminUrl: string): Promise<WalStats> {
  return withPg(adminUrl, async (c) => {
    const r = (await c.query<{ b: string; r: string; s: string }>('SELECT wal_bytes AS b, wal_records AS r, wal_sync AS s FROM pg_stat_wal')).rows[0];
    return { bytes: Number(r.b), records: Number(r.r), syncs: Number(r.s) };
  });
}

/**
 * The `limit` statements with the most execution time in database `dbName` since the last
 * {@link resetStatements}, query text shortened to one line of at most 110 characters.
 */
export async function topStatements(adminUrl: string, dbName: string, limit = 6): Promise<StatementTime[]> {
  return withPg(adminUrl, async (c) => {
    const r = await c.query<{ query: string; calls: string; total: number; plan: number; share: number; rows: string; wal: string }>(
      `SELECT s.query, s.calls, s.total_exec_time AS total, s.total_plan_time AS plan, s.total_exec_time / NULLIF(sum(s.total_exec_time) OVER (), 0) AS share,
              s.rows, s.wal_bytes AS wal
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE d.datname = $1 ORDER BY s.total_exec_time DESC LIMIT $2`,
      [dbName, limit],
    );
    return r.rows.map((x) => ({ query: x.query.replace(/\s+/g, ' ').trim().slice(0, 110), calls: Number(x.calls), totalMs: Number(x.total), planMs: Number(x.plan), share: Number(x.share ?? 0), rows: Number(x.rows), walBytes: Number(x.wal) }));
  });
}

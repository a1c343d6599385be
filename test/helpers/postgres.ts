/**
 * Test helper: a real PostgreSQL server for a test file.
 *
 * - With `SVC_TEST_DATABASE_URL` set (e.g. `postgres://svc:pw@127.0.0.1:5432/postgres`), that
 *   server is used: every {@link TestPostgres.newDatabase} creates a fresh database on it (the
 *   role needs CREATEDB) and drops it at {@link TestPostgres.stop}.
 * - Otherwise a throw-away cluster is made: `initdb` into a `mkdtemp` directory, `pg_ctl start`
 *   on a free loopback port (unix socket in the same directory), password (SCRAM) auth for TCP,
 *   `fsync` on (the queue's durability is what is being tested). `stop()` stops it (`-m
 *   immediate`) and removes the directory; a process exit stops it too. The directory is named
 *   after the test process (`svc-pg-<pid>-*`), so a later start removes the clusters of test
 *   processes that were killed before they could ({@link reapStaleClusters}).
 *
 * The binaries come from `SVC_TEST_PG_BINDIR`, else the newest `/usr/lib/postgresql/<ver>/bin`
 * (Debian's `postgresql` package, installed by `scripts/install-deps.sh`; not on PATH), else
 * `pg_config --bindir`. PostgreSQL refuses to run as root: when the test runs as uid 0 the
 * server runs as user `postgres` (`runuser`), with the temp directory chowned to it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { alive } from '../../src/data-dir.js';

export interface TestPostgres {
  /** URL of the maintenance database (`postgres`) with the test role's password. */
  adminUrl: string;
  /** A new empty database; returns its URL. */
  newDatabase(prefix?: string): Promise<string>;
  /** Stops the server abruptly (`-m immediate`, like a crash); only for an own cluster. */
  kill(): void;
  /** Starts it again after {@link kill} (same port, same data). */
  start(): void;
  /** True when the cluster is this helper's own (kill/start allowed). */
  own: boolean;
  /** Drops the databases made here (external server) or stops and removes the cluster. */
  stop(): Promise<void>;
}

const USER = 'svc';
const PASSWORD = 'svc-test-password';

/** The directory holding initdb/pg_ctl/postgres. @throws Error when none is found. */
export function postgresBinDir(): string {
  const fromEnv = process.env.SVC_TEST_PG_BINDIR;
  if (fromEnv) return fromEnv;
  const root = '/usr/lib/postgresql';
  if (fs.existsSync(root)) {
    const versions = fs
      .readdirSync(root)
      .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length) return path.join(root, versions[0], 'bin');
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (fs.existsSync(path.join(dir, 'initdb'))) return dir;
  } catch {
    /* not installed */
  }
  throw new Error('PostgreSQL server binaries not found (install the postgresql package: scripts/install-deps.sh, or set SVC_TEST_PG_BINDIR)');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const asRoot = process.getuid?.() === 0;

/** Runs a PostgreSQL binary (as user postgres when we are root); throws with its output on failure. */
export function runPg(bin: string, args: string[]): void {
  // runuser lives in /usr/sbin, which a non-login root shell's PATH may lack
  const runuser = fs.existsSync('/usr/sbin/runuser') ? '/usr/sbin/runuser' : 'runuser';
  const [cmd, argv] = asRoot ? [runuser, ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`${path.basename(bin)} failed (${r.error?.message ?? r.status}): ${r.stdout}\n${r.stderr}`);
}

/** Runs `fn` with one connection to `url`, closed afterwards. */
export async function withPg<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

let dbCounter = 0;

/** Prefix of the clusters' temp directories: `svc-pg-<pid of the test process>-<random>`. */
const DIR_PREFIX = 'svc-pg-';

/**
 * Removes the clusters of earlier test processes that were killed before they could stop theirs
 * (SIGKILL, a crash, a timeout): every `svc-pg-<pid>-*` directory in the temp dir whose test
 * process `<pid>` is gone — its postmaster, if still running, is stopped first (`-m immediate`).
 * A directory of the older `svc-pg-<random>` form is removed only when no postmaster runs in it
 * and it is older than an hour (it may be a concurrent run's initdb in progress otherwise).
 * Best effort: failures are ignored. Returns the directories removed.
 */
export function reapStaleClusters(bin: string, tmp = os.tmpdir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(tmp).filter((n) => n.startsWith(DIR_PREFIX));
  } catch {
    return removed;
  }
  for (const name of names) {
    const dir = path.join(tmp, name);
    try {
      const owner = /^svc-pg-(\d+)-/.exec(name);
      const pidFile = path.join(dir, 'data', 'postmaster.pid');
      const postmaster = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]) : undefined;
      const running = postmaster !== undefined && postmaster > 0 && alive(postmaster);
      if (owner) {
        if (alive(Number(owner[1]))) continue;
        if (running) runPg(path.join(bin, 'pg_ctl'), ['stop', '-m', 'immediate', '-D', path.join(dir, 'data')]);
      } else if (!/^svc-pg-[A-Za-z0-9]{6}$/.test(name) || running || Date.now() - fs.statSync(dir).mtimeMs < 3_600_000) continue;
      fs.rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      /* another process removed it, or it is not ours to stop: leave it */
    }
  }
  return removed;
}

/**
 * Starts (or attaches to) a PostgreSQL server for tests. `own`: always a throw-away cluster (tests
 * that stop and restart the server), whatever `SVC_TEST_DATABASE_URL` says.
 */
export async function startTestPostgres(opts: { own?: boolean } = {}): Promise<TestPostgres> {
  const made: string[] = [];
  const external = opts.own ? undefined : process.env.SVC_TEST_DATABASE_URL;
  let own = false;
  let adminUrl: string;
  let killFn: () => void = () => {
    throw new Error('kill() needs the helper’s own cluster (SVC_TEST_DATABASE_URL is set)');
  };
  let startFn = killFn;
  let cleanup: () => void = () => undefined;

  if (external) {
    adminUrl = external;
  } else {
    own = true;
    const bin = postgresBinDir();
    reapStaleClusters(bin);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${DIR_PREFIX}${process.pid}-`));
    const data = path.join(dir, 'data');
    const pwfile = path.join(dir, 'pw');
    fs.writeFileSync(pwfile, PASSWORD + '\n');
    if (asRoot) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
    runPg(path.join(bin, 'initdb'), ['-D', data, '-U', USER, `--pwfile=${pwfile}`, '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-instructions']);
    const port = await freePort();
    const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=32MB`;
    const pgctl = path.join(bin, 'pg_ctl');
    startFn = () => runPg(pgctl, ['start', '-w', '-t', '120', '-D', data, '-l', path.join(dir, 'log'), '-o', opts]);
    killFn = () => runPg(pgctl, ['stop', '-m', 'immediate', '-D', data]);
    startFn();
    let stopped = false;
    const onExit = () => {
      if (stopped) return;
      stopped = true;
      try {
        killFn();
      } catch {
        /* already down */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    };
    process.once('exit', onExit);
    cleanup = () => {
      process.removeListener('exit', onExit);
      onExit();
    };
    adminUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  }

  return {
    adminUrl,
    own,
    async newDatabase(prefix = 'svc_test') {
      const name = `${prefix}_${process.pid}_${++dbCounter}_${Date.now().toString(36)}`;
      await withPg(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`));
      made.push(name);
      const u = new URL(adminUrl);
      u.pathname = `/${name}`;
      return u.toString();
    },
    kill: () => killFn(),
    start: () => startFn(),
    async stop() {
      if (external) {
        await withPg(adminUrl, async (c) => {
          for (const name of made) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
        }).catch(() => undefined);
      }
      cleanup();
    },
  };
}

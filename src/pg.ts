/**
 * PostgreSQL plumbing shared by the areas that can keep their state in PostgreSQL (the queue's
 * `SVC_QUEUE_DATABASE_URL`, the vector area's `SVC_VECTOR_DATABASE_URL`): pools and clients with
 * the same connection settings, versioned migrations under an advisory lock, transactions, and
 * start-up errors that name the variable and never the password.
 *
 * - The URL is `postgres://` or `postgresql://` (shape checked by `config.ts`
 *   `databaseUrlProblem`); parts it leaves out (host, user, password, database, `sslmode` as a
 *   query parameter) fall back to libpq's `PG*` environment variables, which node-postgres reads.
 * - Migrations: numbered files `NNNN_name.sql` in an area's directory, applied in order at start,
 *   each in its own transaction, while holding a session advisory lock so nodes starting together
 *   apply them once; the version lives in the area's version table. A database whose version is
 *   above the newest migration shipped (written by a newer svc) is refused.
 * - Errors: {@link PgStartupError} (a configuration fault: `svc` exits with code 2).
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { ConfigError } from './config.js';

/**
 * A start-up failure of a PostgreSQL store (a configuration fault: `svc` exits with code 2); the
 * message names the variable and is safe to print (no password).
 */
export class PgStartupError extends ConfigError {
  constructor(problem: string) {
    super([problem]);
    this.name = 'PgStartupError';
  }
}

/** Column types read as numbers: int8 (BIGINT/BIGSERIAL; every value svc stores is below 2^53). */
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** `url` with its password replaced by `***` (for messages and logs). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

export interface PgPoolOptions {
  /** Most connections of this node (default 10). */
  max?: number;
  /** Schema of the area's tables (search_path of every connection; default `public`). */
  schema?: string;
  /** Name shown in pg_stat_activity. */
  applicationName: string;
  /**
   * Client-side limit of one statement (ms; default none): a statement without an answer by then
   * fails and its connection is not reused — what bounds a write when the network drops the
   * server's answers silently (TCP would take minutes to notice).
   */
  queryTimeoutMs?: number;
  /** Further session settings of every connection (`-c name=value` at connect), e.g. `{ random_page_cost: '1.1' }`. */
  settings?: Record<string, string>;
}

/**
 * Server-side end of a session left idle inside a transaction (ms). svc sends a transaction's
 * statements back to back, so only a node cut off mid-transaction (a network partition: the server
 * does not see it go) leaves one; without a limit its locks would block every other node until
 * TCP gives up on it.
 */
const IDLE_IN_TRANSACTION_MS = 10_000;

/** Settings of every svc connection: search_path, the idle-in-transaction limit, TCP keepalive on both ends. */
function connectionSettings(url: string, schema: string, applicationName: string, settings: Record<string, string> = {}) {
  const extra = Object.entries(settings).map(([k, v]) => ` -c ${k}=${v}`).join('');
  return {
    connectionString: url,
    types,
    application_name: applicationName,
    // server-side keepalive too: a session of a node cut off by a partition (the server sees no
    // close) ends after about 10 + 3 x 5 s of silence, with its locks
    options: `-c search_path=${schema} -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_MS} -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3${extra}`,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
}

/** A pool on `url` with int8 read as numbers. Nothing is connected yet. */
export function createPgPool(url: string, opts: PgPoolOptions): pg.Pool {
  return new pg.Pool({
    ...connectionSettings(url, opts.schema ?? 'public', opts.applicationName, opts.settings),
    max: opts.max ?? 10,
    idleTimeoutMillis: 30_000,
    ...(opts.queryTimeoutMs ? { query_timeout: opts.queryTimeoutMs } : {}),
  });
}

/** A standalone client (a LISTEN connection) with the same settings as {@link createPgPool}. */
export function createPgClient(url: string, schema: string, applicationName: string): pg.Client {
  return new pg.Client(connectionSettings(url, schema, applicationName));
}

/**
 * A `LISTEN` connection kept open for a store: opened by {@link PgListener.start}, re-opened one
 * second after it fails or ends, until {@link PgListener.close}. After each (re)connect it runs
 * `LISTEN` on every channel, then `onConnect(client)`: notifications sent while the connection was
 * down are lost, so that is where a store re-reads what it follows.
 */
export class PgListener {
  private client: pg.Client | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Settles once the latest connection attempt listens and ran `onConnect`, or failed. */
  ready: Promise<void> = Promise.resolve();

  constructor(
    private readonly open: () => pg.Client,
    private readonly channels: readonly string[],
    private readonly onNotification: (n: pg.Notification) => void,
    private readonly onConnect: (client: pg.Client) => Promise<void> | void = () => undefined,
  ) {}

  /** The connection while it is open (e.g. to hold session advisory locks on it). */
  get current(): pg.Client | undefined {
    return this.client;
  }

  /** Opens the connection (no-op while one is open or after close). */
  start(): void {
    if (this.closed || this.client) return;
    const c = this.open();
    this.client = c;
    const retry = () => {
      if (this.client !== c) return;
      this.client = undefined;
      c.end().catch(() => undefined);
      if (this.closed) return;
      this.retryTimer = setTimeout(() => this.start(), 1000);
      this.retryTimer.unref();
    };
    c.on('error', retry);
    c.on('end', retry);
    c.on('notification', this.onNotification);
    this.ready = c
      .connect()
      .then(async () => {
        for (const channel of this.channels) await c.query(`LISTEN ${channel}`);
        await this.onConnect(c);
      })
      .catch(retry);
  }

  /** Ends the connection for good. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }
}

/** Why a connection attempt failed, in words, with the password removed. */
export function describePgError(err: unknown, password: string | undefined): string {
  const e = err as { code?: string; message?: string };
  let msg = e.message ?? String(err);
  if (e.code === '28P01' || e.code === '28000') msg = `authentication failed (${msg})`;
  else if (e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'ETIMEDOUT' || e.code === 'EHOSTUNREACH') msg = `server unreachable (${msg})`;
  else if (e.code === '3D000') msg = `database does not exist (${msg})`;
  if (password) msg = msg.split(password).join('***');
  return msg;
}

/** The password of `url` (or `PGPASSWORD`), to be removed from messages. */
export function urlPassword(url: string): string | undefined {
  try {
    return decodeURIComponent(new URL(url).password) || process.env.PGPASSWORD;
  } catch {
    return process.env.PGPASSWORD; // the shape is checked by config.ts databaseUrlProblem
  }
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/**
 * The numbered migration files `NNNN_name.sql` of `dir`, ordered by version. A gap is tolerated
 * (two migrations written in parallel land in any order during development), a duplicate is not.
 * @throws Error naming `what` on a duplicate version.
 */
export function loadMigrationFiles(dir: string, what: string): Migration[] {
  const out: Migration[] = [];
  for (const f of fs.readdirSync(dir).sort()) {
    const m = /^(\d{4})_([\w-]+)\.sql$/.exec(f);
    if (!m) continue;
    out.push({ version: Number(m[1]), name: m[2], sql: fs.readFileSync(path.join(dir, f), 'utf8') });
  }
  out.forEach((mig, i) => {
    if (i > 0 && mig.version <= out[i - 1].version) throw new Error(`${what} migrations: duplicate version ${mig.version} (${mig.name})`);
  });
  return out;
}

/** Where an area's schema lives and how it is versioned. */
export interface PgSchemaPlan {
  /** PostgreSQL schema (a validated lower-case identifier, `config.ts`). */
  schema: string;
  /** The variable named in start-up errors (`SVC_QUEUE_DATABASE_URL`, ...). */
  variable: string;
  /** Directory of the numbered migration files. */
  migrationsDir: string;
  /** Table holding the applied versions (`svc_queue_schema`, ...). */
  versionTable: string;
  /** Key of the advisory lock held while migrating (a constant shared by every node of the area). */
  lock: number;
  /** Area named in messages (`queue`, `vector`). */
  area: string;
}

/**
 * Connects once (checking URL, reachability and credentials) and applies the migrations of
 * `plan`. Returns the schema versions [from, to].
 * @throws PgStartupError naming `plan.variable` and the redacted URL (unreachable, wrong password,
 *   newer schema, failed migration).
 */
export async function preparePgSchema(pool: pg.Pool, url: string, plan: PgSchemaPlan): Promise<[number, number]> {
  const password = urlPassword(url);
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw new PgStartupError(`${plan.variable} (${redactUrl(url)}): cannot connect: ${describePgError(err, password)}`);
  }
  const lost = () => undefined; // reported by the failing statement instead (see inTransaction)
  client.on('error', lost);
  try {
    return await migrate(client, plan);
  } catch (err) {
    if (err instanceof PgStartupError) throw err;
    throw new PgStartupError(`${plan.variable} (${redactUrl(url)}): schema migration failed: ${describePgError(err, password)}`);
  } finally {
    client.off('error', lost);
    client.release();
  }
}

/** Applies the pending migrations of `plan` under its advisory lock. */
async function migrate(c: pg.PoolClient, plan: PgSchemaPlan): Promise<[number, number]> {
  const migrations = loadMigrationFiles(plan.migrationsDir, plan.area);
  const latest = migrations.length ? migrations[migrations.length - 1].version : 0;
  await c.query('SELECT pg_advisory_lock($1)', [plan.lock]);
  try {
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${plan.schema}`); // a validated identifier (config)
    await c.query(`CREATE TABLE IF NOT EXISTS ${plan.versionTable} (version INTEGER NOT NULL, applied_at BIGINT NOT NULL)`);
    const r = await c.query<{ v: number | null }>(`SELECT MAX(version) AS v FROM ${plan.versionTable}`);
    const current = r.rows[0].v ?? 0;
    if (current > latest) {
      throw new PgStartupError(`${plan.area} database schema version ${current} is newer than this svc supports (${latest}); upgrade svc`);
    }
    for (const mig of migrations.filter((m) => m.version > current)) {
      await c.query('BEGIN');
      try {
        await c.query(mig.sql);
        await c.query(`INSERT INTO ${plan.versionTable} (version, applied_at) VALUES ($1, $2)`, [mig.version, Date.now()]);
        await c.query('COMMIT');
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    }
    return [current, latest];
  } finally {
    await c.query('SELECT pg_advisory_unlock($1)', [plan.lock]).catch(() => undefined);
  }
}

/**
 * Runs `fn` on a connection of `pool` and releases it, dropped when it failed (which also ends its
 * session locks and transactions; a COPY that failed may have left it mid-stream). `failed()`
 * tells whether the connection was lost meanwhile. Unlike {@link inTransaction}, a connection
 * whose `fn` threw is never reused (a COPY that failed may have left it mid-stream).
 * @throws what `fn` throws.
 */
export async function withConnection<T>(pool: pg.Pool, fn: (c: pg.PoolClient, failed: () => Error | undefined) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  let broken: Error | undefined;
  const lost = (err: Error) => (broken = err);
  c.on('error', lost);
  try {
    return await fn(c, () => broken);
  } catch (err) {
    broken ??= err as Error;
    throw err;
  } finally {
    c.off('error', lost);
    // a connection that failed is dropped (which also ends its session locks and transactions)
    c.release(broken);
  }
}

/**
 * Runs `fn` in a transaction on a pooled connection: COMMIT when it resolves, ROLLBACK when it
 * throws (the error is rethrown). A connection lost meanwhile is not reused.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  let broken: Error | undefined;
  // A connection lost between two statements is reported as an 'error' event on the checked-out
  // client (the pool only listens on idle ones): without a listener it would crash the process.
  // The next statement fails with the same error, which is what the caller sees.
  const lost = (err: Error) => (broken = err);
  c.on('error', lost);
  try {
    await c.query('BEGIN');
    const v = await fn(c);
    await c.query('COMMIT');
    return v;
  } catch (err) {
    await c.query('ROLLBACK').catch((e: Error) => (broken = e));
    throw err;
  } finally {
    c.off('error', lost);
    c.release(broken);
  }
}

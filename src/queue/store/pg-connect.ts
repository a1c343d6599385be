/**
 * Connecting to the queue's PostgreSQL database (`SVC_QUEUE_DATABASE_URL`) and bringing its schema
 * up to date.
 *
 * - The URL is `postgres://` or `postgresql://`; parts it leaves out (host, user, password,
 *   database, `sslmode` as a query parameter) fall back to libpq's `PG*` environment variables,
 *   which node-postgres reads (`PGHOST`, `PGUSER`, `PGPASSWORD`, ...).
 * - Migrations: numbered files `pg-migrations/NNNN_name.sql`, applied in order at start, each in
 *   its own transaction, while holding a session advisory lock ({@link MIGRATION_LOCK}) so nodes
 *   starting together apply them once; the version lives in `svc_queue_schema`. A database whose
 *   version is above the newest migration here (written by a newer svc) is refused.
 * - Errors: {@link PgStartupError}, whose message names the variable and never the password.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ConfigError } from '../../config.js';
import { loadMigrations } from './migrate.js';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pg-migrations');
/** Key of the advisory lock held while migrating (any constant shared by every node). */
export const MIGRATION_LOCK = 7_316_451_001;

/**
 * A start-up failure of the PostgreSQL store (a configuration fault: `svc` exits with code 2); the
 * message names the variable and is safe to print (no password).
 */
export class PgStartupError extends ConfigError {
  constructor(problem: string) {
    super([problem]);
    this.name = 'PgStartupError';
  }
}

/** Column types read as numbers: int8 (BIGINT/BIGSERIAL; every value here is below 2^53). */
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
  /** Schema of the queue tables (search_path of every connection; default `public`). */
  schema?: string;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
}

/**
 * Server-side end of a session left idle inside a transaction (ms). svc sends a transaction's
 * statements back to back, so only a node cut off mid-transaction (a network partition: the server
 * does not see it go) leaves one; without a limit its locks — the admission lock, row locks —
 * would block every other node until TCP gives up on it.
 */
const IDLE_IN_TRANSACTION_MS = 10_000;

/** Settings of every svc connection: search_path, the idle-in-transaction limit, TCP keepalive on both ends. */
function connectionSettings(url: string, schema: string, applicationName: string) {
  return {
    connectionString: url,
    types,
    application_name: applicationName,
    // server-side keepalive too: a session of a node cut off by a partition (the server sees no
    // close) ends after about 10 + 3 x 5 s of silence, with its locks
    options: `-c search_path=${schema} -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_MS} -c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3`,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
}

/** A pool on `url` with int8 read as numbers. Nothing is connected yet. */
export function createPool(url: string, opts: PgPoolOptions = {}): pg.Pool {
  return new pg.Pool({ ...connectionSettings(url, opts.schema ?? 'public', opts.applicationName ?? 'svc-queue'), max: opts.max ?? 10, idleTimeoutMillis: 30_000 });
}

/** A standalone client (LISTEN connection) with the same settings as {@link createPool}. */
export function createClient(url: string, schema = 'public'): pg.Client {
  return new pg.Client(connectionSettings(url, schema, 'svc-queue-listen'));
}

/** Why a connection attempt failed, in words, with the password removed. */
function describe(err: unknown, password: string | undefined): string {
  const e = err as { code?: string; message?: string };
  let msg = e.message ?? String(err);
  if (e.code === '28P01' || e.code === '28000') msg = `authentication failed (${msg})`;
  else if (e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'ETIMEDOUT' || e.code === 'EHOSTUNREACH') msg = `server unreachable (${msg})`;
  else if (e.code === '3D000') msg = `database does not exist (${msg})`;
  if (password) msg = msg.split(password).join('***');
  return msg;
}

/**
 * Connects once (checking URL, reachability and credentials) and applies the migrations.
 * Returns the schema versions [from, to].
 * @throws PgStartupError naming `variable` and the redacted URL.
 */
export async function preparePgDatabase(pool: pg.Pool, url: string, schema = 'public', variable = 'SVC_QUEUE_DATABASE_URL'): Promise<[number, number]> {
  let password: string | undefined;
  try {
    password = decodeURIComponent(new URL(url).password) || process.env.PGPASSWORD;
  } catch {
    /* checked by databaseUrlProblem */
  }
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw new PgStartupError(`${variable} (${redactUrl(url)}): cannot connect: ${describe(err, password)}`);
  }
  const lost = () => undefined; // reported by the failing statement instead (see inTransaction)
  client.on('error', lost);
  try {
    return await migratePg(client, schema);
  } catch (err) {
    if (err instanceof PgStartupError) throw err;
    throw new PgStartupError(`${variable} (${redactUrl(url)}): schema migration failed: ${describe(err, password)}`);
  } finally {
    client.off('error', lost);
    client.release();
  }
}

/** Applies the pending migrations under the advisory lock. */
async function migratePg(c: pg.PoolClient, schema: string): Promise<[number, number]> {
  const migrations = loadMigrations(DIR);
  const latest = migrations.length ? migrations[migrations.length - 1].version : 0;
  await c.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`); // a validated identifier (config)
    await c.query('CREATE TABLE IF NOT EXISTS svc_queue_schema (version INTEGER NOT NULL, applied_at BIGINT NOT NULL)');
    const r = await c.query<{ v: number | null }>('SELECT MAX(version) AS v FROM svc_queue_schema');
    const current = r.rows[0].v ?? 0;
    if (current > latest) {
      throw new PgStartupError(`queue database schema version ${current} is newer than this svc supports (${latest}); upgrade svc`);
    }
    for (const mig of migrations.filter((m) => m.version > current)) {
      await c.query('BEGIN');
      try {
        await c.query(mig.sql);
        await c.query('INSERT INTO svc_queue_schema (version, applied_at) VALUES ($1, $2)', [mig.version, Date.now()]);
        await c.query('COMMIT');
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    }
    return [current, latest];
  } finally {
    await c.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
  }
}

/**
 * `?` placeholders to PostgreSQL's `$1, $2, ...` (the SQL fragments shared with the SQLite store
 * use `?`; none of them contains a literal question mark). `offset` = placeholders before it.
 */
export function toPgParams(sql: string, offset = 0): string {
  let i = offset;
  return sql.replace(/\?/g, () => `$${++i}`);
}

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
 * - Errors: `PgStartupError` (`src/pg.ts`), whose message names the variable and never the password.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createPgClient, createPgPool, preparePgSchema } from '../../pg.js';

export { PgStartupError, redactUrl } from '../../pg.js';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pg-migrations');
/** Key of the advisory lock held while migrating (any constant shared by every node). */
export const MIGRATION_LOCK = 7_316_451_001;

export interface PgPoolOptions {
  /** Most connections of this node (default 10). */
  max?: number;
  /** Schema of the queue tables (search_path of every connection; default `public`). */
  schema?: string;
  /** Name shown in pg_stat_activity. */
  applicationName?: string;
}

/**
 * `random_page_cost` of the queue's sessions. PostgreSQL's default (4) prices an index probe as
 * a random read from disk; the queue's hot rows and indexes are in shared buffers, and with 4 the
 * planner scanned the whole state table for each outcome batch until it held about 6,000 rows
 * (measured: a 17-row batch by primary key). 1.1 is the usual setting for cached data and SSDs.
 */
export const RANDOM_PAGE_COST = '1.1';

/**
 * A pool on `url` with int8 read as numbers (`src/pg.ts`), every session with
 * {@link RANDOM_PAGE_COST}. Nothing is connected yet.
 */
export function createPool(url: string, opts: PgPoolOptions = {}): pg.Pool {
  return createPgPool(url, { ...opts, applicationName: opts.applicationName ?? 'svc-queue', settings: { random_page_cost: RANDOM_PAGE_COST } });
}

/** A standalone client (LISTEN connection) with the same settings as {@link createPool}. */
export function createClient(url: string, schema = 'public'): pg.Client {
  return createPgClient(url, schema, 'svc-queue-listen');
}

/**
 * Connects once (checking URL, reachability and credentials) and applies the migrations.
 * Returns the schema versions [from, to].
 * @throws PgStartupError naming `variable` and the redacted URL.
 */
export function preparePgDatabase(pool: pg.Pool, url: string, schema = 'public', variable = 'SVC_QUEUE_DATABASE_URL'): Promise<[number, number]> {
  return preparePgSchema(pool, url, { schema, variable, migrationsDir: DIR, versionTable: 'svc_queue_schema', lock: MIGRATION_LOCK, area: 'queue' });
}

/**
 * `?` placeholders to PostgreSQL's `$1, $2, ...` (the SQL fragments shared with the SQLite store
 * use `?`; none of them contains a literal question mark). `offset` = placeholders before it.
 */
export function toPgParams(sql: string, offset = 0): string {
  let i = offset;
  return sql.replace(/\?/g, () => `$${++i}`);
}

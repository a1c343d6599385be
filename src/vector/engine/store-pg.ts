/**
 * The vector area's PostgreSQL store (`SVC_VECTOR_DATABASE_URL`, `SVC_VECTOR_DATABASE_SCHEMA`):
 * the durable source of truth shared by every svc node, each of which keeps the indexes' graphs in
 * memory and serves every index.
 *
 * Tables (`pg-migrations/`, applied under an advisory lock by `src/pg.ts`; a newer schema is
 * refused): `vector_indexes` (definition, dimension, last sequence number, incarnation),
 * `vector_namespaces`, `vector_records` (id, position, sequence number, dense and sparse vector,
 * metadata, data), `vector_changes` (every write, delete, reset and namespace change in sequence
 * order), `vector_credentials` (tokens), `vector_sessions` (resumable queries), `vector_catalogue`
 * (the indexes created through the management API: id, name, creation time),
 * `vector_publications` and `vector_publication_chunks` (one published copy of a node's cache per
 * index, from which joining nodes start: `publication.ts`).
 *
 * How a node uses it:
 * - Local cache: each node keeps its SQLite file (`store.ts`) and graph snapshots in
 *   `SVC_DATA_DIR` as a cache of the database, tagged with the index's `incarnation` (a random id
 *   made when the index row was created in this database). At start ({@link PgIndexLog.syncLocal})
 *   a cache with the same tag is brought up to date by the changes after its sequence number; a
 *   cache of another database (or behind the pruned part of the change sequence) is emptied,
 *   its snapshots deleted, and replaced by the published copy (`vector-index.ts` `open`), or
 *   without a usable one reloaded from `vector_records`.
 * - Writes ({@link PgIndexLog.begin}): one PostgreSQL transaction per group commit, holding the
 *   index's transaction advisory lock; the node first applies the changes it has not seen (so its
 *   counters are the database's), then runs the writes, whose positions, namespace ids and
 *   sequence numbers continue the database's own; the rows and the changes are committed, and
 *   `NOTIFY` tells the other nodes. The commit order is the sequence order (the lock is held until
 *   COMMIT), so a reader of `vector_changes` always sees a gap-free prefix.
 * - Following: `LISTEN` on {@link PgVectorStore.channel} (payload `<index>:<seq>`), with a poll of
 *   every index's sequence number every {@link POLL_MS} as the fallback and as the heartbeat that
 *   readiness uses.
 */
import type pg from 'pg';
import fs from 'node:fs';
import { createPgClient, createPgPool, describePgError, inTransaction, PgListener, PgStartupError, preparePgSchema, redactUrl, urlPassword, withConnection } from '../../pg.js';
import { PgSharedCredentials } from '../../credential-sync.js';
import type { Logger } from '../../logger.js';
import type { IndexDefinition } from '../definitions.js';
import type { ChangeRow, NamespaceRow, VectorStore } from './store.js';
import { download, publish, type PublicationTarget } from './publication.js';
import { copyRows, int8 } from './pg-copy.js';
export { PUBLISH_CHUNK, PUBLISH_LOCK_CLASS } from './publication.js';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pg-migrations');
/** Key of the advisory lock held while migrating. */
export const MIGRATION_LOCK = 7_316_451_101;
/** Class (first key) of the per-index write locks; the second key is `hashtext(index name)`. */
export const WRITE_LOCK_CLASS = 73_164_521;
/** Key of the lock under which nodes register their index definitions. */
export const DEFINITIONS_LOCK = 7_316_451_102;
/** The fallback poll (and readiness heartbeat) period, ms. */
export const POLL_MS = 1000;
/** Changes read per statement while catching up. */
export const CHANGES_PAGE = 5000;
/** Records read per round trip when a node reloads an index whole. */
export const RELOAD_PAGE = 2000;
/**
 * Longest wait for one statement (ms): past it a write answers 503 and its connection is dropped
 * (a database that stopped answering without closing the connection). Above the server's 10 s
 * idle-in-transaction limit, so a write waiting for the lock of a node cut off mid-transaction
 * gets it when the server ends that session.
 */
export const QUERY_TIMEOUT_MS = 15_000;
/** Changes kept per index (older ones are pruned; a node further behind reloads the index whole). */
export const CHANGES_KEPT = 1_000_000;
/**
 * Class (first key) of the per-index fill locks (second key `hashtext(index name)`): each batch of
 * a node's background fill of dense vectors (`vector-index.ts` `fill`) takes the shared form for
 * its statement; a session holding the exclusive form pauses every node's fill of that index
 * (reads of a missing vector on demand do not take it).
 */
export const FILL_LOCK_CLASS = 73_164_523;
/** Local meta key of the cache tag (the index's incarnation in this database). */
export const CACHE_TAG = 'pg_incarnation';
/** Local meta key set while a whole reload runs (a cache, not a file of the SQLite store). */
export const RELOAD_MARK = 'pg_reloading';

/** The notification channel of index changes; `_<schema>` appended outside `public`. */
const CHANGES_CHANNEL = 'svc_vector_changes';
const CREDENTIALS_CHANNEL = 'svc_vector_credentials';

/** What a node needs from the shared store to write and follow one index (`vector-index.ts`). */
export interface SharedLog {
  /**
   * Opens a write transaction holding the index's write lock and returns the changes after
   * `seq` that this node has not applied yet. @throws the database error (unreachable, ...).
   */
  begin(seq: number): Promise<WriteTx>;
  /** Committed changes after `seq`, in order (at most {@link CHANGES_PAGE}). */
  changesSince(seq: number): Promise<ChangeRow[]>;
}

/** An open write transaction of {@link SharedLog.begin}. */
export interface WriteTx {
  changes: ChangeRow[];
  /**
   * Stores `changes` (captured by `store.ts`), the namespaces' position counters `namespaces`,
   * sets the index's sequence number to `seq`, notifies, and commits. @throws when any of it
   * fails (the transaction is rolled back; after a failed COMMIT the outcome is unknown).
   */
  commit(changes: ChangeRow[], namespaces: NamespaceRow[], seq: number): Promise<void>;
  /** Ends the transaction without writing (never throws). */
  rollback(): Promise<void>;
}

/**
 * The INSERT of the records written by the upsert changes `run` (one row per record: the last
 * write wins, as ON CONFLICT may touch a row once per statement) and its parameters; `$1` is the
 * index name, the others are numbered after `offset`.
 */
function upsertStatement(name: string, run: ChangeRow[], offset = 1): [string, unknown[]] {
  const last = new Map<string, ChangeRow>();
  for (const r of run) last.set(`${r.ns}\u0000${r.id}`, r);
  const rows = [...last.values()];
  const p = (i: number) => `$${offset + i}`;
  return [
    `INSERT INTO vector_records (index_name, ns, id, pos, seq, vector, sparse, metadata, data)
     SELECT $1, * FROM unnest(${p(1)}::int[], ${p(2)}::text[], ${p(3)}::bigint[], ${p(4)}::bigint[], ${p(5)}::bytea[], ${p(6)}::bytea[], ${p(7)}::text[], ${p(8)}::text[])
     ON CONFLICT (index_name, ns, id) DO UPDATE SET seq = EXCLUDED.seq, vector = EXCLUDED.vector, sparse = EXCLUDED.sparse,
       metadata = EXCLUDED.metadata, data = EXCLUDED.data`,
    [
      ...(offset === 1 ? [name] : []),
      rows.map((r) => r.ns),
      rows.map((r) => r.id),
      rows.map((r) => r.pos),
      rows.map((r) => r.seq),
      rows.map((r) => r.record!.vector),
      rows.map((r) => r.record!.sparse),
      rows.map((r) => r.record!.metadata),
      rows.map((r) => r.record!.data),
    ],
  ];
}

/** A row of `vector_changes` joined with the record it wrote (when it still holds that write). */
interface ChangeJoin {
  seq: number;
  kind: ChangeRow['kind'];
  ns: number | null;
  id: string | null;
  pos: number | null;
  name: string | null;
  has: boolean;
  vector: Buffer | null;
  sparse: Buffer | null;
  metadata: string | null;
  data: string | null;
}

/**
 * One page of the changes of index `$1` after sequence number `$2` (at most {@link CHANGES_PAGE}),
 * each upsert joined with its record when the record still holds that write (`has`). Exported for
 * the plan checks of the tests (`test/vector/pg-catchup.test.ts`).
 *
 * Its cost is bounded by the page whatever the planner's statistics say (none on a fresh database
 * until autovacuum's first ANALYZE, up to a minute; stale ones while an index grows past them):
 * - the page of changes is cut first (a materialized CTE), then joined: one statement that joins
 *   and then limits may join every change after `$2` and sort them all, wide rows included.
 * - each record is read through the primary key: the first row at or after `($1, ns, id)` in key
 *   order (a row comparison, `LIMIT 1`), matched afterwards. Written as plain equalities, a
 *   planner that expects few rows per index and namespace may read `vector_records_pos` (same
 *   first two columns) and filter every record of the namespace for each change: a follower's
 *   page then cost changes × records, 8-13 s for 2,000 changes against 20,000 records here, with
 *   the follower waiting and its lag growing with the writer's rate. Only the primary key gives
 *   this order, so no other index is cheaper.
 * The rows come in the CTE's order (a nested loop over it); {@link PgIndexLog.changesSince} sorts
 * them anyway (no sort of wide rows in the statement).
 */
export const CHANGES_SQL = `WITH c AS MATERIALIZED (
    SELECT seq, kind, ns, id, pos, name FROM vector_changes WHERE index_name = $1 AND seq > $2 ORDER BY seq LIMIT ${CHANGES_PAGE})
  SELECT c.seq, c.kind, c.ns, c.id, c.pos, c.name, r.seq IS NOT NULL AS has, r.vector, r.sparse, r.metadata, r.data
  FROM c LEFT JOIN LATERAL (
    SELECT r.index_name, r.ns, r.id, r.seq, r.vector, r.sparse, r.metadata, r.data FROM vector_records r
    WHERE c.kind = 'upsert' AND (r.index_name, r.ns, r.id) >= ($1, c.ns, c.id)
    ORDER BY r.index_name, r.ns, r.id LIMIT 1) r
    ON r.index_name = $1 AND r.ns = c.ns AND r.id = c.id AND r.seq = c.seq`;

function toChange(r: ChangeJoin): ChangeRow {
  const c: ChangeRow = { seq: r.seq, kind: r.kind, ns: r.ns, id: r.id, pos: r.pos, name: r.name };
  if (r.kind === 'upsert' && r.has) c.record = { vector: r.vector, sparse: r.sparse, metadata: r.metadata, data: r.data };
  return c;
}

/**
 * What every node of an index must agree on, because the stored records depend on it: type,
 * metric, dimension (as defined; undefined = fixed by the first dense upsert).
 */
function shape(def: IndexDefinition): Partial<IndexDefinition> {
  return { name: def.name, type: def.type, metric: def.metric, dimension: def.dimension };
}

/** A definition (or part of one) as stored and compared: every field, keys sorted. */
function canonical(def: Partial<IndexDefinition>): string {
  const sort = (v: unknown): unknown =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sort(x)]))
      : v;
  return JSON.stringify(sort('hnsw' in def ? { ...def, quantization: def.quantization ?? 'none' } : def));
}

/** The database of every index of this node: pool, LISTEN connection, definitions, tokens, sessions. */
export class PgVectorStore {
  /** NOTIFY channel of this schema's index changes. */
  readonly channel: string;
  readonly credentialsChannel: string;
  /** `Date.now()` of the last statement that reached the database (readiness). */
  lastContact = 0;
  /** Set by {@link close}: a publication being uploaded stops (`PgIndexLog.publish`). */
  closing = false;
  /** `Date.now()` of the last failure logged at level warn ({@link warn}). */
  private warnedAt = 0;
  private readonly listener: PgListener;
  private readonly changeListeners = new Set<(index: string, seq: number) => void>();
  private readonly credentialListeners = new Set<() => void>();
  private credentials: PgSharedCredentials | undefined;

  private constructor(
    readonly pool: pg.Pool,
    url: string,
    readonly schema: string,
    private readonly logger: Logger,
  ) {
    this.channel = schema === 'public' ? CHANGES_CHANNEL : `${CHANGES_CHANNEL}_${schema}`;
    this.credentialsChannel = schema === 'public' ? CREDENTIALS_CHANNEL : `${CREDENTIALS_CHANNEL}_${schema}`;
    // idle connections that fail (the server went away) are dropped by the pool: report, never crash
    pool.on('error', (err) => logger.debug({ err }, 'vector: idle PostgreSQL connection lost'));
    this.listener = new PgListener(
      () => createPgClient(url, schema, 'svc-vector-listen'),
      [this.channel, this.credentialsChannel],
      (n) => {
        if (n.channel === this.credentialsChannel) {
          for (const fn of this.credentialListeners) fn();
          return;
        }
        const payload = n.payload ?? '';
        const at = payload.lastIndexOf(':');
        const seq = Number(payload.slice(at + 1));
        for (const fn of this.changeListeners) fn(payload.slice(0, at), Number.isFinite(seq) ? seq : Infinity);
      },
      () => {
        // changes made while this connection was down were not notified: re-read
        for (const fn of this.credentialListeners) fn();
        for (const fn of this.changeListeners) fn('', Infinity);
      },
    );
  }

  /**
   * Connects, migrates and starts listening.
   * @throws PgStartupError (bad URL, unreachable, wrong password, newer schema) naming
   *   `SVC_VECTOR_DATABASE_URL`, never the password.
   */
  static async open(url: string, schema: string, logger: Logger): Promise<PgVectorStore> {
    const pool = createPgPool(url, { schema, applicationName: 'svc-vector', max: 8, queryTimeoutMs: QUERY_TIMEOUT_MS });
    try {
      await preparePgSchema(pool, url, {
        schema,
        variable: 'SVC_VECTOR_DATABASE_URL',
        migrationsDir: DIR,
        versionTable: 'svc_vector_schema',
        lock: MIGRATION_LOCK,
        area: 'vector',
      });
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    const s = new PgVectorStore(pool, url, schema, logger);
    s.lastContact = Date.now();
    s.listener.start();
    return s;
  }

  /** Runs a statement on the pool, noting the contact. */
  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    const r = await this.pool.query<R>(sql, params);
    this.lastContact = Date.now();
    return r;
  }

  /**
   * Registers this node's index definitions: an index the database does not have is created (with
   * its default namespace), one it has must have the same definition. Returns every index of the
   * database (this node's and the ones other nodes created), `default` first.
   * @throws PgStartupError naming the index and both definitions' differences, nothing changed.
   */
  async registerIndexes(defs: IndexDefinition[]): Promise<IndexDefinition[]> {
    return inTransaction(this.pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [DEFINITIONS_LOCK]);
      const stored = new Map(
        (await c.query<{ name: string; definition: IndexDefinition }>('SELECT name, definition FROM vector_indexes')).rows.map((r) => [r.name, r.definition]),
      );
      const conflicts: string[] = [];
      for (const d of defs) {
        const s = stored.get(d.name);
        if (s && canonical(shape(s)) !== canonical(shape(d))) conflicts.push(`index ${d.name}: this node defines ${canonical(shape(d))}, the database has ${canonical(shape(s))}`);
      }
      if (conflicts.length) {
        throw new PgStartupError(
          `SVC_VECTOR_DATABASE_URL: the index definitions differ from the ones the other nodes created (change SVC_VECTOR_INDEXES / SVC_VECTOR_* to match):\n  - ${conflicts.join('\n  - ')}`,
        );
      }
      // settings of the in-memory structures (HNSW parameters, quantization, embedder) may change
      // at a restart: the database keeps the latest, which nodes that do not define the index use
      for (const d of defs) {
        const s = stored.get(d.name);
        if (!s || canonical(s) === canonical(d)) continue;
        this.logger.warn({ index: d.name, stored: canonical(s), now: canonical(d) }, 'vector: index settings changed (HNSW, quantization or embedder); the database keeps this node\'s');
        await c.query('UPDATE vector_indexes SET definition = $2 WHERE name = $1', [d.name, canonical(d)]);
        stored.set(d.name, JSON.parse(canonical(d)) as IndexDefinition);
      }
      for (const d of defs) {
        if (stored.has(d.name)) continue;
        await c.query(
          `INSERT INTO vector_indexes (name, definition, dimension, incarnation, created_at) VALUES ($1, $2, $3, gen_random_uuid()::text, $4)`,
          [d.name, canonical(d), d.type === 'SPARSE' ? null : (d.dimension ?? null), Date.now()],
        );
        await c.query(`INSERT INTO vector_namespaces (index_name, id, name) VALUES ($1, 1, '')`, [d.name]);
        stored.set(d.name, JSON.parse(canonical(d)) as IndexDefinition);
      }
      this.lastContact = Date.now();
      const out = [...stored.values()];
      return [...out.filter((d) => d.name === 'default'), ...out.filter((d) => d.name !== 'default').sort((a, b) => a.name.localeCompare(b.name))];
    });
  }

  /**
   * The indexes created through the management API (`vector_catalogue`, migration 0002): id, name,
   * creation time (ms) and definition, oldest first.
   */
  async runtimeIndexes(): Promise<{ id: string; name: string; createdAt: number; definition: IndexDefinition }[]> {
    const r = await this.query<{ id: string; name: string; created_at: string; definition: IndexDefinition }>(
      'SELECT c.id, c.name, c.created_at, i.definition FROM vector_catalogue c JOIN vector_indexes i ON i.name = c.id ORDER BY c.created_at, c.id',
    );
    return r.rows.map((x) => ({ id: x.id, name: x.name, createdAt: Number(x.created_at), definition: x.definition }));
  }

  /** Every index token stored (`vector_credentials`: credential name -> value). */
  async storedTokens(): Promise<Map<string, string>> {
    const r = await this.query<{ name: string; value: string }>('SELECT name, value FROM vector_credentials');
    return new Map(r.rows.map((t) => [t.name, t.value]));
  }

  /**
   * Creates index `def.name` (its id) named `name` in one transaction: its catalogue row, its
   * index row with the default namespace, its tokens (`tokens`: credential name -> value); then
   * notifies the other nodes. Names are unique over `taken` (the configured indexes) and the catalogue.
   * @returns false (nothing changed) when the name is taken.
   */
  async createRuntimeIndex(name: string, def: IndexDefinition, createdAt: number, tokens: Map<string, string>, taken: string[]): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [DEFINITIONS_LOCK]);
      if (taken.includes(name) || (await c.query('SELECT 1 FROM vector_catalogue WHERE name = $1', [name])).rowCount) return false;
      await c.query(
        `INSERT INTO vector_indexes (name, definition, dimension, incarnation, created_at) VALUES ($1, $2, $3, gen_random_uuid()::text, $4)`,
        [def.name, canonical(def), def.type === 'SPARSE' ? null : (def.dimension ?? null), createdAt],
      );
      await c.query(`INSERT INTO vector_namespaces (index_name, id, name) VALUES ($1, 1, '')`, [def.name]);
      await c.query('INSERT INTO vector_catalogue (id, name, created_at) VALUES ($1, $2, $3)', [def.name, name, createdAt]);
      for (const [n, v] of tokens) await c.query('INSERT INTO vector_credentials (name, value, updated_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value', [n, v, createdAt]);
      await c.query('SELECT pg_notify($1, $2), pg_notify($3, $4)', [this.credentialsChannel, '', this.channel, `${def.name}:0`]);
      this.lastContact = Date.now();
      return true;
    });
  }

  /** Renames runtime index `id`. @returns false (nothing changed) when `name` is taken. */
  async renameRuntimeIndex(id: string, name: string, taken: string[]): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [DEFINITIONS_LOCK]);
      if (taken.includes(name) || (await c.query('SELECT 1 FROM vector_catalogue WHERE name = $1 AND id <> $2', [name, id])).rowCount) return false;
      await c.query('UPDATE vector_catalogue SET name = $2 WHERE id = $1', [id, name]);
      return true;
    });
  }

  /**
   * Deletes runtime index `id` and everything of it (records, changes, namespaces, resumable
   * queries, tokens, definition, catalogue row) in one transaction, then notifies the other nodes.
   */
  async deleteRuntimeIndex(id: string, tokenNames: string[]): Promise<void> {
    await inTransaction(this.pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [DEFINITIONS_LOCK]);
      // after any write of another node in flight (it holds the index's write lock until COMMIT)
      await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [WRITE_LOCK_CLASS, id]);
      for (const t of ['vector_records', 'vector_changes', 'vector_sessions', 'vector_namespaces', 'vector_publication_chunks', 'vector_publications']) {
        await c.query(`DELETE FROM ${t} WHERE index_name = $1`, [id]);
      }
      await c.query('DELETE FROM vector_credentials WHERE name = ANY($1::text[])', [tokenNames]);
      await c.query('DELETE FROM vector_catalogue WHERE id = $1', [id]);
      await c.query('DELETE FROM vector_indexes WHERE name = $1', [id]);
      await c.query('SELECT pg_notify($1, $2)', [this.channel, `${id}:0`]);
    });
    this.lastContact = Date.now();
  }

  /** The write and follow operations of index `name`. */
  index(name: string): PgIndexLog {
    return new PgIndexLog(this, name);
  }

  /** Every index's sequence number (the poll). */
  async sequences(): Promise<Map<string, number>> {
    const r = await this.query<{ name: string; seq: number }>('SELECT name, seq FROM vector_indexes');
    return new Map(r.rows.map((x) => [x.name, x.seq]));
  }

  /**
   * Deletes changes older than the newest {@link CHANGES_KEPT} of each index (a node further
   * behind reloads that index whole).
   */
  async prune(): Promise<void> {
    await this.query(
      `WITH p AS (UPDATE vector_indexes SET pruned_seq = seq - $1 WHERE seq - $1 > pruned_seq RETURNING name, pruned_seq)
       DELETE FROM vector_changes c USING p WHERE c.index_name = p.name AND c.seq <= p.pruned_seq`,
      [CHANGES_KEPT],
    );
  }

  /** Told `(index, seq)` of every committed change notified on the channel. */
  onChange(fn: (index: string, seq: number) => void): () => void {
    this.changeListeners.add(fn);
    return () => this.changeListeners.delete(fn);
  }

  /** The indexes' tokens shared by every node (`vector_credentials`). */
  sharedCredentials(): PgSharedCredentials {
    return (this.credentials ??= new PgSharedCredentials(this.pool, 'vector_credentials', this.credentialsChannel, (fn) => {
      this.credentialListeners.add(fn);
      return () => this.credentialListeners.delete(fn);
    }));
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.listener.close();
    await this.pool.end().catch(() => undefined);
  }

  /**
   * Logs a failure of a background task (poll, catch-up): at level warn the first time after the
   * database last answered, at debug while it keeps failing (one line a second otherwise).
   */
  warn(err: unknown, what: string): void {
    const level = this.warnedAt >= this.lastContact ? 'debug' : 'warn';
    this.warnedAt = Date.now();
    this.logger[level]({ err: (err as Error)?.message ?? String(err) }, `vector: ${what} (PostgreSQL)`);
  }
}

/**
 * What `svc env` and the banner list from the database without a running area: the indexes
 * created through the management API (id, name, definition) and every index token stored
 * (`vector_credentials`). One read-only session, closed at once; nothing is created or migrated
 * (a database svc never used answers no indexes and no tokens).
 * @throws Error naming `SVC_VECTOR_DATABASE_URL` (never the password) when it cannot be read.
 */
export async function readListing(url: string, schema: string): Promise<{ indexes: { id: string; name: string; definition: IndexDefinition }[]; tokens: Map<string, string> }> {
  const c = createPgClient(url, schema, 'svc-env');
  c.on('error', () => undefined); // reported by the failing statement
  try {
    await c.connect();
    await c.query('SET default_transaction_read_only = on');
    const tables = (await c.query<{ t: string | null; c: string | null }>("SELECT to_regclass('vector_catalogue')::text AS t, to_regclass('vector_credentials')::text AS c")).rows[0];
    const indexes = tables.t
      ? (await c.query<{ id: string; name: string; definition: IndexDefinition }>('SELECT c.id, c.name, i.definition FROM vector_catalogue c JOIN vector_indexes i ON i.name = c.id ORDER BY c.created_at, c.id')).rows
      : [];
    const tokens = tables.c ? (await c.query<{ name: string; value: string }>('SELECT name, value FROM vector_credentials')).rows : [];
    return { indexes, tokens: new Map(tokens.map((t) => [t.name, t.value])) };
  } catch (err) {
    throw new Error(`SVC_VECTOR_DATABASE_URL (${redactUrl(url)}): ${describePgError(err, urlPassword(url))}`);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** One index's rows in the database: writes under its lock, the change sequence, the local cache. */
export class PgIndexLog implements SharedLog {
  constructor(
    private readonly db: PgVectorStore,
    readonly name: string,
  ) {}

  /** Logs a failure of this index's database work (see {@link PgVectorStore.warn}). */
  warn(err: unknown, what: string): void {
    this.db.warn(err, `index ${this.name}: ${what}`);
  }

  async changesSince(seq: number, q: pg.Pool | pg.PoolClient = this.db.pool): Promise<ChangeRow[]> {
    const r = await q.query<ChangeJoin>(CHANGES_SQL, [this.name, seq]);
    this.db.lastContact = Date.now();
    return r.rows.sort((a, b) => a.seq - b.seq).map(toChange);
  }

  async begin(seq: number): Promise<WriteTx> {
    const c = await this.db.pool.connect();
    let broken: Error | undefined;
    const lost = (err: Error) => (broken = err);
    c.on('error', lost);
    let done = false;
    const end = async (sql: 'COMMIT' | 'ROLLBACK') => {
      if (done) return;
      done = true;
      try {
        await c.query(sql);
      } catch (err) {
        broken ??= err as Error;
        if (sql === 'COMMIT') throw err;
      } finally {
        c.off('error', lost);
        c.release(broken);
      }
    };
    try {
      // one round trip (an index name is [A-Za-z0-9_-]{1,64}, definitions.ts: safe as a literal)
      await c.query(`BEGIN; SELECT pg_advisory_xact_lock(${WRITE_LOCK_CLASS}, hashtext('${this.name}'))`);
      const changes: ChangeRow[] = [];
      for (let from = seq; ; ) {
        const page = await this.changesSince(from, c);
        changes.push(...page);
        if (page.length < CHANGES_PAGE) break;
        from = page[page.length - 1].seq;
      }
      return {
        changes,
        commit: async (captured, namespaces, last) => {
          try {
            await this.write(c, captured, namespaces, last);
          } catch (err) {
            await end('ROLLBACK');
            throw err;
          }
          await end('COMMIT');
          this.db.lastContact = Date.now();
        },
        rollback: () => end('ROLLBACK').catch(() => undefined),
      };
    } catch (err) {
      await end('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** The statements of one group commit, in the changes' order (consecutive record writes together). */
  private async write(c: pg.PoolClient, changes: ChangeRow[], namespaces: NamespaceRow[], seq: number): Promise<void> {
    const name = this.name;
    // the common batch, record writes only: one statement with the bookkeeping below
    const upsertsOnly = changes.every((r) => r.kind === 'upsert');
    for (let i = 0; i < changes.length && !upsertsOnly; ) {
      const kind = changes[i].kind;
      let j = i;
      while (j < changes.length && changes[j].kind === kind && (kind === 'upsert' || kind === 'delete')) j++;
      if (j === i) j = i + 1;
      const run = changes.slice(i, j);
      i = j;
      const ch = run[0];
      switch (kind) {
        case 'upsert': {
          const [sql, params] = upsertStatement(name, run);
          await c.query(sql, params);
          break;
        }
        case 'delete':
          await c.query(`DELETE FROM vector_records WHERE index_name = $1 AND (ns, id) IN (SELECT * FROM unnest($2::int[], $3::text[]))`, [
            name,
            run.map((r) => r.ns),
            run.map((r) => r.id),
          ]);
          break;
        case 'create':
          await c.query('INSERT INTO vector_namespaces (index_name, id, name) VALUES ($1, $2, $3)', [name, ch.ns, ch.name]);
          break;
        case 'rename':
          await c.query('UPDATE vector_namespaces SET name = $3 WHERE index_name = $1 AND id = $2', [name, ch.ns, ch.name]);
          break;
        case 'drop':
          await c.query('DELETE FROM vector_records WHERE index_name = $1 AND ns = $2', [name, ch.ns]);
          await c.query('DELETE FROM vector_namespaces WHERE index_name = $1 AND id = $2', [name, ch.ns]);
          break;
        case 'reset':
          await c.query('DELETE FROM vector_records WHERE index_name = $1 AND ns = $2', [name, ch.ns]);
          await c.query('UPDATE vector_namespaces SET next_pos = 0, generation = generation + 1 WHERE index_name = $1 AND id = $2', [name, ch.ns]);
          break;
        case 'dimension':
          await c.query('UPDATE vector_indexes SET dimension = $2 WHERE name = $1', [name, ch.pos]);
          break;
      }
    }
    const [recSql, recParams] = upsertsOnly ? upsertStatement(name, changes, 11) : ['', []];
    await c.query(
      `WITH ch AS (INSERT INTO vector_changes (index_name, seq, kind, ns, id, pos, name)
                   SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::int[], $5::text[], $6::bigint[], $7::text[])),
            np AS (UPDATE vector_namespaces n SET next_pos = v.next_pos FROM unnest($8::int[], $9::bigint[]) v(id, next_pos)
                   WHERE n.index_name = $1 AND n.id = v.id),
            ix AS (UPDATE vector_indexes SET seq = $10 WHERE name = $1 RETURNING 1)${upsertsOnly ? `, rec AS (${recSql})` : ''}
       SELECT pg_notify($11, $1 || ':' || $10::text), (SELECT count(*) FROM ix)::int AS found`,
      [
        name,
        changes.map((r) => r.seq),
        changes.map((r) => r.kind),
        changes.map((r) => r.ns),
        changes.map((r) => r.id),
        changes.map((r) => r.pos),
        changes.map((r) => r.name),
        namespaces.map((n) => n.id),
        namespaces.map((n) => n.next_pos),
        seq,
        this.db.channel,
        ...recParams,
      ],
    ).then((r) => {
      // the index was deleted (through the management API, on another node) before this node dropped it
      if ((r.rows[0] as { found?: number } | undefined)?.found !== 1) throw new Error(`vector index ${name} was deleted`);
    });
  }

  /** This index's row: sequence number, pruned sequence number, incarnation. */
  private async indexRow(): Promise<{ seq: number; pruned_seq: number; incarnation: string }> {
    return (await this.db.query<{ seq: number; pruned_seq: number; incarnation: string }>('SELECT seq, pruned_seq, incarnation FROM vector_indexes WHERE name = $1', [this.name])).rows[0];
  }

  /**
   * Whether the local cache `store` can be brought up to date by the changes after its sequence
   * number (`current`: a cache of this index in this database, not behind the pruned changes) or
   * must be replaced (`stale`). `row`: this index's row (read when absent).
   * @throws PgStartupError when `store` is a file of the SQLite store (svc ran there without
   *   `SVC_VECTOR_DATABASE_URL`): it is never emptied here.
   */
  cacheState(store: VectorStore, snapshotDir: string, row: { seq: number; pruned_seq: number; incarnation: string }): 'current' | 'stale';
  cacheState(store: VectorStore, snapshotDir: string): Promise<'current' | 'stale'>;
  cacheState(store: VectorStore, snapshotDir: string, row?: { seq: number; pruned_seq: number; incarnation: string }): 'current' | 'stale' | Promise<'current' | 'stale'> {
    if (!row) return this.indexRow().then((r) => this.cacheState(store, snapshotDir, r));
    const tag = store.getMeta(CACHE_TAG);
    const localSeq = Number(store.getMeta('seq') ?? 0);
    if (tag === row.incarnation && localSeq >= row.pruned_seq && localSeq <= row.seq && store.getMeta(RELOAD_MARK) === undefined) return 'current';
    if (tag === undefined && store.getMeta(RELOAD_MARK) === undefined && store.hasRecords()) {
      // the file of the SQLite store (svc ran without SVC_VECTOR_DATABASE_URL): never emptied here
      throw new PgStartupError(
        `SVC_VECTOR_DATABASE_URL: ${store.file} holds the records of index ${this.name} from the SQLite store; they are not copied into PostgreSQL and would be replaced by the database's: move the file (and ${snapshotDir}) away before starting with the PostgreSQL store`,
      );
    }
    return 'stale';
  }

  /** This index as `publication.ts` needs it. */
  private get target(): PublicationTarget {
    return { pool: this.db.pool, name: this.name, closing: () => this.db.closing, incarnation: async () => (await this.indexRow()).incarnation, contact: () => (this.db.lastContact = Date.now()) };
  }

  /** Publishes a copy of this node's local cache for joining nodes: `publication.ts` {@link publish}. */
  publish(since: number, minAgeMs: number, stage: Parameters<typeof publish>[3]): ReturnType<typeof publish> {
    return publish(this.target, since, minAgeMs, stage);
  }

  /**
   * Dense vectors of the records of namespace `ns` at positions `from` <= pos < `to` (`positions`:
   * at those positions instead), with the id and sequence number of the write they belong to,
   * read with a binary COPY (`pg-copy.ts`: the vectors as their bytes, not as hex text; positions
   * are integers, written into the statement, the index name as an escaped literal).
   * `pausable`: the statement first takes the shared {@link FILL_LOCK_CLASS} lock of the index (the
   * background fill), held until it ends. Limited to {@link QUERY_TIMEOUT_MS}.
   * @throws the database error (the connection is not reused).
   */
  async vectorsAt(ns: number, at: { from: number; to: number } | { positions: number[] }, pausable = false): Promise<{ id: string; seq: number; pos: number; vector: Buffer }[]> {
    const ints = 'positions' in at ? [ns, ...at.positions] : [ns, at.from, at.to];
    if (!ints.every(Number.isSafeInteger)) throw new Error('vectorsAt: positions must be integers');
    const where = 'positions' in at ? `r.pos = ANY('{${at.positions.join(',')}}'::bigint[])` : `r.pos >= ${at.from} AND r.pos < ${at.to}`;
    const out: { id: string; seq: number; pos: number; vector: Buffer }[] = [];
    await withConnection(this.db.pool, async (c) => {
      const name = c.escapeLiteral(this.name);
      const lock = pausable ? `CROSS JOIN (SELECT pg_advisory_xact_lock_shared(${FILL_LOCK_CLASS}, hashtext(${name}))) l` : '';
      await copyRows(
        c,
        `COPY (SELECT r.id, r.seq, r.pos, r.vector FROM vector_records r ${lock} WHERE r.index_name = ${name} AND r.ns = ${ns} AND ${where} AND r.vector IS NOT NULL) TO STDOUT (FORMAT binary)`,
        QUERY_TIMEOUT_MS,
        ([id, seq, pos, vector]) => out.push({ id: id!.toString('utf8'), seq: int8(seq!), pos: int8(pos!), vector: vector! }),
      );
    });
    this.db.lastContact = Date.now();
    return out;
  }

  /** Downloads this index's current publication into `dir`: `publication.ts` {@link download}. */
  download(dir: string, onFile?: Parameters<typeof download>[2]): ReturnType<typeof download> {
    return download(this.target, dir, onFile);
  }

  /**
   * Brings the local cache `store` (and its snapshot directory) to the database's state of this
   * index: the changes after its sequence number when it is a cache of this index in this
   * database, otherwise a whole reload (its snapshots are deleted first). Returns how it went.
   * @throws the database error.
   */
  async syncLocal(store: VectorStore, snapshotDir: string): Promise<{ reloaded: boolean; applied: number; seq: number }> {
    const row = await this.indexRow();
    const localSeq = Number(store.getMeta('seq') ?? 0);
    if (this.cacheState(store, snapshotDir, row) === 'current') {
      let applied = 0;
      for (let from = localSeq; ; ) {
        const page = await this.changesSince(from);
        if (page.length) store.transaction(() => store.applyChanges(page));
        applied += page.length;
        if (page.length < CHANGES_PAGE) return { reloaded: false, applied, seq: page.length ? page[page.length - 1].seq : from };
        from = page[page.length - 1].seq;
      }
    }
    fs.rmSync(snapshotDir, { recursive: true, force: true });
    const seq = await this.reload(store, row.incarnation);
    return { reloaded: true, applied: 0, seq };
  }

  /** Replaces the local cache with the database's rows (one REPEATABLE READ snapshot, paged). */
  private async reload(store: VectorStore, incarnation: string): Promise<number> {
    return inTransaction(this.db.pool, async (c) => {
      await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      const ix = (await c.query<{ seq: number; dimension: number | null }>('SELECT seq, dimension FROM vector_indexes WHERE name = $1', [this.name])).rows[0];
      const nss = (await c.query<NamespaceRow>('SELECT id, name, next_pos, generation FROM vector_namespaces WHERE index_name = $1 ORDER BY id', [this.name])).rows;
      store.transaction(() => {
        store.clearAll();
        store.setMeta(RELOAD_MARK, incarnation); // a reload that stops half-way is done again
        for (const n of nss) store.putNamespace(n);
      });
      await c.query(
        `DECLARE recs NO SCROLL CURSOR FOR SELECT ns, id, pos, seq, vector, sparse, metadata, data FROM vector_records WHERE index_name = $1`,
        [this.name],
      );
      for (;;) {
        const page = (await c.query<{ ns: number; id: string; pos: number; seq: number; vector: Buffer | null; sparse: Buffer | null; metadata: string | null; data: string | null }>(`FETCH ${RELOAD_PAGE} FROM recs`)).rows;
        if (page.length) store.transaction(() => {
          for (const r of page) store.upsert(r.ns, r);
        });
        if (page.length < RELOAD_PAGE) break;
      }
      store.transaction(() => {
        if (ix.dimension !== null) store.setMeta('dimension', String(ix.dimension));
        store.setMeta('seq', String(ix.seq));
        store.setMeta(CACHE_TAG, incarnation);
        store.deleteMeta(RELOAD_MARK);
      });
      this.db.lastContact = Date.now();
      return ix.seq;
    });
  }
}

/** A resumable query as stored (`vector_sessions`; see `http/resumable.ts`). */
export interface StoredSession {
  uuid: string;
  index: string;
  ns: string;
  /** The resolved query as JSON-compatible values. */
  query: unknown;
  /** Ids already returned. */
  returned: string[];
  idleMs: number;
  lastUsed: number;
}

/**
 * Resumable-query sessions in PostgreSQL, so any node continues a query another node started
 * (no sticky sessions behind a load balancer). All times in ms since the epoch.
 */
export class PgSessions {
  constructor(private readonly db: PgVectorStore) {}

  /** Active (not expired at `now`) sessions of `index`. */
  async count(index: string, now: number): Promise<number> {
    const r = await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM vector_sessions WHERE index_name = $1 AND last_used + idle_ms >= $2', [index, now]);
    return r.rows[0].n;
  }

  async insert(s: StoredSession): Promise<void> {
    await this.db.query(
      'INSERT INTO vector_sessions (uuid, index_name, ns, query, returned, idle_ms, last_used) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [s.uuid, s.index, s.ns, JSON.stringify(s.query), JSON.stringify(s.returned), s.idleMs, s.lastUsed],
    );
  }

  /**
   * Runs `fn` on session `uuid` (locked; undefined when absent) and stores the ids it adds and
   * `lastUsed`; resolves to what `fn` returns. `fn` may throw (nothing is stored).
   */
  async update<T>(uuid: string, now: number, fn: (s: StoredSession | undefined) => { added: string[]; result: T }): Promise<T> {
    return inTransaction(this.db.pool, async (c) => {
      const r = await c.query<{ index_name: string; ns: string; query: unknown; returned: string[]; idle_ms: number; last_used: number }>(
        'SELECT index_name, ns, query, returned, idle_ms, last_used FROM vector_sessions WHERE uuid = $1 FOR UPDATE',
        [uuid],
      );
      const row = r.rows[0];
      const out = fn(row && { uuid, index: row.index_name, ns: row.ns, query: row.query, returned: row.returned, idleMs: row.idle_ms, lastUsed: row.last_used });
      if (row) {
        await c.query('UPDATE vector_sessions SET returned = returned || $2::jsonb, last_used = $3 WHERE uuid = $1', [uuid, JSON.stringify(out.added), now]);
      }
      this.db.lastContact = Date.now();
      return out.result;
    });
  }

  /** Deletes session `uuid` of `index` when not expired at `now`; false when there was none. */
  async delete(uuid: string, index: string, now: number): Promise<boolean> {
    const r = await this.db.query('DELETE FROM vector_sessions WHERE uuid = $1 AND index_name = $2 AND last_used + idle_ms >= $3', [uuid, index, now]);
    return (r.rowCount ?? 0) > 0;
  }

  /** Deletes the sessions expired at `now`; resolves to how many. */
  async reap(now: number): Promise<number> {
    const r = await this.db.query('DELETE FROM vector_sessions WHERE last_used + idle_ms < $1', [now]);
    return r.rowCount ?? 0;
  }
}

/**
 * Credentials kept the same on every node of a store shared by several nodes (PostgreSQL): the
 * queue's token and signing keys (`SVC_QUEUE_DATABASE_URL`), the vector indexes' tokens
 * (`SVC_VECTOR_DATABASE_URL`).
 *
 * - at start, this node's values are merged with the stored ones ({@link SharedCredentials.seed}:
 *   the stored value wins unless env gives a changed one) and the result is put into the node's
 *   credential store, which every request reads;
 * - a change in this node's credential store (a rotation through an area's API or the management
 *   API) is written to the database in one transaction per batch of synchronous changes (a key
 *   rotation's two values together) and the callers await it (`CredentialStore.settled`); a write
 *   that fails is retried at the next re-read;
 * - changes of other nodes arrive by `NOTIFY` and by a re-read every {@link REREAD_MS} (missed
 *   notifications, a LISTEN connection that was down).
 *
 * {@link PgSharedCredentials} is the PostgreSQL table behind it (one per area: `queue_credentials`,
 * `vector_credentials`).
 */
import type pg from 'pg';
import type { CredentialStore } from './credentials.js';
import type { Logger } from './logger.js';
import { inTransaction } from './pg.js';

/** Fallback re-read period of the shared credentials (ms). */
export const REREAD_MS = 2000;

/** A credential of this node at start (see {@link SharedCredentials.seed}). */
export interface SharedCredentialEntry {
  name: string;
  /** This node's value (from env, `credentials.json` or just generated). */
  value: string;
  /** The value env gives this node, when it does. */
  envValue?: string;
}

/** Credentials shared by the nodes of one store ({@link PgSharedCredentials}). */
export interface SharedCredentials {
  /**
   * Start-up: creates missing rows from `entries`; a stored row wins, unless `envValue` differs
   * from the env value the row was last set from. Returns the values in effect for every node.
   */
  seed(entries: SharedCredentialEntry[], now: number): Promise<Map<string, string>>;
  /** Every stored credential (name -> value). */
  read(): Promise<Map<string, string>>;
  /** Stores rotated values (one transaction) and tells the other nodes. */
  write(values: Map<string, string>, now: number): Promise<void>;
  /** Subscribes to changes written by any node; returns the unsubscribe function. */
  onChange(fn: () => void): () => void;
}

/**
 * Seeds the shared credentials `names` from this node's and starts following them; `area` names
 * the area in log lines. `follows` (optional) admits more names, not seeded: credentials made
 * while running (the tokens of a vector index created through the management API) are written
 * to the database and taken from it like `names`; those already stored are read before this
 * resolves, so a node that starts serving such an index knows its tokens (else the first re-read,
 * up to `REREAD_MS` later, would bring them and the index would answer 401 until then).
 * @throws the database error when the first seed or read fails (start-up error).
 */
export async function startCredentialSync(
  names: readonly string[],
  credentials: CredentialStore,
  shared: SharedCredentials,
  logger: Logger,
  now: () => number,
  area: string,
  follows?: (name: string) => boolean,
): Promise<{ stop(): void }> {
  const NAMES = names;
  const shares = (name: string) => NAMES.includes(name) || (follows?.(name) ?? false);
  credentials.markShared([...NAMES]);
  /** Values this node knows to be stored. */
  const known = new Map<string, string>();
  /** Values changed here and not stored yet. */
  const dirty = new Map<string, string>();
  let stopped = false;

  const apply = (stored: Map<string, string>) => {
    for (const [name, value] of stored) {
      if (!shares(name) || dirty.has(name)) continue;
      known.set(name, value);
      if (credentials.peek(name) !== value) credentials.set(name, value); // the listener sees known === value
    }
  };

  let flushing: Promise<void> | undefined;
  const flush = (): Promise<void> =>
    (flushing ??= Promise.resolve().then(async () => {
      flushing = undefined;
      const batch = new Map(dirty);
      if (!batch.size) return;
      await shared.write(batch, now());
      for (const [name, value] of batch) {
        known.set(name, value);
        if (dirty.get(name) === value) dirty.delete(name);
      }
    }));

  apply(
    await shared.seed(
      NAMES.map((name) => {
        const value = credentials.peek(name)!;
        return { name, value, envValue: credentials.isFromEnv(name) ? value : undefined };
      }),
      now(),
    ),
  );
  if (follows) apply(await shared.read());

  const unlisten = credentials.onChange((name, value) => {
    if (stopped || !shares(name) || known.get(name) === value) return;
    dirty.set(name, value);
    return flush();
  });

  let reading = false;
  let again = false;
  const reread = async (): Promise<void> => {
    if (stopped) return;
    if (reading) {
      again = true; // a change notified while a read runs may be newer than what it reads
      return;
    }
    reading = true;
    try {
      if (dirty.size) await flush();
      apply(await shared.read());
    } catch (err) {
      logger.debug({ err }, `${area}: re-reading the shared credentials failed (retried)`);
    } finally {
      reading = false;
    }
    if (again) {
      again = false;
      await reread();
    }
  };
  const unsubscribe = shared.onChange(() => void reread());
  const timer = setInterval(() => void reread(), REREAD_MS);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      unlisten();
      unsubscribe();
    },
  };
}

/**
 * An area's credentials in PostgreSQL (`<table>(name, value, updated_at, seed)`), shared by every
 * node of a deployment, so a rotation on one node takes effect on all of them.
 *
 * - {@link PgSharedCredentials.seed} runs at start: per name, a missing row is created from this
 *   node's value; an existing row wins over the node's value, unless env gives this node a value
 *   that differs from the env value the row was last set from (`seed`): then the operator changed
 *   the env and the row takes it. Rows are locked (`FOR UPDATE`) so nodes starting together agree.
 * - {@link PgSharedCredentials.write} stores rotated values in one transaction and sends
 *   `NOTIFY` on the credentials channel; every node LISTENs and re-reads
 *   ({@link PgSharedCredentials.read}); nodes also re-read every few seconds.
 */
export class PgSharedCredentials implements SharedCredentials {
  constructor(
    private readonly pool: pg.Pool,
    /** Table of the credentials (a constant identifier of the area). */
    private readonly table: string,
    /** NOTIFY channel of this schema's credential changes. */
    private readonly channel: string,
    /** Subscribes to that channel (and to reconnects of the LISTEN connection). */
    private readonly subscribe: (fn: () => void) => () => void,
  ) {}

  onChange(fn: () => void): () => void {
    return this.subscribe(fn);
  }

  seed(entries: SharedCredentialEntry[], now: number): Promise<Map<string, string>> {
    return inTransaction(this.pool, async (c) => {
      let changed = false;
      for (const e of entries) {
        const ins = await c.query(
          `INSERT INTO ${this.table} (name, value, updated_at, seed) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`,
          [e.name, e.value, now, e.envValue ?? null],
        );
        if (ins.rowCount) {
          changed = true;
          continue;
        }
        const row = (await c.query<{ seed: string | null }>(`SELECT seed FROM ${this.table} WHERE name = $1 FOR UPDATE`, [e.name])).rows[0];
        if (e.envValue !== undefined && row.seed !== e.envValue) {
          await c.query(`UPDATE ${this.table} SET value = $2, updated_at = $3, seed = $2 WHERE name = $1`, [e.name, e.envValue, now]);
          changed = true;
        }
      }
      if (changed) await c.query('SELECT pg_notify($1, $2)', [this.channel, '']);
      return this.read(c, entries.map((e) => e.name));
    });
  }

  async read(q: pg.Pool | pg.PoolClient = this.pool, names?: string[]): Promise<Map<string, string>> {
    const r = names
      ? await q.query<{ name: string; value: string }>(`SELECT name, value FROM ${this.table} WHERE name = ANY($1::text[])`, [names])
      : await q.query<{ name: string; value: string }>(`SELECT name, value FROM ${this.table}`);
    return new Map(r.rows.map((x) => [x.name, x.value]));
  }

  async write(values: Map<string, string>, now: number): Promise<void> {
    if (!values.size) return;
    await this.pool.query(
      `WITH w AS (INSERT INTO ${this.table} (name, value, updated_at) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
                  ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at RETURNING 1)
       SELECT pg_notify($4, '') FROM (SELECT 1 FROM w LIMIT 1) x`,
      [[...values.keys()], [...values.values()], [...values.keys()].map(() => now), this.channel],
    );
  }
}

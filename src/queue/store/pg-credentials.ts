/**
 * The queue's credentials (token, signing keys) in PostgreSQL (`queue_credentials`), shared by
 * every node of a deployment, so a rotation on one node takes effect on all of them.
 *
 * - {@link PgSharedCredentials.seed} runs at start: per name, a missing row is created from this
 *   node's value; an existing row wins over the node's value, unless env gives this node a value
 *   that differs from the env value the row was last set from (`seed`): then the operator changed
 *   the env and the row takes it. Rows are locked (`FOR UPDATE`) so nodes starting together agree.
 * - {@link PgSharedCredentials.write} stores rotated values in one transaction and sends
 *   `NOTIFY` on the credentials channel; every node LISTENs (`PgQueueStore.onCredentialsChanged`)
 *   and re-reads ({@link PgSharedCredentials.read}); nodes also re-read every few seconds.
 */
import type pg from 'pg';
import { inTransaction } from './pg.js';
import type { SharedCredentialEntry, SharedCredentials } from './types.js';

export class PgSharedCredentials implements SharedCredentials {
  constructor(
    private readonly pool: pg.Pool,
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
          `INSERT INTO queue_credentials (name, value, updated_at, seed) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`,
          [e.name, e.value, now, e.envValue ?? null],
        );
        if (ins.rowCount) {
          changed = true;
          continue;
        }
        const row = (await c.query<{ seed: string | null }>('SELECT seed FROM queue_credentials WHERE name = $1 FOR UPDATE', [e.name])).rows[0];
        if (e.envValue !== undefined && row.seed !== e.envValue) {
          await c.query('UPDATE queue_credentials SET value = $2, updated_at = $3, seed = $2 WHERE name = $1', [e.name, e.envValue, now]);
          changed = true;
        }
      }
      if (changed) await c.query('SELECT pg_notify($1, $2)', [this.channel, '']);
      return this.read(c, entries.map((e) => e.name));
    });
  }

  async read(q: pg.Pool | pg.PoolClient = this.pool, names?: string[]): Promise<Map<string, string>> {
    const r = names
      ? await q.query<{ name: string; value: string }>('SELECT name, value FROM queue_credentials WHERE name = ANY($1::text[])', [names])
      : await q.query<{ name: string; value: string }>('SELECT name, value FROM queue_credentials');
    return new Map(r.rows.map((x) => [x.name, x.value]));
  }

  async write(values: Map<string, string>, now: number): Promise<void> {
    if (!values.size) return;
    await this.pool.query(
      `WITH w AS (INSERT INTO queue_credentials (name, value, updated_at) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
                  ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at RETURNING 1)
       SELECT pg_notify($4, '') FROM (SELECT 1 FROM w LIMIT 1) x`,
      [[...values.keys()], [...values.values()], [...values.keys()].map(() => now), this.channel],
    );
  }
}

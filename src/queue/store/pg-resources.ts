/**
 * PostgreSQL the resource stores of `resource-types.ts`: URL groups, queues, flow-control keys, schedules and the
 * admission rounds of the queue/flow-control gate, on the queue store's pool.
 *
 * Admission across nodes: a round runs in one transaction holding a transaction-level advisory
 * lock ({@link ADMISSION_LOCK}), so rounds of different nodes never overlap and the in-flight
 * counts a round reads stay true until its releases commit (queue parallelism and FIFO hold
 * across nodes). The gate decides synchronously ({@link AdmissionTx}); this store reads what a
 * round may need first (held queues and keys, their settings, admitted counts, and the oldest
 * due held messages up to each queue's / key's free room), lets the gate decide on that snapshot,
 * then applies its releases and wakes the dispatchers (NOTIFY).
 *
 * Schedules fire once per due time whatever the node count: `fireSchedule` is a conditional
 * UPDATE on `next_time` (the row lock orders concurrent tries; the loser sees the new next_time).
 */
import type pg from 'pg';
import type { FlowControl, NewMessage } from '../model.js';
import { inTransaction, insertMessages, LIVENESS_LOCK_CLASS, type PgQueueStore } from './pg.js';
import { flowStateFromRow, scheduleFromRow, type FlowRow, type ScheduleRow } from './sqlite-resources.js';
import {
  effectiveLimits,
  type AdmissionTx,
  type FlowKeyState,
  type HeldHead,
  type QueueInfo,
  type UrlGroupStore,
  type QueueAdmissionStore,
  type FlowControlStore,
  type ScheduleStore,
  type ScheduleRecord,
  type UrlGroup,
  type UrlGroupEndpoint,
} from './resource-types.js';

/** First key of the advisory lock serialising admission rounds across nodes (second: the schema). */
export const ADMISSION_LOCK_CLASS = 73_164_512;
/** Most messages released per queue or key in one round (as the gate). */
const MAX_RELEASE_PER_KEY = 1000;

interface QueueRow {
  name: string;
  parallelism: number;
  paused: number;
  created_at: number;
  updated_at: number;
}

const u = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

const ADMITTED = `status = 'pending' AND (claimed_by IS NULL OR claimed_by <> 'held')`;

export class PgResourceStore implements UrlGroupStore, QueueAdmissionStore, FlowControlStore, ScheduleStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly store: PgQueueStore,
  ) {}

  // ---- URL groups ----

  addEndpoints(name: string, endpoints: UrlGroupEndpoint[], now: number): Promise<void> {
    return inTransaction(this.pool, async (c) => {
      await c.query(
        `INSERT INTO url_groups (name, created_at, updated_at) VALUES ($1, $2, $2) ON CONFLICT (name) DO UPDATE SET updated_at = EXCLUDED.updated_at`,
        [name, now],
      );
      // the group row is locked now: concurrent adds to one group cannot both insert an endpoint
      for (const e of endpoints) {
        await c.query(
          `INSERT INTO url_group_endpoints (group_name, url, name)
           SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM url_group_endpoints WHERE group_name = $1 AND url = $2 AND name IS NOT DISTINCT FROM $3)`,
          [name, e.url, e.name ?? null],
        );
      }
    });
  }

  removeEndpoints(name: string, endpoints: UrlGroupEndpoint[], now: number): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      if (!(await c.query('SELECT 1 FROM url_groups WHERE name = $1 FOR UPDATE', [name])).rowCount) return false;
      for (const e of endpoints) {
        if (e.name !== undefined && e.url !== undefined) await c.query('DELETE FROM url_group_endpoints WHERE group_name = $1 AND name = $2 AND url = $3', [name, e.name, e.url]);
        else if (e.name !== undefined) await c.query('DELETE FROM url_group_endpoints WHERE group_name = $1 AND name = $2', [name, e.name]);
        else if (e.url !== undefined) await c.query('DELETE FROM url_group_endpoints WHERE group_name = $1 AND url = $2', [name, e.url]);
      }
      const left = await c.query<{ n: number }>('SELECT COUNT(*)::int AS n FROM url_group_endpoints WHERE group_name = $1', [name]);
      if (left.rows[0].n === 0) await c.query('DELETE FROM url_groups WHERE name = $1', [name]);
      else await c.query('UPDATE url_groups SET updated_at = $1 WHERE name = $2', [now, name]);
      return true;
    });
  }

  private async groups(where: string, params: unknown[]): Promise<UrlGroup[]> {
    const rows = (await this.pool.query<{ name: string; created_at: number; updated_at: number }>(`SELECT * FROM url_groups ${where} ORDER BY name`, params)).rows;
    if (!rows.length) return [];
    const eps = (
      await this.pool.query<{ group_name: string; url: string; name: string | null }>(
        'SELECT group_name, url, name FROM url_group_endpoints WHERE group_name = ANY($1::text[]) ORDER BY seq',
        [rows.map((r) => r.name)],
      )
    ).rows;
    return rows.map((r) => ({
      name: r.name,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      endpoints: eps.filter((e) => e.group_name === r.name).map((e) => (e.name === null ? { url: e.url } : { name: e.name, url: e.url })),
    }));
  }

  listGroups(): Promise<UrlGroup[]> {
    return this.groups('', []);
  }

  async getGroup(name: string): Promise<UrlGroup | undefined> {
    return (await this.groups('WHERE name = $1', [name]))[0];
  }

  async deleteGroup(name: string): Promise<boolean> {
    return ((await this.pool.query('DELETE FROM url_groups WHERE name = $1', [name])).rowCount ?? 0) > 0; // endpoints cascade
  }

  // ---- queues ----

  async upsertQueue(name: string, set: { parallelism?: number; paused?: boolean }, now: number): Promise<void> {
    await this.pool.query(
      `INSERT INTO queues (name, parallelism, paused, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
       ON CONFLICT (name) DO UPDATE SET parallelism = COALESCE($5, queues.parallelism), paused = COALESCE($6, queues.paused), updated_at = $4`,
      [name, set.parallelism ?? 1, set.paused ? 1 : 0, now, set.parallelism ?? null, set.paused === undefined ? null : set.paused ? 1 : 0],
    );
  }

  async ensureQueues(names: string[], now: number): Promise<void> {
    await this.pool.query(
      `INSERT INTO queues (name, parallelism, paused, created_at, updated_at) SELECT n, 1, 0, $2, $2 FROM unnest($1::text[]) n ON CONFLICT (name) DO NOTHING`,
      [names, now],
    );
  }

  private async queueInfos(rows: QueueRow[]): Promise<QueueInfo[]> {
    if (!rows.length) return [];
    const lags = (
      await this.pool.query<{ q: string; n: number }>(
        `SELECT queue_name AS q, COUNT(*)::int AS n FROM messages WHERE queue_name = ANY($1::text[]) AND status = 'pending' AND kind = 'message' GROUP BY queue_name`,
        [rows.map((r) => r.name)],
      )
    ).rows;
    const lag = new Map(lags.map((l) => [l.q, l.n]));
    return rows.map((r) => ({ name: r.name, createdAt: r.created_at, updatedAt: r.updated_at, parallelism: r.parallelism, paused: r.paused === 1, lag: lag.get(r.name) ?? 0 }));
  }

  async getQueue(name: string): Promise<QueueInfo | undefined> {
    return (await this.queueInfos((await this.pool.query<QueueRow>('SELECT * FROM queues WHERE name = $1', [name])).rows))[0];
  }

  async listQueues(): Promise<QueueInfo[]> {
    return this.queueInfos((await this.pool.query<QueueRow>('SELECT * FROM queues ORDER BY name')).rows);
  }

  deleteQueue(name: string, now: number): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      if (!(await c.query('DELETE FROM queues WHERE name = $1', [name])).rowCount) return false;
      const held = (
        await c.query<{ seq: number }>(
          `UPDATE message_state SET status = 'cancelled', finished_at = $1, claimed_by = NULL WHERE claimed_by = 'held' AND queue_name = $2 RETURNING seq`,
          [now, name],
        )
      ).rows.map((r) => r.seq);
      if (held.length) {
        await c.query(
          `INSERT INTO logs (time, message_seq, state) SELECT $1, s.seq, v.state FROM unnest($2::bigint[]) s(seq)
           CROSS JOIN (VALUES (1, 'CANCEL_REQUESTED'), (2, 'CANCELLED')) v(o, state) ORDER BY s.seq, v.o`,
          [now, held],
        );
      }
      return true;
    });
  }

  async setQueuePaused(name: string, paused: boolean, now: number): Promise<boolean> {
    return ((await this.pool.query('UPDATE queues SET paused = $1, updated_at = $2 WHERE name = $3', [paused ? 1 : 0, now, name])).rowCount ?? 0) > 0;
  }

  // ---- flow control ----

  async recordFlowControl(entries: { key: string; fc: FlowControl }[], now: number): Promise<void> {
    if (!entries.length) return;
    await this.pool.query(
      `INSERT INTO flow_control_keys (key, parallelism, rate, period_s, updated_at)
       SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[]) AS e(key, p, r, s) CROSS JOIN (SELECT $5::bigint) t
       ON CONFLICT (key) DO UPDATE SET parallelism = EXCLUDED.parallelism, rate = EXCLUDED.rate, period_s = EXCLUDED.period_s, updated_at = EXCLUDED.updated_at`,
      [entries.map((e) => e.key), entries.map((e) => e.fc.parallelism ?? null), entries.map((e) => e.fc.rate ?? null), entries.map((e) => e.fc.period ?? null), now],
    );
  }

  /** Held (waiting) and admitted counts of keys. */
  private async keyCounts(q: pg.Pool | pg.PoolClient, keys: string[]): Promise<Map<string, { waiting: number; admitted: number }>> {
    const out = new Map<string, { waiting: number; admitted: number }>();
    if (!keys.length) return out;
    const r = await q.query<{ k: string; w: number; a: number }>(
      `SELECT flow_control_key AS k, COUNT(*) FILTER (WHERE claimed_by = 'held')::int AS w, COUNT(*) FILTER (WHERE ${ADMITTED})::int AS a
       FROM message_state WHERE flow_control_key = ANY($1::text[]) AND status = 'pending' GROUP BY flow_control_key`,
      [keys],
    );
    for (const row of r.rows) out.set(row.k, { waiting: row.w, admitted: row.a });
    return out;
  }

  private async flowStates(q: pg.Pool | pg.PoolClient, rows: FlowRow[]): Promise<FlowKeyState[]> {
    const counts = await this.keyCounts(q, rows.map((r) => r.key));
    return rows.map((r) => flowStateFromRow(r, counts.get(r.key)?.waiting ?? 0, counts.get(r.key)?.admitted ?? 0));
  }

  async getFlowKey(key: string): Promise<FlowKeyState | undefined> {
    return (await this.flowStates(this.pool, (await this.pool.query<FlowRow>('SELECT * FROM flow_control_keys WHERE key = $1', [key])).rows))[0];
  }

  async listFlowKeys(search?: string): Promise<FlowKeyState[]> {
    const rows = search
      ? (await this.pool.query<FlowRow>(`SELECT * FROM flow_control_keys WHERE strpos(key, $1) > 0 ORDER BY key`, [search])).rows
      : (await this.pool.query<FlowRow>('SELECT * FROM flow_control_keys ORDER BY key')).rows;
    return this.flowStates(this.pool, rows);
  }

  async setFlowPaused(key: string, paused: boolean, now: number): Promise<boolean> {
    return ((await this.pool.query('UPDATE flow_control_keys SET paused = $1, updated_at = $2 WHERE key = $3', [paused ? 1 : 0, now, key])).rowCount ?? 0) > 0;
  }

  async pinFlow(key: string, pin: { parallelism?: number; rate?: number; periodS?: number }, now: number): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE flow_control_keys SET pinned_parallelism = COALESCE($2, pinned_parallelism), pinned_rate = COALESCE($3, pinned_rate),
         pinned_period_s = CASE WHEN $3::int IS NOT NULL THEN COALESCE($4, 1) ELSE COALESCE($4, pinned_period_s) END, updated_at = $5
       WHERE key = $1`,
      [key, pin.parallelism ?? null, pin.rate ?? null, pin.periodS ?? null, now],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async unpinFlow(key: string, unpin: { parallelism: boolean; rate: boolean }, now: number): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE flow_control_keys SET
         pinned_parallelism = CASE WHEN $2 THEN NULL ELSE pinned_parallelism END,
         pinned_rate = CASE WHEN $3 THEN NULL ELSE pinned_rate END,
         pinned_period_s = CASE WHEN $3 THEN NULL ELSE pinned_period_s END, updated_at = $4
       WHERE key = $1`,
      [key, unpin.parallelism, unpin.rate, now],
    );
    return (r.rowCount ?? 0) > 0;
  }

  // ---- admission ----

  admit<T>(fn: (tx: AdmissionTx) => T, now: number = Date.now()): Promise<T> {
    return inTransaction(this.pool, async (c) => {
      // one lock per schema (nodes of one deployment share it)
      await c.query(`SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))`, [ADMISSION_LOCK_CLASS]);
      const snap = await this.snapshot(c, now);
      const released: number[] = [];
      const tx: AdmissionTx = {
        heldQueues: () => snap.heldQueues,
        heldKeys: () => snap.heldKeys,
        queueConfig: (name) => snap.queues.get(name),
        flowKey: (key) => snap.keys.get(key),
        admittedInQueue: (name) => snap.admittedQ.get(name) ?? 0,
        admittedForKey: (key) => snap.keys.get(key)?.admitted ?? snap.admittedK.get(key) ?? 0,
        queueHeads: (name, limit) => (snap.queueHeads.get(name) ?? []).slice(0, Math.max(0, limit)),
        keyHeads: (key, limit) => (snap.keyHeads.get(key) ?? []).slice(0, Math.max(0, limit)),
        release: (seqs) => {
          released.push(...seqs);
        },
        nextHeldDue: () => snap.nextHeldDue,
        rateUsage: (key, periodS) => {
          const r = snap.rates.get(key);
          if (!r) return { used: 0 };
          const from = now - periodS * 1000;
          const ended = r.ended.filter((t) => t > from);
          return { used: r.open + ended.length, oldestEnd: ended[0] };
        },
      };
      const out = fn(tx);
      if (released.length) {
        await c.query(`UPDATE message_state SET claimed_by = NULL WHERE seq = ANY($1::bigint[]) AND claimed_by = 'held'`, [released]);
        // rate-limited keys: the released messages take their place in the window (admitted, not
        // started) in this transaction, so the next round (any node) counts them
        const rated = [...snap.rates.keys()];
        if (rated.length) {
          await c.query(
            `INSERT INTO flow_control_attempts (key, message_id, owner, started_at, started)
             SELECT flow_control_key, id, '', $3, 0 FROM message_data WHERE seq = ANY($1::bigint[]) AND flow_control_key = ANY($2::text[])`,
            [released, rated, now],
          );
        }
        await this.store.wake(c, now);
      }
      return out;
    });
  }

  /**
   * What an admission round at `now` may read: held queues and keys, their settings and admitted
   * counts, and per queue / key the oldest due held messages up to its free room (an upper bound
   * of what the gate can release: queue parallelism minus admitted; key parallelism minus
   * admitted, and at most its rate).
   */
  private async snapshot(c: pg.PoolClient, now: number) {
    const heldQueues = (await c.query<{ q: string }>(`SELECT DISTINCT queue_name AS q FROM message_state WHERE claimed_by = 'held' AND queue_name IS NOT NULL`)).rows.map((r) => r.q);
    const heldKeys = (
      await c.query<{ k: string }>(`SELECT DISTINCT flow_control_key AS k FROM message_state WHERE claimed_by = 'held' AND queue_name IS NULL AND flow_control_key IS NOT NULL`)
    ).rows.map((r) => r.k);
    const queues = new Map<string, { parallelism: number; paused: boolean }>();
    for (const r of (await c.query<QueueRow>('SELECT * FROM queues WHERE name = ANY($1::text[])', [heldQueues])).rows) {
      queues.set(r.name, { parallelism: r.parallelism, paused: r.paused === 1 });
    }
    const admittedQ = new Map<string, number>();
    for (const r of (
      await c.query<{ q: string; n: number }>(`SELECT queue_name AS q, COUNT(*)::int AS n FROM message_state WHERE ${ADMITTED} AND queue_name = ANY($1::text[]) GROUP BY queue_name`, [heldQueues])
    ).rows) {
      admittedQ.set(r.q, r.n);
    }
    const qLimits = heldQueues.map((q) => {
      const cfg = queues.get(q) ?? { parallelism: 1, paused: false };
      return cfg.paused ? 0 : Math.max(0, Math.min(MAX_RELEASE_PER_KEY, cfg.parallelism - (admittedQ.get(q) ?? 0)));
    });
    const queueHeads = new Map<string, HeldHead[]>();
    const headKeys = new Set<string>(heldKeys);
    const qh = await c.query<{ q: string; seq: number; k: string | null }>(
      `SELECT lim.q, h.seq, h.flow_control_key AS k FROM unnest($1::text[], $2::int[]) AS lim(q, n)
       CROSS JOIN LATERAL (SELECT seq, flow_control_key FROM message_state
         WHERE claimed_by = 'held' AND queue_name = lim.q AND due_at <= $3 ORDER BY seq LIMIT lim.n) h
       ORDER BY lim.q, h.seq`,
      [heldQueues, qLimits, now],
    );
    for (const r of qh.rows) {
      const arr = queueHeads.get(r.q) ?? [];
      arr.push({ seq: r.seq, flowControlKey: u(r.k) });
      queueHeads.set(r.q, arr);
      if (r.k !== null) headKeys.add(r.k);
    }
    const keyRows = (await c.query<FlowRow>('SELECT * FROM flow_control_keys WHERE key = ANY($1::text[])', [[...headKeys]])).rows;
    const counts = await this.keyCounts(c, [...headKeys]);
    const keys = new Map<string, FlowKeyState>();
    for (const r of keyRows) keys.set(r.key, flowStateFromRow(r, counts.get(r.key)?.waiting ?? 0, counts.get(r.key)?.admitted ?? 0));
    const admittedK = new Map([...counts].map(([k, v]) => [k, v.admitted]));
    const kLimits = heldKeys.map((k) => {
      const st = keys.get(k);
      if (!st) return MAX_RELEASE_PER_KEY;
      if (st.paused) return 0;
      const lim = effectiveLimits(st);
      let n = MAX_RELEASE_PER_KEY;
      if (lim.parallelism !== undefined) n = Math.min(n, lim.parallelism - st.admitted);
      if (lim.rate !== undefined) n = Math.min(n, lim.rate);
      return Math.max(0, n);
    });
    const keyHeads = new Map<string, HeldHead[]>();
    const kh = await c.query<{ k: string; seq: number }>(
      `SELECT lim.k, h.seq FROM unnest($1::text[], $2::int[]) AS lim(k, n)
       CROSS JOIN LATERAL (SELECT seq FROM message_state
         WHERE claimed_by = 'held' AND queue_name IS NULL AND flow_control_key = lim.k AND due_at <= $3 ORDER BY seq LIMIT lim.n) h
       ORDER BY lim.k, h.seq`,
      [heldKeys, kLimits, now],
    );
    for (const r of kh.rows) {
      const arr = keyHeads.get(r.k) ?? [];
      arr.push({ seq: r.seq, flowControlKey: r.k });
      keyHeads.set(r.k, arr);
    }
    const next = (await c.query<{ t: number | null }>(`SELECT MIN(due_at) AS t FROM message_state WHERE claimed_by = 'held' AND due_at > $1`, [now])).rows[0].t;
    const rated = [...keys.values()].filter((k) => effectiveLimits(k).rate !== undefined);
    const rates = await this.rateRows(c, rated.map((k) => k.key), rated.map((k) => effectiveLimits(k).periodS), now);
    return { heldQueues, heldKeys, queues, admittedQ, admittedK, keys, queueHeads, keyHeads, nextHeldDue: u(next), rates };
  }

  /**
   * Open and recently ended attempts of rate-limited `keys` (under the admission lock). Tidies
   * first: admitted rows whose message left without starting (cancelled, deleted queue) go, and
   * running rows end now when their dispatcher is no longer alive (its node died) or no longer
   * holds the message's lease (it lapsed: a node cut off from the database). A running row is
   * made by the claim and ended by the outcome's transaction, so a row whose owner still holds
   * the lease is a running attempt.
   */
  private async rateRows(c: pg.PoolClient, keys: string[], periodsS: number[], now: number): Promise<Map<string, { ended: number[]; open: number }>> {
    // every rate-limited key gets an entry, also one without rows yet: the releases of a round are
    // recorded for exactly these keys
    const out = new Map<string, { ended: number[]; open: number }>(keys.map((k) => [k, { ended: [], open: 0 }]));
    if (!keys.length) return out;
    await c.query(
      `DELETE FROM flow_control_attempts a WHERE a.key = ANY($1::text[]) AND a.ended_at IS NULL AND a.started = 0
         AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = a.message_id AND m.status = 'pending')`,
      [keys],
    );
    await c.query(
      `WITH alive AS (SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = $3::int::oid AND objsubid = 2 AND granted
                        AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
       UPDATE flow_control_attempts a SET ended_at = $2
       WHERE key = ANY($1::text[]) AND ended_at IS NULL AND started = 1
         AND (hashtext(owner)::oid NOT IN (SELECT objid FROM alive)
              OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = a.message_id AND m.status = 'pending' AND m.claimed_by = a.owner))`,
      [keys, now, LIVENESS_LOCK_CLASS],
    );
    const r = await c.query<{ key: string; ended_at: number | null }>(
      `SELECT a.key, a.ended_at FROM unnest($1::text[], $2::bigint[]) AS k(key, since)
       JOIN flow_control_attempts a ON a.key = k.key AND (a.ended_at IS NULL OR a.ended_at > k.since) ORDER BY a.ended_at`,
      [keys, periodsS.map((p) => now - p * 1000)],
    );
    for (const row of r.rows) {
      const e = out.get(row.key)!;
      if (row.ended_at === null) e.open++;
      else e.ended.push(row.ended_at);
    }
    return out;
  }

  // ---- rate windows ----

  async attemptEnded(messageId: string, owner: string, at: number): Promise<void> {
    await this.pool.query(`UPDATE flow_control_attempts SET ended_at = $3 WHERE message_id = $1 AND owner = $2 AND ended_at IS NULL AND started = 1`, [messageId, owner, at]);
  }

  /** `resetRate`: drops the key's ended and running attempts (admitted, not started ones stay). */
  async resetRateWindow(key: string): Promise<void> {
    await this.pool.query('DELETE FROM flow_control_attempts WHERE key = $1 AND (ended_at IS NOT NULL OR started = 1)', [key]);
  }

  async rateState(key: string, periodS: number, now: number): Promise<{ count: number; periodStart: number }> {
    const r = await this.pool.query<{ n: number; first: number | null }>(
      `SELECT COUNT(*)::int AS n, MIN(ended_at) AS first FROM flow_control_attempts WHERE key = $1 AND (ended_at IS NULL OR ended_at > $2)`,
      [key, now - periodS * 1000],
    );
    return { count: r.rows[0].n, periodStart: r.rows[0].first ?? now };
  }

  /** Drops rate-window rows that ended more than their key's period ago (in batches). */
  async pruneRateWindows(now: number): Promise<void> {
    for (;;) {
      const r = await this.pool.query(
        `DELETE FROM flow_control_attempts WHERE seq IN (
           SELECT a.seq FROM flow_control_attempts a LEFT JOIN flow_control_keys k ON k.key = a.key
           WHERE a.ended_at < $1::bigint - 1000 * GREATEST(COALESCE(k.period_s, 1), COALESCE(k.pinned_period_s, 1)) LIMIT 5000)`,
        [now],
      );
      if ((r.rowCount ?? 0) < 5000) return;
    }
  }

  // ---- schedules ----

  async upsertSchedule(s: ScheduleRecord): Promise<void> {
    await this.pool.query(
      `INSERT INTO schedules (id, cron, destination, options, body, queue_name, caller_ip, paused, created_at, last_time, next_time, last_message_ids)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, $10, NULL)
       ON CONFLICT (id) DO UPDATE SET cron = $2, destination = $3, options = $4, body = $5, queue_name = $6, caller_ip = $7, paused = $8, next_time = $10`,
      [s.id, s.cron, s.destination, JSON.stringify(s.options), s.body, s.queueName ?? null, s.callerIp ?? null, s.paused ? 1 : 0, s.createdAt, s.nextTime ?? null],
    );
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    const r = (await this.pool.query<ScheduleRow>('SELECT * FROM schedules WHERE id = $1', [id])).rows[0];
    return r ? scheduleFromRow(r) : undefined;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return (await this.pool.query<ScheduleRow>('SELECT * FROM schedules ORDER BY created_at, id')).rows.map(scheduleFromRow);
  }

  async deleteSchedule(id: string): Promise<boolean> {
    return ((await this.pool.query('DELETE FROM schedules WHERE id = $1', [id])).rowCount ?? 0) > 0;
  }

  async setSchedulePaused(id: string, paused: boolean, nextTime: number | undefined): Promise<boolean> {
    return ((await this.pool.query('UPDATE schedules SET paused = $1, next_time = $2 WHERE id = $3', [paused ? 1 : 0, nextTime ?? null, id])).rowCount ?? 0) > 0;
  }

  async dueSchedules(now: number): Promise<ScheduleRecord[]> {
    return (await this.pool.query<ScheduleRow>('SELECT * FROM schedules WHERE paused = 0 AND next_time <= $1 ORDER BY next_time', [now])).rows.map(scheduleFromRow);
  }

  async nextScheduleTime(): Promise<number | undefined> {
    return u((await this.pool.query<{ t: number | null }>('SELECT MIN(next_time) AS t FROM schedules WHERE paused = 0')).rows[0].t);
  }

  fireSchedule(id: string, expectedNext: number, msgs: NewMessage[], nextTime: number | undefined, now: number): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      const r = await c.query(
        'UPDATE schedules SET last_time = $1, next_time = $2, last_message_ids = $3 WHERE id = $4 AND paused = 0 AND next_time = $5',
        [now, nextTime ?? null, JSON.stringify(msgs.map((m) => m.id)), id, expectedNext],
      );
      if (!r.rowCount) return false;
      await insertMessages(c, msgs, now);
      if (msgs.some((m) => !m.held && m.dueAt <= now)) await this.store.wake(c, now);
      return true;
    });
  }

  async messageStatuses(ids: string[]): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    if (!ids.length) return out;
    for (const r of (await this.pool.query<{ id: string; status: string }>('SELECT id, status FROM messages WHERE id = ANY($1::text[])', [ids])).rows) out[r.id] = r.status;
    return out;
  }
}

/**
 * The PostgreSQL {@link QueueStore} (`SVC_QUEUE_DATABASE_URL`): the same tables and state machine
 * as the SQLite store (`pg-migrations/0001_init.sql`), shared by any number of svc nodes.
 *
 * - Durability: every method is one transaction (or one statement) and resolves after COMMIT,
 *   which with the server's default `synchronous_commit = on` means the WAL is flushed: an
 *   acknowledged publish survives a crash of svc or of PostgreSQL.
 * - Claiming: `claimDue` picks due, unclaimed rows with `FOR UPDATE SKIP LOCKED`, so nodes claiming
 *   at once never take the same message and never wait for each other. A claim is a lease
 *   (`claimed_by` = the node's dispatcher id, `lease_until`); nodes renew the leases of what they
 *   hold ({@link PgQueueStore.renewLeases}) and reap expired ones, so a dead node's messages go
 *   back to the others within a lease.
 * - Wake-ups: writes that make messages due now send `NOTIFY svc_queue` (payload: due time, ms);
 *   every node LISTENs ({@link PgQueueStore.onWake}) and also polls as a fallback.
 * - Start-up lease release (`releaseLeases(now, true)`) releases only expired leases: other nodes
 *   may be delivering the rest.
 */
import type pg from 'pg';
import type {
  AttemptOutcome,
  DlqEntry,
  EnqueueResult,
  LogEntry,
  LogState,
  MessageFilter,
  NewMessage,
  Page,
  PageResult,
  StoredMessage,
} from '../model.js';
import { inTransaction, PgListener } from '../../pg.js';
import { createClient, createPool, preparePgDatabase, toPgParams } from './pg-connect.js';
import { arrayLiteral, columnLiterals } from './pg-arrays.js';
import { PgBatcher } from './pg-batch.js';
import { PgSharedCredentials } from './pg-credentials.js';
import { PgResourceStore } from './pg-resources.js';
import { PgWorkflowStore } from './pg-workflows.js';
import { FAIL_RUN_SQL, failRunParams } from './sqlite-workflows.js';
import type { FlowControlStore, QueueAdmissionStore, ScheduleStore, UrlGroupStore } from './resource-types.js';
import {
  dlqEntryFromRow,
  filterSql,
  logEntryFromRow,
  takePage,
  bytesOfDlqEntry,
  bytesOfLogEntry,
  MESSAGE_COLUMNS,
  messageValues,
  rowToMessage,
  type DlqRow,
  type LogRow,
  type MessageRow,
} from './sqlite-rows.js';
import type { ClaimOptions, EnqueueClaim, MessageCounts, QueueStore, RunFailure, SharedCredentials } from './types.js';
import type { WorkflowStore } from './workflow-types.js';

/** The notification channel of due messages (payload: earliest due time, ms); `_<schema>` appended outside `public`. */
export const WAKE_CHANNEL = 'svc_queue';
/** The notification channel of credential changes (`queue_credentials`); `_<schema>` appended outside `public`. */
export const CREDENTIALS_CHANNEL = 'svc_queue_credentials';
/** First key of the advisory locks that mark a dispatcher alive (second key: hash of its id). */
export const LIVENESS_LOCK_CLASS = 73_164_513;
/** Most messages per INSERT statement (a bound on one statement's size). */
const INSERT_CHUNK = 1000;
/** Rows deleted per pruning statement (short transactions; the hot path never waits long). */
const PRUNE_BATCH = 5000;

/** Something that runs a query: the pool (autocommit) or a client inside a transaction. */
export type Queryable = pg.Pool | pg.PoolClient;

/** Runs `fn` in one transaction on a pooled connection (rolled back when it throws; `src/pg.ts`). */
export { inTransaction };

/**
 * CTE parts of the claim statement (`c` = the claimed rows, `$1` = owner, `$3` = now): the
 * attempts of claimed flow-control messages start in the same statement as the claim, so a rate
 * window never misses a running attempt. An admitted row (`started = 0`, made by the admission
 * round that released the message) becomes the running one; a retry (no admitted row) adds one.
 */
const START_ATTEMPTS = `fs AS (UPDATE flow_control_attempts a SET started = 1, owner = $1, started_at = $3 FROM c
              WHERE a.message_id = c.id AND a.ended_at IS NULL AND a.started = 0 RETURNING a.message_id),
       fi AS (INSERT INTO flow_control_attempts (key, message_id, owner, started_at, started)
              SELECT c.flow_control_key, c.id, $1, $3, 1 FROM c
              WHERE c.flow_control_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM fs WHERE fs.message_id = c.id))`;

/**
 * Ends the running attempt of message `$2` on dispatcher `$3` at `$1` (ms) in the transaction
 * that records its outcome; it keeps counting against its key's rate for one period.
 */
const END_ATTEMPT = `UPDATE flow_control_attempts SET ended_at = $1 WHERE message_id = $2 AND owner = $3 AND ended_at IS NULL AND started = 1`;

/**
 * PostgreSQL type of each of {@link MESSAGE_COLUMNS} (the VALUES list of an insert is typed by
 * casts: it feeds two tables, so its columns have no target column to take their types from).
 */
const COLUMN_TYPES: Record<(typeof MESSAGE_COLUMNS)[number], string> = {
  id: 'text', kind: 'text', url: 'text', url_host: 'text', url_path: 'text', origin: 'text', method: 'text', headers: 'text',
  body: 'bytea', created_at: 'bigint', not_before: 'bigint', due_at: 'bigint', max_retries: 'int', retry_delay: 'text',
  timeout_ms: 'bigint', callback: 'text', callback_opts: 'text', failure_callback: 'text', failure_callback_opts: 'text',
  caller_ip: 'text', labels: 'text', redact: 'text', topic_name: 'text', endpoint_name: 'text', queue_name: 'text',
  schedule_id: 'text', flow_control_key: 'text', flow_control: 'text', extra: 'text', claimed_by: 'text', lease_until: 'bigint',
};
/** Columns of {@link MESSAGE_COLUMNS} kept in `message_state` only (migration 0005); the rest go to `message_data`. */
const STATE_ONLY = new Set<string>(['due_at', 'claimed_by', 'lease_until']);
const DATA_COLUMNS = MESSAGE_COLUMNS.filter((c) => !STATE_ONLY.has(c)).join(', ');
const NCOL = MESSAGE_COLUMNS.length;
/** The state columns read back into a {@link MessageRow} (joined with `message_data`'s `d.*`). */
const STATE_COLUMNS = 'status, due_at, retried, cancel_requested, claimed_by, lease_until, finished_at';

/** A message to insert, leased to `claim.owner` until `claim.leaseUntil` when given (enqueue hand-off). */
export interface InsertRow {
  m: NewMessage;
  claim?: { owner: string; leaseUntil: number };
}


/**
 * Stores `msgs` (CREATED logged; with `claim`, the messages whose ids it names are stored leased
 * to its owner and ACTIVE is logged too), in one statement. Returns seq per message id.
 */
export async function insertMessages(q: Queryable, msgs: NewMessage[], now: number, claim?: EnqueueClaim): Promise<Map<string, number>> {
  return insertRows(q, msgs.map((m) => ({ m, claim: claim !== undefined && claim.ids.has(m.id) ? claim : undefined })), now);
}

/**
 * The insert of a batch of messages: one array parameter per column of {@link MESSAGE_COLUMNS}
 * (`$1`..`$31`, unnested in order) and the log time (`$32`). The text is the same for every batch
 * size, so each connection parses and plans it once (a VALUES list with a parameter per value
 * was a statement per row count, each planned anew on every connection). The immutable part goes
 * to message_data (seq in input order), the state part to message_state, CREATED (and ACTIVE for
 * rows leased at once) to logs.
 */
const INSERT_SQL = `WITH v AS (SELECT * FROM unnest(${MESSAGE_COLUMNS.map((c, k) => `$${k + 1}::${COLUMN_TYPES[c]}[]`).join(', ')})
                 WITH ORDINALITY AS v(${MESSAGE_COLUMNS.join(', ')}, o)),
       d AS (INSERT INTO message_data (${DATA_COLUMNS}) SELECT ${DATA_COLUMNS} FROM v ORDER BY o RETURNING seq, id),
       ins AS (INSERT INTO message_state (seq, due_at, claimed_by, lease_until, queue_name, flow_control_key)
               SELECT d.seq, v.due_at, v.claimed_by, v.lease_until, v.queue_name, v.flow_control_key FROM d JOIN v ON v.id = d.id
               RETURNING seq, due_at, claimed_by),
       l AS (INSERT INTO logs (time, message_seq, state, next_delivery_time)
             SELECT $${NCOL + 1}, ins.seq, x.state, CASE WHEN x.o = 1 THEN ins.due_at END
             FROM ins CROSS JOIN (VALUES (1, 'CREATED'), (2, 'ACTIVE')) x(o, state)
             WHERE x.o = 1 OR (ins.claimed_by IS NOT NULL AND ins.claimed_by <> 'held')
             ORDER BY ins.seq, x.o)
       SELECT seq, id FROM d`;

/** {@link insertMessages} with a claim per row (the rows of several enqueues in one statement). */
export async function insertRows(q: Queryable, all: InsertRow[], now: number): Promise<Map<string, number>> {
  const seqs = new Map<string, number>();
  for (let i = 0; i < all.length; i += INSERT_CHUNK) {
    const chunk = all.slice(i, i + INSERT_CHUNK);
    const values: unknown[] = columnLiterals(chunk.map(({ m, claim }) => messageValues(m, claim)), NCOL);
    values.push(now);
    const r = await q.query<[number, string]>({ name: 'svc_insert', text: INSERT_SQL, values, rowMode: 'array' });
    for (const row of r.rows) seqs.set(row[1], row[0]);
  }
  return seqs;
}

/**
 * Statements of one kind (inserts, outcomes) a node has running at once. Two: a statement's
 * commit waits for its WAL flush, and the calls made meanwhile go out as the next batch; with
 * four (the batcher's default) the batches of a saturated node were smaller and more numerous,
 * each a round trip, a commit and an executor start of its own on the same two cores (A/B in
 * docs/readme/queue-bench.md).
 */
const BATCHES_IN_FLIGHT = 2;

/** Most entries of {@link PgQueueStore}'s id -> seq map of held leases (a bound against leaks; a miss only costs a lookup). */
const MAX_LEASED_SEQS = 100_000;

/**
 * Marks claimed messages delivered (one statement for a batch of outcomes); returns the seqs that
 * were still owned. Rows are found by seq (`s.seq = ANY($1)`: the batch's own rows through the
 * primary key). That condition is the statement's only restriction of `message_state`, so every
 * plan of it, the generic one of the prepared statement included, is an index scan of the primary
 * key whatever the planner thinks of the table's size: the statement is prepared once per
 * connection (a plan per batch cost PostgreSQL ~250 µs, 10-25 µs per delivered message). A join
 * by id let the planner pick a sequential scan of the whole state table per batch while the
 * tables were young and their statistics unknown.
 */
const completeSql = (attempts: boolean) => `WITH f AS (UPDATE message_state s SET status = 'delivered', finished_at = v.t, claimed_by = NULL, lease_until = NULL
        FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::int[]) AS v(seq, id, owner, t, st)
        WHERE s.seq = ANY($1::bigint[]) AND s.seq = v.seq AND s.status = 'pending' AND s.claimed_by = v.owner
        RETURNING s.seq, v.id, v.owner, v.t, v.st),${
  attempts ? `\n  e AS (UPDATE flow_control_attempts a SET ended_at = f.t FROM f WHERE a.message_id = f.id AND a.owner = f.owner AND a.ended_at IS NULL AND a.started = 1),` : ''}
  l AS (INSERT INTO logs (time, message_seq, state, response_status) SELECT t, seq, 'DELIVERED', st FROM f ORDER BY seq)
  SELECT seq FROM f`;
/** {@link completeSql} for batches with a flow-control message (its running attempt ends too), and for batches without. */
const COMPLETE_SQL = completeSql(true);
const COMPLETE_NO_ATTEMPTS_SQL = completeSql(false);

export interface PgStoreOptions {
  /** Connections of this node's pool (default 10). */
  poolSize?: number;
  /** Schema of the tables (`SVC_QUEUE_DATABASE_SCHEMA`, default `public`). */
  schema?: string;
}

/**
 * Opens the PostgreSQL queue store: connects, applies migrations (advisory lock), starts the
 * LISTEN connection. @throws PgStartupError (bad URL, unreachable, wrong password, newer schema).
 */
export async function openPgQueueStore(url: string, opts: PgStoreOptions = {}): Promise<PgQueueStore> {
  const schema = opts.schema ?? 'public';
  const pool = createPool(url, { max: opts.poolSize, schema });
  // An idle pooled connection that breaks (server restart) must not crash the process.
  pool.on('error', () => undefined);
  try {
    await preparePgDatabase(pool, url, schema);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
  const store = new PgQueueStore(pool, url, schema);
  store.startListening();
  return store;
}

export class PgQueueStore implements QueueStore {
  private readonly wakeListeners = new Set<(dueAt: number) => void>();
  /** Told of credential changes (NOTIFY) and of every (re)connect of the LISTEN connection. */
  private readonly credentialListeners = new Set<() => void>();
  /** Dispatcher ids of this node, each marked alive by an advisory lock on the LISTEN connection. */
  private readonly owners = new Set<string>();
  /** The LISTEN connection; it also holds the liveness locks of {@link owners}. */
  private readonly listener: PgListener;
  private closed = false;

  /** NOTIFY channel of this schema's nodes. */
  private readonly channel: string;
  /** NOTIFY channel of this schema's credential changes. */
  private readonly credentialsChannel: string;

  constructor(
    readonly pool: pg.Pool,
    private readonly url: string,
    private readonly schema = 'public',
  ) {
    this.channel = schema === 'public' ? WAKE_CHANNEL : `${WAKE_CHANNEL}_${schema}`;
    this.credentialsChannel = schema === 'public' ? CREDENTIALS_CHANNEL : `${CREDENTIALS_CHANNEL}_${schema}`;
    this.listener = new PgListener(
      () => createClient(this.url, this.schema),
      [this.channel, this.credentialsChannel],
      (n) => {
        if (n.channel === this.credentialsChannel) {
          for (const fn of this.credentialListeners) fn();
          return;
        }
        const at = Number(n.payload);
        for (const fn of this.wakeListeners) fn(Number.isFinite(at) ? at : 0);
      },
      async (c) => {
        for (const o of this.owners) await this.lockOwner(c, o);
        // changes made while this connection was down were not notified: re-read
        for (const fn of this.credentialListeners) fn();
      },
    );
  }

  // ---- wake-ups (LISTEN/NOTIFY) ----

  /**
   * Calls `fn(dueAt)` when another node (or this one) makes messages due (NOTIFY). Best effort:
   * while the LISTEN connection is down, nodes rely on polling. Returns the unsubscribe function.
   */
  onWake(fn: (dueAt: number) => void): () => void {
    this.wakeListeners.add(fn);
    return () => this.wakeListeners.delete(fn);
  }

  /** Opens (and keeps re-opening) the LISTEN connection. */
  startListening(): void {
    this.listener.start();
  }

  /**
   * Marks `owner` alive: an advisory lock (class {@link LIVENESS_LOCK_CLASS}, key = hash of the
   * owner) held by the LISTEN connection. When the node dies its connection closes and the lock
   * goes with it, so {@link releaseLeases} on any node hands its leases back at once instead of
   * after the lease.
   */
  async holdOwner(owner: string): Promise<void> {
    this.owners.add(owner);
    await this.listener.ready;
    const c = this.listener.current;
    if (c) await this.lockOwner(c, owner).catch(() => undefined);
  }

  /**
   * Takes the liveness lock of `owner` on the LISTEN connection `c`. A session of this node that
   * still holds it is one the server kept after this node lost its connection without the server
   * noticing (a network partition): it is ended first, or the lock would wait for it forever.
   */
  private async lockOwner(c: pg.Client, owner: string): Promise<void> {
    await c.query(
      `SELECT pg_terminate_backend(pid) FROM pg_locks
       WHERE locktype = 'advisory' AND classid = $1::int::oid AND objid = hashtext($2)::oid AND objsubid = 2 AND granted
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND pid <> pg_backend_pid()`,
      [LIVENESS_LOCK_CLASS, owner],
    );
    await c.query('SELECT pg_advisory_lock($1, hashtext($2))', [LIVENESS_LOCK_CLASS, owner]);
  }

  /** Sends a wake-up for messages due at `dueAt` (delivered to every node at commit). */
  async wake(q: Queryable, dueAt: number): Promise<void> {
    await q.query('SELECT pg_notify($1, $2)', [this.channel, String(dueAt)]);
  }

  /** The wake-up {@link wakeSoon} sends at the next event-loop turn: earliest due time and its promise. */
  private pendingWake: { dueAt: number; sent: Promise<void> } | undefined;

  /**
   * Wakes the nodes after a commit outside any transaction: the calls of one event-loop turn
   * (the publishes of one group commit) share ONE notification with their earliest due time
   * instead of a statement each. Best effort, never rejects (nodes also poll).
   */
  wakeSoon(dueAt: number): Promise<void> {
    if (this.pendingWake) {
      this.pendingWake.dueAt = Math.min(this.pendingWake.dueAt, dueAt);
      return this.pendingWake.sent;
    }
    const pending = { dueAt, sent: Promise.resolve() };
    pending.sent = new Promise<void>((resolve) =>
      setImmediate(() => {
        this.pendingWake = undefined;
        this.wake(this.pool, pending.dueAt).then(resolve, () => resolve());
      }),
    );
    this.pendingWake = pending;
    return pending.sent;
  }

  // ---- messages ----

  async enqueue(messages: NewMessage[], now: number, dedupWindowMs: number, claim?: EnqueueClaim): Promise<EnqueueResult[]> {
    const results: EnqueueResult[] = [];
    const keep: NewMessage[] = [];
    const run = async (q: Queryable) => {
      results.length = 0;
      keep.length = 0;
      for (const m of messages) {
        if (m.dedupKey !== undefined) {
          const put = await q.query(
            `INSERT INTO dedup (key, message_id, expires_at) VALUES ($1, $2, $3)
             ON CONFLICT (key) DO UPDATE SET message_id = EXCLUDED.message_id, expires_at = EXCLUDED.expires_at
             WHERE dedup.expires_at <= $4 RETURNING message_id`,
            [m.dedupKey, m.id, now + dedupWindowMs, now],
          );
          if (put.rowCount === 0) {
            const hit = await q.query<{ message_id: string }>('SELECT message_id FROM dedup WHERE key = $1', [m.dedupKey]);
            results.push({ messageId: hit.rows[0].message_id, deduplicated: true });
            continue;
          }
        }
        keep.push(m);
        results.push({ messageId: m.id, deduplicated: false });
      }
      return insertMessages(q, keep, now, claim);
    };
    // Without dedup keys an enqueue is rows of one INSERT statement (atomic, no BEGIN/COMMIT)
    // shared with the enqueues made at the same time (group commit, {@link PgBatcher}).
    let seqs: Map<string, number>;
    if (messages.some((m) => m.dedupKey !== undefined)) seqs = await inTransaction(this.pool, run);
    else {
      for (const m of messages) results.push({ messageId: m.id, deduplicated: false });
      keep.push(...messages);
      seqs = await this.inserts.submit({ rows: messages.map((m) => ({ m, claim: claim !== undefined && claim.ids.has(m.id) ? claim : undefined })), now });
    }
    const byId = new Map(keep.map((m) => [m.id, m]));
    for (const r of results) {
      if (r.deduplicated || !claim?.ids.has(r.messageId)) continue;
      const m = byId.get(r.messageId)!;
      r.claimed = { ...m, seq: seqs.get(m.id)!, status: 'pending', retried: 0, cancelRequested: false };
      this.remember(m.id, r.claimed.seq, m.flowControlKey !== undefined);
    }
    // Wake the nodes for due messages this node did not take itself (after the commit).
    let due = Infinity;
    for (const m of keep) if (!m.held && !(claim?.ids.has(m.id) ?? false)) due = Math.min(due, m.dueAt);
    if (due <= now) await this.wakeSoon(due);
    return results;
  }

  async getMessage(id: string): Promise<StoredMessage | undefined> {
    const r = await this.pool.query<MessageRow>(`SELECT * FROM messages WHERE id = $1 AND status = 'pending'`, [id]);
    return r.rows[0] ? rowToMessage(r.rows[0]) : undefined;
  }

  /**
   * Earliest due time (ms) of the unclaimed pending messages, undefined when none. Prepared once
   * per connection (the dispatcher asks after every claim that found fewer rows than it could
   * take: about one call per hundred messages under load, each planned anew when unnamed).
   */
  async nextDueAt(): Promise<number | undefined> {
    const r = await this.pool.query<[number | null]>({
      name: 'svc_next_due',
      text: `SELECT MIN(due_at) FROM message_state WHERE status = 'pending' AND claimed_by IS NULL`,
      rowMode: 'array',
    });
    return r.rows[0][0] ?? undefined;
  }

  async claimDue(o: ClaimOptions): Promise<StoredMessage[]> {
    const ex = o.excludeOrigins?.length ? 'AND NOT EXISTS (SELECT 1 FROM message_data d WHERE d.seq = s.seq AND d.origin = ANY($5::text[]))' : '';
    const params: unknown[] = [o.owner, o.leaseUntil, o.now, o.limit];
    if (ex) params.push(o.excludeOrigins);
    const r = await this.pool.query<MessageRow>({
      name: ex ? 'svc_claim_excluding' : 'svc_claim',
      text: `WITH pick AS (
         SELECT s.seq FROM message_state s WHERE s.status = 'pending' AND s.claimed_by IS NULL AND s.due_at <= $3 ${ex}
         ORDER BY s.due_at LIMIT $4 FOR UPDATE SKIP LOCKED),
       u AS (UPDATE message_state s SET claimed_by = $1, lease_until = $2 FROM pick WHERE s.seq = pick.seq RETURNING s.*),
       c AS (SELECT d.*, ${STATE_COLUMNS.split(', ').map((x) => `u.${x}`).join(', ')} FROM u JOIN message_data d ON d.seq = u.seq),
       l AS (INSERT INTO logs (time, message_seq, state) SELECT $3, seq, 'ACTIVE' FROM c ORDER BY due_at, seq),
       ${START_ATTEMPTS}
       SELECT * FROM c`,
      values: params,
    });
    const rows = r.rows.sort((a, b) => a.due_at - b.due_at || a.seq - b.seq);
    for (const row of rows) this.remember(row.id, row.seq, row.flow_control_key !== null);
    return rows.map(rowToMessage);
  }

  /**
   * Extends the leases `owner` holds on `ids` to `leaseUntil` (ms); returns the ids still owned
   * (a lease that lapsed and was taken by another node is not renewed). The rows of the leases
   * this node took are found by seq through the primary key (kept from the claim; a lookup by
   * id of every message in flight was a join over `message_data` per renewal); ids it does not
   * know are looked up by id.
   */
  async renewLeases(owner: string, ids: string[], leaseUntil: number): Promise<string[]> {
    if (!ids.length) return [];
    const bySeq = new Map<number, string>();
    const unknown: string[] = [];
    for (const id of ids) {
      const l = this.leased.get(id);
      if (l === undefined) unknown.push(id);
      else bySeq.set(l.seq, id);
    }
    const kept: string[] = [];
    if (bySeq.size) {
      const r = await this.pool.query<[number]>({
        name: 'svc_renew',
        text: `UPDATE message_state SET lease_until = $3 WHERE seq = ANY($2::bigint[]) AND status = 'pending' AND claimed_by = $1 RETURNING seq`,
        values: [owner, arrayLiteral([...bySeq.keys()]), leaseUntil],
        rowMode: 'array',
      });
      for (const [seq] of r.rows) kept.push(bySeq.get(seq)!);
    }
    if (unknown.length) {
      const r = await this.pool.query<{ id: string }>(
        `UPDATE message_state s SET lease_until = $3 FROM message_data d
         WHERE d.id = ANY($2::text[]) AND s.seq = d.seq AND s.status = 'pending' AND s.claimed_by = $1 RETURNING d.id`,
        [owner, unknown, leaseUntil],
      );
      for (const x of r.rows) kept.push(x.id);
    }
    return kept;
  }

  private async followUps(q: Queryable, followUps: NewMessage[], now: number): Promise<void> {
    if (!followUps.length) return;
    await insertMessages(q, followUps, now);
    const due = Math.min(...followUps.filter((f) => !f.held).map((f) => f.dueAt));
    if (due <= now) await this.wake(q, due);
  }

  /**
   * Enqueues without dedup keys made at the same time: one INSERT statement (the latest `now` logs
   * them all). At most {@link BATCHES_IN_FLIGHT} statements at once, so under load the enqueues
   * that arrive meanwhile wait and go out together.
   */
  private readonly inserts = new PgBatcher<{ rows: InsertRow[]; now: number }, Map<string, number>>(async (items) => {
    const seqs = await insertRows(this.pool, items.flatMap((i) => i.rows), Math.max(...items.map((i) => i.now)));
    return items.map(() => seqs);
  }, BATCHES_IN_FLIGHT);

  /** Delivered outcomes without follow-ups recorded at the same time: one statement, at most {@link BATCHES_IN_FLIGHT} at once. */
  private readonly completes = new PgBatcher<{ seq: number; id: string; owner: string; now: number; status: number | null; flowControl: boolean }, boolean>(async (items) => {
    const fc = items.some((i) => i.flowControl);
    const r = await this.pool.query<[number]>({
      name: fc ? 'svc_complete_fc' : 'svc_complete',
      text: fc ? COMPLETE_SQL : COMPLETE_NO_ATTEMPTS_SQL,
      values: [
        arrayLiteral(items.map((i) => i.seq)),
        arrayLiteral(items.map((i) => i.id)),
        arrayLiteral(items.map((i) => i.owner)),
        arrayLiteral(items.map((i) => i.now)),
        arrayLiteral(items.map((i) => i.status)),
      ],
      rowMode: 'array',
    });
    const done = new Set(r.rows.map((x) => x[0]));
    return items.map((i) => done.has(i.seq));
  }, BATCHES_IN_FLIGHT);

  /**
   * seq of the messages this node's dispatchers hold leases on (from {@link claimDue} and claimed
   * enqueues), and whether they have a flow-control key (only those can have a running attempt
   * in `flow_control_attempts`), so an outcome finds its row by primary key without a lookup by
   * id; dropped when the outcome is recorded.
   */
  private readonly leased = new Map<string, { seq: number; flowControl: boolean }>();

  private remember(id: string, seq: number, flowControl: boolean): void {
    if (this.leased.size >= MAX_LEASED_SEQS) this.leased.clear();
    this.leased.set(id, { seq, flowControl });
  }

  /**
   * seq of message `id` and whether it has a flow-control key (and forgets it: called once per
   * outcome); undefined when no such message. Not remembered: looked up.
   */
  private async leaseOf(id: string): Promise<{ seq: number; flowControl: boolean } | undefined> {
    const known = this.leased.get(id);
    if (known !== undefined) {
      this.leased.delete(id);
      return known;
    }
    const r = await this.pool.query<{ seq: number; k: string | null }>('SELECT seq, flow_control_key AS k FROM message_data WHERE id = $1', [id]);
    return r.rows[0] && { seq: r.rows[0].seq, flowControl: r.rows[0].k !== null };
  }

  async complete(id: string, owner: string, now: number, outcome: AttemptOutcome, followUps: NewMessage[]): Promise<boolean> {
    const lease = await this.leaseOf(id);
    if (lease === undefined) return false;
    const seq = lease.seq;
    if (!followUps.length) return this.completes.submit({ seq, id, owner, now, status: outcome.status ?? null, flowControl: lease.flowControl });
    const sql = `WITH f AS (UPDATE message_state SET status = 'delivered', finished_at = $1, claimed_by = NULL, lease_until = NULL
                   WHERE seq = $5 AND status = 'pending' AND claimed_by = $3 RETURNING seq),
                 e AS (${END_ATTEMPT} AND EXISTS (SELECT 1 FROM f))
                 INSERT INTO logs (time, message_seq, state, response_status) SELECT $1, seq, 'DELIVERED', $4 FROM f RETURNING message_seq`;
    const params = [now, id, owner, outcome.status ?? null, seq];
    return inTransaction(this.pool, async (c) => {
      if (!(await c.query(sql, params)).rowCount) return false;
      await this.followUps(c, followUps, now);
      return true;
    });
  }

  private async log(q: Queryable, time: number, seq: number, state: LogState, extra: { error?: string; next?: number; outcome?: AttemptOutcome } = {}): Promise<void> {
    const o = extra.outcome;
    await q.query(
      `INSERT INTO logs (time, message_seq, state, error, next_delivery_time, response_status, response_headers, response_body)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [time, seq, state, extra.error ?? null, extra.next ?? null, o?.status ?? null, o?.headers ? JSON.stringify(o.headers) : null, o?.body ?? null],
    );
  }

  private async owned(c: pg.PoolClient, id: string, owner: string): Promise<{ seq: number; cancel_requested: number } | undefined> {
    const seq = (await this.leaseOf(id))?.seq;
    if (seq === undefined) return undefined;
    const r = await c.query<{ seq: number; cancel_requested: number }>(
      `SELECT seq, cancel_requested FROM message_state WHERE seq = $1 AND status = 'pending' AND claimed_by = $2 FOR UPDATE`,
      [seq, owner],
    );
    return r.rows[0];
  }

  private async finish(q: Queryable, status: string, now: number, seq: number): Promise<void> {
    await q.query(`UPDATE message_state SET status = $1, finished_at = $2, claimed_by = NULL, lease_until = NULL WHERE seq = $3`, [status, now, seq]);
  }

  reschedule(id: string, owner: string, now: number, outcome: AttemptOutcome, dueAt: number, followUps: NewMessage[]): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      const r = await this.owned(c, id, owner);
      if (!r) return false;
      await c.query(END_ATTEMPT, [now, id, owner]);
      await this.log(c, now, r.seq, 'ERROR', { error: outcome.error, outcome, next: dueAt });
      await this.followUps(c, followUps, now);
      if (r.cancel_requested) {
        await this.finish(c, 'cancelled', now, r.seq);
        await this.log(c, now, r.seq, 'CANCELLED');
        return true;
      }
      await c.query(`UPDATE message_state SET retried = retried + 1, due_at = $1, claimed_by = NULL, lease_until = NULL WHERE seq = $2`, [dueAt, r.seq]);
      await this.log(c, now, r.seq, 'RETRY', { next: dueAt });
      return true;
    });
  }

  moveToDlq(id: string, owner: string, now: number, outcome: AttemptOutcome, dlqId: string, followUps: NewMessage[], run?: RunFailure): Promise<boolean> {
    return inTransaction(this.pool, async (c) => {
      const r = await this.owned(c, id, owner);
      if (!r) return false;
      await c.query(END_ATTEMPT, [now, id, owner]);
      await this.log(c, now, r.seq, 'ERROR', { error: outcome.error, outcome });
      await this.finish(c, 'failed', now, r.seq);
      await c.query(
        `INSERT INTO dlq (dlq_id, message_seq, created_at, response_status, response_headers, response_body, error) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [dlqId, r.seq, now, outcome.status ?? null, outcome.headers ? JSON.stringify(outcome.headers) : null, outcome.body ?? null, outcome.error ?? null],
      );
      await this.log(c, now, r.seq, 'FAILED', { error: outcome.error });
      await this.followUps(c, followUps, now);
      if (run) await c.query(toPgParams(FAIL_RUN_SQL), failRunParams(run, now, dlqId));
      return true;
    });
  }

  /**
   * Releases expired leases and the leases of owners not alive (no liveness lock, see
   * {@link holdOwner}); `all` changes nothing (other nodes may hold live leases). Wakes the nodes
   * when some were released.
   */
  async releaseLeases(now: number, _all = false): Promise<number> {
    return inTransaction(this.pool, async (c) => {
      const r = await c.query(
        `WITH alive AS (SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = $2::int::oid AND objsubid = 2 AND granted
                                       AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
         UPDATE message_state SET claimed_by = NULL, lease_until = NULL
         WHERE claimed_by IS NOT NULL AND lease_until IS NOT NULL
           AND (lease_until < $1 OR hashtext(claimed_by)::oid NOT IN (SELECT objid FROM alive))`,
        [now, LIVENESS_LOCK_CLASS],
      );
      const n = r.rowCount ?? 0;
      if (n) await this.wake(c, now);
      return n;
    });
  }

  cancel(filter: MessageFilter, now: number): Promise<number> {
    return inTransaction(this.pool, async (c) => {
      const { sql, params } = filterSql(filter, 'm.created_at', 'pg');
      const rows = (
        await c.query<{ seq: number; claimed_by: string | null; cancel_requested: number }>(
          toPgParams(`SELECT m.seq, m.claimed_by, m.cancel_requested FROM messages m WHERE m.status = 'pending' AND m.cancel_requested = 0 AND ${sql} ORDER BY m.seq FOR UPDATE`),
          params,
        )
      ).rows;
      const now1 = rows.filter((r) => r.claimed_by === null || r.claimed_by === 'held').map((r) => r.seq);
      const later = rows.filter((r) => !(r.claimed_by === null || r.claimed_by === 'held')).map((r) => r.seq);
      if (now1.length) {
        await c.query(`UPDATE message_state SET status = 'cancelled', finished_at = $1, claimed_by = NULL, lease_until = NULL WHERE seq = ANY($2::bigint[])`, [now, now1]);
      }
      if (later.length) await c.query(`UPDATE message_state SET cancel_requested = 1 WHERE seq = ANY($1::bigint[])`, [later]);
      // CANCEL_REQUESTED for every one, then CANCELLED for those cancelled at once (log order per message)
      await c.query(
        `INSERT INTO logs (time, message_seq, state)
         SELECT $1, s.seq, v.state FROM unnest($2::bigint[]) s(seq)
         CROSS JOIN (VALUES (1, 'CANCEL_REQUESTED'), (2, 'CANCELLED')) v(o, state)
         WHERE v.o = 1 OR s.seq = ANY($3::bigint[]) ORDER BY s.seq, v.o`,
        [now, rows.map((r) => r.seq), now1],
      );
      return rows.length;
    });
  }

  // ---- DLQ ----

  private async dlqRows(q: Queryable, filter: MessageFilter, page: Page | undefined, limit: number, lock = false): Promise<DlqRow[]> {
    const { sql, params } = filterSql(filter, 'd.created_at', 'pg');
    const desc = page?.order !== 'earliestFirst';
    let cur = '';
    if (page?.cursor !== undefined) {
      cur = desc ? 'AND d.seq < ?' : 'AND d.seq > ?';
      params.push(Number(page.cursor));
    }
    params.push(limit);
    const r = await q.query<DlqRow>(
      toPgParams(
        `SELECT d.* FROM dlq d JOIN messages m ON m.seq = d.message_seq WHERE ${sql} ${cur}
         ORDER BY d.seq ${desc ? 'DESC' : 'ASC'} LIMIT ?${lock ? ' FOR UPDATE OF d SKIP LOCKED' : ''}`,
      ),
      params,
    );
    return r.rows;
  }

  private async messagesBySeq(q: Queryable, seqs: number[]): Promise<Map<number, StoredMessage>> {
    const out = new Map<number, StoredMessage>();
    if (!seqs.length) return out;
    const r = await q.query<MessageRow>('SELECT * FROM messages WHERE seq = ANY($1::bigint[])', [[...new Set(seqs)]]);
    for (const row of r.rows) out.set(row.seq, rowToMessage(row));
    return out;
  }

  private async dlqEntries(q: Queryable, rows: DlqRow[]): Promise<DlqEntry[]> {
    const msgs = await this.messagesBySeq(q, rows.map((r) => r.message_seq));
    return rows.map((r) => dlqEntryFromRow(r, msgs.get(r.message_seq)!));
  }

  async listDlq(filter: MessageFilter, page: Page): Promise<PageResult<DlqEntry>> {
    const rows = await this.dlqRows(this.pool, filter, page, page.count + 1);
    const first = rows.slice(0, page.count);
    const entries = await this.dlqEntries(this.pool, first);
    const cut = takePage(first.map((r, i) => ({ seq: r.seq, e: entries[i] })), page, (x) => x.e, bytesOfDlqEntry);
    const more = cut.more || rows.length > first.length;
    return { items: cut.items.map((x) => x.item), cursor: more ? String(cut.items[cut.items.length - 1].row.seq) : undefined };
  }

  async getDlq(dlqId: string): Promise<DlqEntry | undefined> {
    const r = await this.pool.query<DlqRow>('SELECT * FROM dlq WHERE dlq_id = $1', [dlqId]);
    return r.rows[0] ? (await this.dlqEntries(this.pool, r.rows))[0] : undefined;
  }

  deleteDlq(filter: MessageFilter, limit: number): Promise<{ deleted: number; more: boolean }> {
    return inTransaction(this.pool, async (c) => {
      const rows = await this.dlqRows(c, filter, { order: 'earliestFirst', count: limit }, limit + 1, true);
      const take = rows.slice(0, limit);
      if (take.length) await c.query('DELETE FROM dlq WHERE seq = ANY($1::bigint[])', [take.map((r) => r.seq)]);
      return { deleted: take.length, more: rows.length > limit };
    });
  }

  retryDlq(
    filter: MessageFilter,
    limit: number,
    now: number,
    build: (entry: DlqEntry) => NewMessage,
  ): Promise<{ messageIds: string[]; more: boolean }> {
    return inTransaction(this.pool, async (c) => {
      const rows = await this.dlqRows(c, filter, { order: 'earliestFirst', count: limit }, limit + 1, true);
      const take = rows.slice(0, limit);
      const msgs = (await this.dlqEntries(c, take)).map(build);
      await insertMessages(c, msgs, now);
      if (take.length) await c.query('DELETE FROM dlq WHERE seq = ANY($1::bigint[])', [take.map((r) => r.seq)]);
      const due = Math.min(...msgs.filter((m) => !m.held).map((m) => m.dueAt));
      if (due <= now) await this.wake(c, due);
      return { messageIds: msgs.map((m) => m.id), more: rows.length > limit };
    });
  }

  // ---- logs ----

  async listLogs(filter: MessageFilter, page: Page): Promise<PageResult<LogEntry>> {
    const { sql, params } = filterSql(filter, 'l.time', 'pg');
    const desc = page.order !== 'earliestFirst';
    let cur = '';
    if (page.cursor !== undefined) {
      cur = desc ? 'AND l.seq < ?' : 'AND l.seq > ?';
      params.push(Number(page.cursor));
    }
    params.push(page.count + 1);
    const rows = (
      await this.pool.query<LogRow>(
        toPgParams(`SELECT l.* FROM logs l JOIN messages m ON m.seq = l.message_seq WHERE ${sql} ${cur} ORDER BY l.seq ${desc ? 'DESC' : 'ASC'} LIMIT ?`),
        params,
      )
    ).rows;
    const items = rows.slice(0, page.count);
    const msgs = await this.messagesBySeq(this.pool, items.map((r) => r.message_seq));
    const cut = takePage(items, page, (r) => logEntryFromRow(r, msgs.get(r.message_seq)!), bytesOfLogEntry);
    const more = cut.more || rows.length > items.length;
    return { items: cut.items.map((x) => x.item), cursor: more ? String(cut.items[cut.items.length - 1].row.seq) : undefined };
  }

  /** Deletes with `sql` (which must take `LIMIT $n` rows) until fewer than a batch are left. */
  private async pruneBatches(sql: string, params: unknown[]): Promise<void> {
    for (;;) {
      const r = await this.pool.query(sql, [...params, PRUNE_BATCH]);
      if ((r.rowCount ?? 0) < PRUNE_BATCH || this.closed) return;
    }
  }

  async prune(now: number, logsBefore: number, dlqBefore?: number): Promise<void> {
    const n = 2; // index of the LIMIT parameter
    await this.pruneBatches(`DELETE FROM dedup WHERE key IN (SELECT key FROM dedup WHERE expires_at <= $1 LIMIT $${n} FOR UPDATE SKIP LOCKED)`, [now]);
    await this.pruneBatches(`DELETE FROM logs WHERE seq IN (SELECT seq FROM logs WHERE time < $1 LIMIT $${n} FOR UPDATE SKIP LOCKED)`, [logsBefore]);
    if (dlqBefore !== undefined) {
      await this.pruneBatches(`DELETE FROM dlq WHERE seq IN (SELECT seq FROM dlq WHERE created_at < $1 LIMIT $${n} FOR UPDATE SKIP LOCKED)`, [dlqBefore]);
    }
    await this.resources().pruneRateWindows(now);
    await this.pruneBatches(
      `WITH s AS (DELETE FROM message_state WHERE seq IN (
         SELECT seq FROM message_state m WHERE status <> 'pending' AND finished_at < $1
           AND NOT EXISTS (SELECT 1 FROM dlq WHERE dlq.message_seq = m.seq)
           AND NOT EXISTS (SELECT 1 FROM logs WHERE logs.message_seq = m.seq)
         LIMIT $${n} FOR UPDATE SKIP LOCKED) RETURNING seq)
       DELETE FROM message_data WHERE seq IN (SELECT seq FROM s)`,
      [logsBefore],
    );
  }

  async counts(now: number): Promise<MessageCounts> {
    const r = await this.pool.query<MessageCounts>(
      `SELECT COUNT(*) FILTER (WHERE claimed_by IS NULL AND due_at <= $1)::int AS "ready",
              COUNT(*) FILTER (WHERE claimed_by IS NULL AND due_at > $1)::int AS "delayed",
              COUNT(*) FILTER (WHERE claimed_by IS NOT NULL AND claimed_by <> 'held' AND lease_until IS NOT NULL)::int AS "inFlight",
              COUNT(*) FILTER (WHERE claimed_by = 'held')::int AS "held",
              (SELECT COUNT(*) FROM dlq)::int AS "dlq"
       FROM message_state WHERE status = 'pending'`,
      [now],
    );
    return r.rows[0];
  }

  /** {@link QueueStore.eventHistogram}: one GROUP BY over the `logs_time` index range. */
  async eventHistogram(from: number, to: number, buckets: number): Promise<Record<string, number[]>> {
    const width = Math.max(1, Math.ceil((to - from) / buckets));
    const r = await this.pool.query<{ b: number; state: string; n: number }>(
      `SELECT ((time - $1) / $2)::int AS b, state, COUNT(*)::int AS n FROM logs WHERE time >= $1 AND time < $3 GROUP BY 1, 2`,
      [from, width, to],
    );
    const out: Record<string, number[]> = {};
    for (const row of r.rows) (out[row.state] ??= new Array<number>(buckets).fill(0))[Math.min(buckets - 1, row.b)] += row.n;
    return out;
  }

  sharedCredentials(): SharedCredentials {
    return (this.credentialStore ??= new PgSharedCredentials(this.pool, this.credentialsChannel, (fn) => {
      this.credentialListeners.add(fn);
      return () => this.credentialListeners.delete(fn);
    }));
  }
  private credentialStore: SharedCredentials | undefined;

  /** The URL-group / queue / flow-control / schedule tables on the same handle (one object serves all four). */
  private resources(): PgResourceStore {
    return (this.resourceStore ??= new PgResourceStore(this.pool, this));
  }
  private resourceStore: PgResourceStore | undefined;
  urlGroups(): UrlGroupStore {
    return this.resources();
  }
  queues(): QueueAdmissionStore {
    return this.resources();
  }
  flowControl(): FlowControlStore {
    return this.resources();
  }
  schedules(): ScheduleStore {
    return this.resources();
  }

  workflows(): WorkflowStore {
    return (this.workflowStore ??= new PgWorkflowStore(this.pool));
  }
  private workflowStore: WorkflowStore | undefined;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.listener.close();
    await this.pool.end();
  }
}

/**
 * The embedded {@link QueueStore}: SQLite (better-sqlite3) in `<dataDir>/queue.sqlite`.
 *
 * Durability: WAL; every acknowledged change (publish, cancel, DLQ moves and DLQ operations)
 * resolves only after its commit and an fsync of the WAL — the guarantee of `synchronous = FULL`,
 * done asynchronously and shared by every write of the batch ({@link GroupCommitter}). Delivery
 * bookkeeping (claim/lease, complete, reschedule, lease release, pruning) resolves at COMMIT: a
 * process crash loses none of it, and a power loss can only turn it back into "pending", i.e. one
 * more delivery (at-least-once). Reads run synchronously on the same handle.
 *
 * One method per state transition, each a single transaction.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
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
import { GroupCommitter, type FsyncPolicy } from './group-commit.js';
import { backupSqlite } from '../../sqlite-backup.js';
import { migrate } from './migrate.js';
import {
  dlqEntryFromRow,
  filterSql,
  insertMessageSqlFor,
  logEntryFromRow,
  takePage,
  bytesOfDlqEntry,
  bytesOfLogEntry,
  messageValues,
  presentMessageValues,
  rowToMessage,
  type DlqRow,
  type LogRow,
  type MessageRow,
} from './sqlite-rows.js';
import type { ClaimOptions, EnqueueClaim, MessageCounts, QueueStore, RunFailure } from './types.js';
import { SqliteResourceStore } from './sqlite-resources.js';
import { BOUND_LIMIT, statementCache } from './sqlite-statements.js';
import { logCursorTerm, logEntries, logStateTerm, type SqliteLogRow } from './sqlite-logs.js';
import type { FlowControlStore, QueueAdmissionStore, ScheduleStore, UrlGroupStore } from './resource-types.js';
import { FAIL_RUN_SQL, failRunParams, SqliteWorkflowStore } from './sqlite-workflows.js';
import type { WorkflowStore } from './workflow-types.js';

/**
 * Page size (bytes) of a new queue database. Every commit writes each page it dirtied to the WAL
 * (and checksums it), and a delivered message dirties about 15 pages over its two commits (the
 * message row, its id and lease index entries, three log rows and their two indexes, the outcome).
 * With 1 KiB pages instead of SQLite's default 4 KiB that is ~18 KB of WAL per message instead of
 * ~62 KB, and ~29,000 fewer CPU instructions per message in the store, one message per commit;
 * with 64 messages per commit (under load) the CPU is the same within noise and the WAL per
 * message halves (`docs/readme/queue-bench.md` "Where the time goes"). A database created with another
 * page size keeps it (`PRAGMA page_size` does not change an existing WAL database).
 */
const PAGE_SIZE = 1024;

/** Most message ids kept in `SqliteQueueStore.leasedSeq`. */
const MAX_LEASED = 100_000;

/** Most INSERT statements kept in `SqliteQueueStore.insertStmts` (one per set of present columns). */
const MAX_INSERT_SHAPES = 64;

/** Rows deleted per pruning write. */
const PRUNE_BATCH = 5000;

/**
 * Opens (creating and migrating) the SQLite queue store at `file`; `fsync` is when acknowledged
 * writes reach the disk ({@link FsyncPolicy}, `SVC_QUEUE_FSYNC`; default `always`).
 */
export function openSqliteQueueStore(file: string, fsync: FsyncPolicy = 'always'): SqliteQueueStore {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const db = new Database(file);
  // before the first write (a database that exists keeps its page size): see PAGE_SIZE
  db.pragma(`page_size = ${PAGE_SIZE}`);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('cache_size = -65536'); // 64 MB page cache
  migrate(db, file);
  return new SqliteQueueStore(db, `${file}-wal`, fsync);
}

export class SqliteQueueStore implements QueueStore {
  private readonly writes: GroupCommitter;
  private readonly st;
  /** Statements prepared on first use, by SQL text (`sqlite-statements.ts`). */
  private readonly stmt: (sql: string) => Database.Statement;
  private readonly claimStmts = new Map<number, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    walFile: string,
    fsync: FsyncPolicy = 'always',
  ) {
    this.writes = new GroupCommitter(db, walFile, fsync);
    this.stmt = statementCache(db);
    this.st = {
      logCreated: db.prepare(`INSERT INTO logs (time, message_seq, state, next_delivery_time) VALUES (?, ?, 'CREATED', ?)`),
      // the enqueue hand-off's two events in one row, listed as two (`logEntries` in sqlite-logs.ts)
      logCreatedActive: db.prepare(
        `INSERT INTO logs (time, message_seq, state, next_delivery_time, active) VALUES (?, ?, 'CREATED', ?, 1)`,
      ),
      // complete(): the ownership check and the transition in one statement, the row found by
      // its id or (leased here: `leasedSeq`) by its primary key
      finishOwned: db.prepare(
        `UPDATE messages SET status = ?, finished_at = ?, claimed_by = NULL, lease_until = NULL
         WHERE id = ? AND status = 'pending' AND claimed_by = ? RETURNING seq`,
      ).pluck(),
      // the delivered path's constants written into the SQL (a bound string is converted from V8
      // and copied on every run)
      deliveredOwnedSeq: db.prepare(
        `UPDATE messages SET status = 'delivered', finished_at = ?, claimed_by = NULL, lease_until = NULL
         WHERE seq = ? AND status = 'pending' AND claimed_by = ?`,
      ),
      logDelivered: db.prepare(`INSERT INTO logs (time, message_seq, state, response_status) VALUES (?, ?, 'DELIVERED', ?)`),
      logActive: db.prepare(`INSERT INTO logs (time, message_seq, state) VALUES (?, ?, 'ACTIVE')`),
      log: db.prepare(
        `INSERT INTO logs (time, message_seq, state, error, next_delivery_time, response_status, response_headers, response_body)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      dedupGet: db.prepare('SELECT message_id, expires_at FROM dedup WHERE key = ?'),
      dedupPut: db.prepare('INSERT OR REPLACE INTO dedup (key, message_id, expires_at) VALUES (?, ?, ?)'),
      getPending: db.prepare(`SELECT * FROM messages WHERE id = ? AND status = 'pending'`),
      getOwned: db.prepare(`SELECT seq, cancel_requested FROM messages WHERE id = ? AND status = 'pending' AND claimed_by = ?`),
      bySeq: db.prepare('SELECT * FROM messages WHERE seq = ?'),
      nextDue: db.prepare(`SELECT MIN(due_at) AS t FROM messages WHERE status = 'pending' AND claimed_by IS NULL`),
      // readiness (ping())
      ping: db.prepare('SELECT 1 AS ok'),
      finish: db.prepare(
        `UPDATE messages SET status = ?, finished_at = ?, claimed_by = NULL, lease_until = NULL WHERE seq = ?`,
      ),
      retry: db.prepare(
        `UPDATE messages SET retried = retried + 1, due_at = ?, claimed_by = NULL, lease_until = NULL WHERE seq = ?`,
      ),
      dlqInsert: db.prepare(
        `INSERT INTO dlq (dlq_id, message_seq, created_at, response_status, response_headers, response_body, error)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      releaseExpired: db.prepare(
        `UPDATE messages SET claimed_by = NULL, lease_until = NULL WHERE claimed_by IS NOT NULL AND lease_until < ?`,
      ),
      // lease_until IS NULL = 'held' (waiting for queue/flow-control admission), not a lease.
      releaseAll: db.prepare(`UPDATE messages SET claimed_by = NULL, lease_until = NULL WHERE claimed_by IS NOT NULL AND lease_until IS NOT NULL`),
    };
  }

  /**
   * The `seq` of messages leased by this process, by id, from the claim to their outcome: a
   * message's seq never changes, so complete() finds the row by its primary key instead of
   * through the `id` index (the ownership is still checked in the UPDATE). An entry whose
   * outcome never comes (a lease handed back, a process that stops delivering) is dropped
   * when the map passes {@link MAX_LEASED}; a missing entry only means the lookup by id.
   */
  private readonly leasedSeq = new Map<string, number>();

  private lease(id: string, seq: number): void {
    if (this.leasedSeq.size >= MAX_LEASED) this.leasedSeq.clear();
    this.leasedSeq.set(id, seq);
  }

  private log(time: number, seq: number, state: LogState, extra: { error?: string; next?: number; outcome?: AttemptOutcome } = {}): void {
    const o = extra.outcome;
    this.st.log.run(
      time,
      seq,
      state,
      extra.error ?? null,
      extra.next ?? null,
      o?.status ?? null,
      o?.headers ? JSON.stringify(o.headers) : null,
      o?.body ?? null,
    );
  }

  /**
   * The INSERT of each set of present columns ({@link presentMessageValues}): a message binds only
   * its non-NULL values. Few sets occur (publish options a deployment uses); past
   * {@link MAX_INSERT_SHAPES} the map starts over.
   */
  private readonly insertStmts = new Map<number, Database.Statement>();

  private insertMessage(m: NewMessage, now: number, claim?: { owner: string; leaseUntil: number }): number {
    const values = messageValues(m, claim);
    const mask = presentMessageValues(values);
    let insert = this.insertStmts.get(mask);
    if (insert === undefined) {
      insert = this.db.prepare(insertMessageSqlFor(mask));
      if (this.insertStmts.size >= MAX_INSERT_SHAPES) this.insertStmts.clear();
      this.insertStmts.set(mask, insert);
    }
    // the values as arguments, not one array: better-sqlite3 reads an array's elements one
    // `Object::Get` call each (~9,000 fewer instructions per INSERT of 31 values spread)
    const seq = Number(insert.run(...values).lastInsertRowid);
    if (claim) this.st.logCreatedActive.run(now, seq, m.dueAt);
    else this.st.logCreated.run(now, seq, m.dueAt);
    return seq;
  }

  enqueue(messages: NewMessage[], now: number, dedupWindowMs: number, claim?: EnqueueClaim): Promise<EnqueueResult[]> {
    return this.writes.run(() => {
      return messages.map((m): EnqueueResult => {
        if (m.dedupKey !== undefined) {
          const hit = this.st.dedupGet.get(m.dedupKey) as { message_id: string; expires_at: number } | undefined;
          if (hit && hit.expires_at > now) return { messageId: hit.message_id, deduplicated: true };
          this.st.dedupPut.run(m.dedupKey, m.id, now + dedupWindowMs);
        }
        const take = claim !== undefined && claim.ids.has(m.id);
        const seq = this.insertMessage(m, now, take ? claim : undefined);
        if (!take) return { messageId: m.id, deduplicated: false };
        this.lease(m.id, seq);
        const claimed: StoredMessage = { ...m, seq, status: 'pending', retried: 0, cancelRequested: false };
        return { messageId: m.id, deduplicated: false, claimed };
      });
    });
  }

  async getMessage(id: string): Promise<StoredMessage | undefined> {
    const r = this.st.getPending.get(id) as MessageRow | undefined;
    return r ? rowToMessage(r) : undefined;
  }

  async nextDueAt(): Promise<number | undefined> {
    const r = this.st.nextDue.get() as { t: number | null };
    return r.t ?? undefined;
  }

  claimDue(o: ClaimOptions): Promise<StoredMessage[]> {
    return this.writes.run(() => {
      const nEx = o.excludeOrigins?.length ?? 0;
      let stmt = this.claimStmts.get(nEx);
      if (!stmt) {
        const ex = nEx ? `AND origin NOT IN (${Array(nEx).fill('?').join(',')})` : '';
        stmt = this.db.prepare(
          `UPDATE messages SET claimed_by = ?, lease_until = ? WHERE seq IN (
             SELECT seq FROM messages WHERE status = 'pending' AND claimed_by IS NULL AND due_at <= ? ${ex}
             ORDER BY due_at ${BOUND_LIMIT}) RETURNING *`,
        );
        if (this.claimStmts.size < 64) this.claimStmts.set(nEx, stmt);
      }
      const rows = stmt
        .all(o.owner, o.leaseUntil, o.now, ...(o.excludeOrigins ?? []), o.limit) as MessageRow[];
      rows.sort((a, b) => a.due_at - b.due_at || a.seq - b.seq);
      for (const r of rows) {
        this.st.logActive.run(o.now, r.seq);
        this.lease(r.id, r.seq);
      }
      return rows.map(rowToMessage);
    }, false);
  }

  complete(id: string, owner: string, now: number, outcome: AttemptOutcome, followUps: NewMessage[]): Promise<boolean> {
    return this.writes.run(() => {
      let seq = this.leasedSeq.get(id);
      if (seq !== undefined) {
        this.leasedSeq.delete(id);
        if (this.st.deliveredOwnedSeq.run(now, seq, owner).changes === 0) return false;
      } else {
        seq = this.st.finishOwned.get('delivered', now, id, owner) as number | undefined;
        if (seq === undefined) return false;
      }
      this.st.logDelivered.run(now, seq, outcome.status ?? null);
      for (const f of followUps) this.insertMessage(f, now);
      return true;
    }, false);
  }

  reschedule(id: string, owner: string, now: number, outcome: AttemptOutcome, dueAt: number, followUps: NewMessage[]): Promise<boolean> {
    return this.writes.run(() => {
      this.leasedSeq.delete(id);
      const r = this.st.getOwned.get(id, owner) as { seq: number; cancel_requested: number } | undefined;
      if (!r) return false;
      this.log(now, r.seq, 'ERROR', { error: outcome.error, outcome, next: dueAt });
      for (const f of followUps) this.insertMessage(f, now);
      if (r.cancel_requested) {
        this.st.finish.run('cancelled', now, r.seq);
        this.log(now, r.seq, 'CANCELLED');
        return true;
      }
      this.st.retry.run(dueAt, r.seq);
      this.log(now, r.seq, 'RETRY', { next: dueAt });
      return true;
    }, false);
  }

  moveToDlq(id: string, owner: string, now: number, outcome: AttemptOutcome, dlqId: string, followUps: NewMessage[], run?: RunFailure): Promise<boolean> {
    return this.writes.run(() => {
      this.leasedSeq.delete(id);
      const r = this.st.getOwned.get(id, owner) as { seq: number; cancel_requested: number } | undefined;
      if (!r) return false;
      this.log(now, r.seq, 'ERROR', { error: outcome.error, outcome });
      this.st.finish.run('failed', now, r.seq);
      this.st.dlqInsert.run(
        dlqId,
        r.seq,
        now,
        outcome.status ?? null,
        outcome.headers ? JSON.stringify(outcome.headers) : null,
        outcome.body ?? null,
        outcome.error ?? null,
      );
      this.log(now, r.seq, 'FAILED', { error: outcome.error });
      for (const f of followUps) this.insertMessage(f, now);
      if (run) this.stmt(FAIL_RUN_SQL).run(...failRunParams(run, now, dlqId));
      return true;
    });
  }

  releaseLeases(now: number, all = false): Promise<number> {
    return this.writes.run(() => (all ? this.st.releaseAll.run() : this.st.releaseExpired.run(now)).changes, false);
  }

  cancel(filter: MessageFilter, now: number): Promise<number> {
    return this.writes.run(() => {
      const { sql, params } = filterSql(filter, 'm.created_at');
      const rows = this.stmt(`SELECT seq, claimed_by, cancel_requested FROM messages m WHERE m.status = 'pending' AND ${sql}`)
        .all(...params) as { seq: number; claimed_by: string | null; cancel_requested: number }[];
      let n = 0;
      for (const r of rows) {
        if (r.cancel_requested) continue;
        n++;
        this.log(now, r.seq, 'CANCEL_REQUESTED');
        if (r.claimed_by === null || r.claimed_by === 'held') {
          this.st.finish.run('cancelled', now, r.seq);
          this.log(now, r.seq, 'CANCELLED');
        } else {
          this.stmt('UPDATE messages SET cancel_requested = 1 WHERE seq = ?').run(r.seq);
        }
      }
      return n;
    });
  }

  private dlqRows(filter: MessageFilter, page: Page | undefined, limit: number): DlqRow[] {
    const { stmt, params } = this.dlqQuery(filter, page);
    return stmt.all(...params, limit) as DlqRow[];
  }

  /** The DLQ listing statement for `filter`/`page` and its parameters (the LIMIT goes last). */
  private dlqQuery(filter: MessageFilter, page: Page | undefined): { stmt: Database.Statement; params: unknown[] } {
    const { sql, params } = filterSql(filter, 'd.created_at');
    const desc = page?.order !== 'earliestFirst';
    let cur = '';
    if (page?.cursor !== undefined) {
      cur = desc ? 'AND d.seq < ?' : 'AND d.seq > ?';
      params.push(Number(page.cursor));
    }
    const stmt = this.stmt(
      `SELECT d.* FROM dlq d JOIN messages m ON m.seq = d.message_seq WHERE ${sql} ${cur}
       ORDER BY d.seq ${desc ? 'DESC' : 'ASC'} ${BOUND_LIMIT}`,
    );
    return { stmt, params };
  }

  private dlqEntry(r: DlqRow): DlqEntry {
    return dlqEntryFromRow(r, rowToMessage(this.st.bySeq.get(r.message_seq) as MessageRow));
  }

  async listDlq(filter: MessageFilter, page: Page): Promise<PageResult<DlqEntry>> {
    const { stmt, params } = this.dlqQuery(filter, page);
    const rows = stmt.iterate(...params, page.count + 1) as IterableIterator<DlqRow>;
    const { items, more } = takePage(rows, page, (r) => this.dlqEntry(r), bytesOfDlqEntry);
    return { items: items.map((x) => x.item), cursor: more ? String(items[items.length - 1].row.seq) : undefined };
  }

  async getDlq(dlqId: string): Promise<DlqEntry | undefined> {
    const r = this.stmt('SELECT * FROM dlq WHERE dlq_id = ?').get(dlqId) as DlqRow | undefined;
    return r ? this.dlqEntry(r) : undefined;
  }

  deleteDlq(filter: MessageFilter, limit: number): Promise<{ deleted: number; more: boolean }> {
    return this.writes.run(() => {
      const rows = this.dlqRows(filter, { order: 'earliestFirst', count: limit }, limit + 1);
      const take = rows.slice(0, limit);
      const del = this.stmt('DELETE FROM dlq WHERE seq = ?');
      for (const r of take) del.run(r.seq);
      return { deleted: take.length, more: rows.length > limit };
    });
  }

  retryDlq(
    filter: MessageFilter,
    limit: number,
    now: number,
    build: (entry: DlqEntry) => NewMessage,
  ): Promise<{ messageIds: string[]; more: boolean }> {
    return this.writes.run(() => {
      const rows = this.dlqRows(filter, { order: 'earliestFirst', count: limit }, limit + 1);
      const take = rows.slice(0, limit);
      const del = this.stmt('DELETE FROM dlq WHERE seq = ?');
      const ids: string[] = [];
      for (const r of take) {
        const m = build(this.dlqEntry(r));
        this.insertMessage(m, now);
        del.run(r.seq);
        ids.push(m.id);
      }
      return { messageIds: ids, more: rows.length > limit };
    });
  }

  /**
   * {@link QueueStore.listLogs}: a row holding CREATED and ACTIVE is listed as both, and the cursor
   * is an entry key (`sqlite-logs.ts`).
   */
  async listLogs(filter: MessageFilter, page: Page): Promise<PageResult<LogEntry>> {
    const { state, ...rest } = filter;
    const { sql, params } = filterSql(rest, 'l.time');
    const desc = page.order !== 'earliestFirst';
    let where = sql;
    if (state?.length) {
      const t = logStateTerm(state);
      where += ` AND ${t.sql}`;
      params.push(...t.params);
    }
    const cursor = page.cursor === undefined ? undefined : Number(page.cursor);
    let cur = '';
    if (cursor !== undefined) {
      const t = logCursorTerm(cursor, desc);
      cur = t.sql;
      params.push(t.param);
    }
    // count + 2 rows: the first row may yield nothing (the half before the cursor), every other
    // row at least one entry
    const rows = this.stmt(
        `SELECT l.* FROM logs l JOIN messages m ON m.seq = l.message_seq WHERE ${where} ${cur}
         ORDER BY l.seq ${desc ? 'DESC' : 'ASC'} ${BOUND_LIMIT}`,
      )
      .iterate(...params, page.count + 2) as IterableIterator<SqliteLogRow>;
    const cache = new Map<number, StoredMessage>();
    const msg = (seq: number) => {
      let m = cache.get(seq);
      if (!m) cache.set(seq, (m = rowToMessage(this.st.bySeq.get(seq) as MessageRow)));
      return m;
    };
    const { items, more } = takePage(logEntries(rows, desc, cursor, state), page, (e) => logEntryFromRow(e.row, msg(e.row.message_seq)), bytesOfLogEntry);
    return { items: items.map((x) => x.item), cursor: more ? String(items[items.length - 1].row.seq) : undefined };
  }

  async prune(now: number, logsBefore: number, dlqBefore?: number): Promise<void> {
    // In batches of PRUNE_BATCH rows, each its own (relaxed) write: a big backlog never holds the
    // write lock for long, and publishes commit between batches.
    const batches = async (sql: string, ...params: unknown[]) => {
      const st = this.stmt(sql);
      while ((await this.writes.run(() => st.run(...params, PRUNE_BATCH).changes, false)) >= PRUNE_BATCH);
    };
    await batches(`DELETE FROM dedup WHERE key IN (SELECT key FROM dedup WHERE expires_at <= ? ${BOUND_LIMIT})`, now);
    await this.pruneLogs(logsBefore);
    if (dlqBefore !== undefined) await batches(`DELETE FROM dlq WHERE seq IN (SELECT seq FROM dlq WHERE created_at < ? ${BOUND_LIMIT})`, dlqBefore);
    await batches(
      // never the message with the largest seq: no AUTOINCREMENT (migration 0007), a new message
      // takes the largest seq + 1, and keeping that row keeps every seq given once
      `DELETE FROM messages WHERE seq IN (SELECT seq FROM messages WHERE status <> 'pending' AND finished_at < ?
         AND seq < (SELECT MAX(seq) FROM messages)
         AND NOT EXISTS (SELECT 1 FROM dlq WHERE dlq.message_seq = messages.seq)
         AND NOT EXISTS (SELECT 1 FROM logs WHERE logs.message_seq = messages.seq) ${BOUND_LIMIT})`,
      logsBefore,
    );
  }

  /**
   * Deletes the `logs` rows older than `before` (ms), in batches of {@link PRUNE_BATCH} rows, each
   * its own write. `logs` has no AUTOINCREMENT (migration 0006): a new row takes the largest `seq`
   * + 1, so when a batch deletes the row with the largest `seq`, a marker row (`message_seq` 0: no
   * message, so no listing shows it and the histogram leaves it out; `time` 0) takes that `seq` in the same
   * transaction, and no `seq` is ever given out twice: a page cursor a client holds (an entry key
   * from `seq`, `sqlite-logs.ts`) keeps meaning "after / before this entry". A marker is deleted
   * like any old row once it is not the newest.
   */
  private async pruneLogs(before: number): Promise<void> {
    const del = this.stmt(
      `DELETE FROM logs WHERE seq IN (SELECT seq FROM logs WHERE time < ? AND (message_seq <> 0 OR seq < (SELECT MAX(seq) FROM logs)) ${BOUND_LIMIT})`,
    );
    const max = this.stmt('SELECT MAX(seq) AS s FROM logs');
    const mark = this.stmt(`INSERT INTO logs (seq, time, message_seq, state) SELECT ?, 0, 0, 'CREATED' WHERE NOT EXISTS (SELECT 1 FROM logs WHERE seq >= ?)`);
    const batch = () => {
      const newest = (max.get() as { s: number | null }).s;
      const n = del.run(before, PRUNE_BATCH).changes;
      if (newest !== null) mark.run(newest, newest);
      return n;
    };
    while ((await this.writes.run(batch, false)) >= PRUNE_BATCH);
  }

  /** The URL-group / queue / flow-control / schedule tables on the same handle (one object serves all four). */
  private resources(): SqliteResourceStore {
    return (this.resourceStore ??= new SqliteResourceStore(this.db, this.writes));
  }
  private resourceStore: SqliteResourceStore | undefined;
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

  /** Workflow runs and steps on the same handle. */
  workflows(): WorkflowStore {
    return (this.workflowStore ??= new SqliteWorkflowStore(this.db, this.writes));
  }
  private workflowStore: WorkflowStore | undefined;

  /**
   * {@link QueueStore.counts}: five COUNT queries, each on a partial index (`messages_due`,
   * `messages_held_due`, `messages_lease`; `dlq` by its primary key).
   */
  async counts(now: number): Promise<MessageCounts> {
    const n = (sql: string, ...args: number[]) => (this.stmt(sql).get(...args) as { n: number }).n;
    return {
      ready: n(`SELECT COUNT(*) AS n FROM messages WHERE status = 'pending' AND claimed_by IS NULL AND due_at <= ?`, now),
      delayed: n(`SELECT COUNT(*) AS n FROM messages WHERE status = 'pending' AND claimed_by IS NULL AND due_at > ?`, now),
      inFlight: n(`SELECT COUNT(*) AS n FROM messages WHERE claimed_by IS NOT NULL AND claimed_by <> 'held' AND lease_until IS NOT NULL`),
      held: n(`SELECT COUNT(*) AS n FROM messages WHERE claimed_by = 'held'`),
      dlq: n(`SELECT COUNT(*) AS n FROM dlq`),
    };
  }

  /**
   * {@link QueueStore.eventHistogram}: one GROUP BY over the `logs_time` index range; a row holding
   * CREATED and ACTIVE counts as one of each (`sqlite-logs.ts`); the marker row of the largest
   * `seq` ({@link pruneLogs}) is not an entry.
   */
  async eventHistogram(from: number, to: number, buckets: number): Promise<Record<string, number[]>> {
    const width = Math.max(1, Math.ceil((to - from) / buckets));
    const rows = this.stmt(
      `SELECT (time - ?) / ? AS b, state, COUNT(*) AS n, SUM(active) AS a FROM logs WHERE time >= ? AND time < ? AND message_seq <> 0 GROUP BY b, state`,
    ).all(from, width, from, to) as { b: number; state: string; n: number; a: number }[];
    const out: Record<string, number[]> = {};
    const add = (state: string, b: number, n: number) => ((out[state] ??= new Array<number>(buckets).fill(0))[b] += n);
    for (const r of rows) {
      const b = Math.min(buckets - 1, Math.floor(r.b));
      add(r.state, b, r.n);
      if (r.a > 0) add('ACTIVE', b, r.a);
    }
    return out;
  }

  async ping(): Promise<boolean> {
    if (!this.db.open) return false;
    try {
      return (this.st.ping.get() as { ok: number }).ok === 1;
    } catch {
      return false;
    }
  }

  observeFsync(observe: (seconds: number) => void): void {
    this.writes.onFsync = observe;
  }

  async backup(file: string): Promise<{ schemaVersion: number }> {
    return { schemaVersion: (await backupSqlite(this.db.name, file)).userVersion };
  }

  async close(): Promise<void> {
    await this.writes.close();
    if (this.db.open) this.db.close();
  }
}

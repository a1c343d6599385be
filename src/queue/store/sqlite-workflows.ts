/**
 * SQLite {@link WorkflowStore} on the queue database handle (migration `0003_workflows.sql`),
 * sharing the queue store's group committer so run changes are group-committed and fsynced like
 * publishes.
 */
import type Database from 'better-sqlite3';
import type { GroupCommitter } from './group-commit.js';
import type { RunFailure } from './types.js';
import { whereBuilder } from './sqlite-rows.js';
import { BOUND_LIMIT, statementCache } from './sqlite-statements.js';
import { newRunValues, type NewRun, type RunConfig, type RunFilter, type StoredNotify, type RunState, type Waiter, type WorkflowRun, type WorkflowStep, type WorkflowStore } from './workflow-types.js';

/** A `workflow_runs` row (both stores). */
export interface RunRow {
  seq: number;
  run_id: string;
  created_at: number;
  url: string;
  state: string;
  completed_at: number | null;
  response: string | null;
  initial_body: Buffer;
  config: string;
  labels: string | null;
  caller_ip: string | null;
  flow_control_key: string | null;
  dlq_id: string | null;
  failure: string | null;
  next: string | null;
  updated_at: number;
}

const u = <T>(v: T | null): T | undefined => (v === null ? undefined : v);
const j = (v: string | null) => (v === null ? undefined : JSON.parse(v));

/** Row -> {@link WorkflowRun} (both stores). */
export function toRun(r: RunRow): WorkflowRun {
  return {
    seq: r.seq,
    runId: r.run_id,
    createdAt: r.created_at,
    url: r.url,
    state: r.state as RunState,
    completedAt: u(r.completed_at),
    response: u(r.response),
    initialBody: r.initial_body,
    config: JSON.parse(r.config),
    labels: j(r.labels),
    callerIp: u(r.caller_ip),
    flowControlKey: u(r.flow_control_key),
    dlqId: u(r.dlq_id),
    failure: j(r.failure),
    next: j(r.next),
    updatedAt: r.updated_at,
  };
}

/** A `workflow_waiters` row (both stores). */
export interface WaiterRow {
  seq: number;
  event_id: string;
  run_seq: number;
  url: string;
  deadline: number;
  step: string;
  timeout_url: string | null;
  timeout_headers: string | null;
  created_at: number;
}

/** Row -> {@link Waiter} (both stores). */
export function toWaiter(r: WaiterRow): Waiter {
  return {
    seq: r.seq,
    eventId: r.event_id,
    runSeq: r.run_seq,
    url: r.url,
    deadline: r.deadline,
    step: JSON.parse(r.step),
    timeoutUrl: u(r.timeout_url),
    timeoutHeaders: j(r.timeout_headers),
    createdAt: r.created_at,
  };
}

/**
 * Ends a run that is RUN_STARTED as RUN_FAILED (`RunFailure` of `types.ts`); SQLite placeholders
 * (`toPgParams` for PostgreSQL); params from {@link failRunParams}.
 */
export const FAIL_RUN_SQL = `UPDATE workflow_runs SET state = 'RUN_FAILED', completed_at = ?, updated_at = ?, dlq_id = ?,
  next = ?, failure = COALESCE(failure, ?) WHERE seq = ? AND state = 'RUN_STARTED'`;

/** {@link FAIL_RUN_SQL}'s params for `run`. */
export function failRunParams(run: RunFailure, now: number, dlqId: string): unknown[] {
  return [now, now, dlqId, JSON.stringify(run.next), run.failure === undefined ? null : JSON.stringify(run.failure), run.runSeq];
}

/**
 * Runs still RUN_STARTED, created in `[from, before)`, whose first message (`config.startMessageId`)
 * is not in the messages table: a crash came between the run's write and its message's.
 * Params: from, before. Dialect-specific JSON access.
 */
export function unstartedRunsSql(dialect: 'sqlite' | 'pg'): string {
  const start = dialect === 'pg' ? `(r.config::json ->> 'startMessageId')` : `json_extract(r.config, '$.startMessageId')`;
  return `SELECT r.seq, r.run_id FROM workflow_runs r WHERE r.state = 'RUN_STARTED' AND r.created_at >= ? AND r.created_at < ?
    AND ${start} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = ${start})`;
}

export class SqliteWorkflowStore implements WorkflowStore {
  /** Prepared statements by SQL text (`sqlite-statements.ts`). */
  private readonly stmt: (sql: string) => Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly writes: GroupCommitter,
  ) {
    this.stmt = statementCache(db);
  }

  createRun(run: NewRun, now: number): Promise<number> {
    return this.writes.run(() => {
      const info = this.stmt(
          `INSERT INTO workflow_runs (run_id, created_at, url, state, completed_at, response, initial_body, config, labels,
             caller_ip, flow_control_key, dlq_id, failure, next, updated_at)
           VALUES (?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?)`,
        )
        .run(...newRunValues(run, now));
      return Number(info.lastInsertRowid);
    });
  }

  async findRun(runId: string, createdAt?: number): Promise<WorkflowRun | undefined> {
    const r = (createdAt !== undefined
      ? this.stmt('SELECT * FROM workflow_runs WHERE run_id = ? AND created_at = ? ORDER BY seq DESC LIMIT 1').get(runId, createdAt)
      : this.stmt(`SELECT * FROM workflow_runs WHERE run_id = ? ORDER BY (state = 'RUN_STARTED') DESC, seq DESC LIMIT 1`)
          .get(runId)) as RunRow | undefined;
    return r ? toRun(r) : undefined;
  }

  async getRun(seq: number): Promise<WorkflowRun | undefined> {
    const r = this.stmt('SELECT * FROM workflow_runs WHERE seq = ?').get(seq) as RunRow | undefined;
    return r ? toRun(r) : undefined;
  }

  async runByDlqId(dlqId: string): Promise<WorkflowRun | undefined> {
    const r = this.stmt('SELECT * FROM workflow_runs WHERE dlq_id = ? ORDER BY seq DESC LIMIT 1').get(dlqId) as RunRow | undefined;
    return r ? toRun(r) : undefined;
  }

  addStep(runSeq: number, messageId: string, callType: string, body: Buffer, now: number): Promise<void> {
    return this.writes.run(() => {
      this.stmt('INSERT INTO workflow_steps (run_seq, message_id, call_type, body, created_at) VALUES (?, ?, ?, ?, ?)')
        .run(runSeq, messageId, callType, body, now);
      this.stmt('UPDATE workflow_runs SET updated_at = ? WHERE seq = ?').run(now, runSeq);
    });
  }

  copySteps(runSeq: number, steps: { messageId: string; callType: string; body: Buffer }[], now: number): Promise<void> {
    return this.writes.run(() => {
      const ins = this.stmt('INSERT INTO workflow_steps (run_seq, message_id, call_type, body, created_at) VALUES (?, ?, ?, ?, ?)');
      for (const s of steps) ins.run(runSeq, s.messageId, s.callType, s.body, now);
    });
  }

  async steps(runSeq: number): Promise<WorkflowStep[]> {
    const rows = this.stmt('SELECT * FROM workflow_steps WHERE run_seq = ? ORDER BY seq').all(runSeq) as {
      seq: number;
      message_id: string;
      call_type: string;
      body: Buffer;
      created_at: number;
    }[];
    return rows.map((r) => ({ seq: r.seq, messageId: r.message_id, callType: r.call_type, body: r.body, createdAt: r.created_at }));
  }

  finishRun(seq: number, state: RunState, now: number, fields: { response?: string; dlqId?: string } = {}): Promise<boolean> {
    return this.writes.run(() => {
      const info = this.stmt(
          `UPDATE workflow_runs SET state = ?, completed_at = ?, updated_at = ?, response = COALESCE(?, response),
             dlq_id = COALESCE(?, dlq_id) WHERE seq = ? AND state = 'RUN_STARTED'`,
        )
        .run(state, now, now, fields.response ?? null, fields.dlqId ?? null, seq);
      return info.changes > 0;
    });
  }

  updateRun(seq: number, now: number, fields: { failure?: unknown; next?: unknown; dlqId?: string | null; config?: RunConfig }): Promise<void> {
    return this.writes.run(() => {
      const sets: string[] = ['updated_at = ?'];
      const params: unknown[] = [now];
      if (fields.failure !== undefined) {
        sets.push('failure = ?');
        params.push(fields.failure === null ? null : JSON.stringify(fields.failure));
      }
      if (fields.next !== undefined) {
        sets.push('next = ?');
        params.push(fields.next === null ? null : JSON.stringify(fields.next));
      }
      if (fields.config !== undefined) {
        sets.push('config = ?');
        params.push(JSON.stringify(fields.config));
      }
      if (fields.dlqId !== undefined) {
        sets.push('dlq_id = ?');
        params.push(fields.dlqId);
      }
      this.stmt(`UPDATE workflow_runs SET ${sets.join(', ')} WHERE seq = ?`).run(...params, seq);
    }, false);
  }

  addWaiter(w: Omit<Waiter, 'seq'>): Promise<number> {
    return this.writes.run(() => {
      const info = this.stmt(
          `INSERT INTO workflow_waiters (event_id, run_seq, url, deadline, step, timeout_url, timeout_headers, created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(w.eventId, w.runSeq, w.url, w.deadline, JSON.stringify(w.step), w.timeoutUrl ?? null, w.timeoutHeaders ? JSON.stringify(w.timeoutHeaders) : null, w.createdAt);
      return Number(info.lastInsertRowid);
    });
  }

  async waiters(eventId: string): Promise<Waiter[]> {
    return (this.stmt('SELECT * FROM workflow_waiters WHERE event_id = ? ORDER BY seq').all(eventId) as WaiterRow[]).map(toWaiter);
  }

  async expiredWaiters(now: number, limit: number): Promise<Waiter[]> {
    return (this.stmt(`SELECT * FROM workflow_waiters WHERE deadline <= ? ORDER BY deadline ${BOUND_LIMIT}`).all(now, limit) as WaiterRow[]).map(toWaiter);
  }

  takeWaiter(seq: number): Promise<boolean> {
    return this.writes.run(() => this.stmt('DELETE FROM workflow_waiters WHERE seq = ?').run(seq).changes > 0);
  }

  addNotify(n: Omit<StoredNotify, 'seq'>): Promise<void> {
    return this.writes.run(() => {
      this.stmt('INSERT INTO workflow_notifies (event_id, run_id, data, created_at) VALUES (?, ?, ?, ?)')
        .run(n.eventId, n.runId ?? null, n.data, n.createdAt);
    });
  }

  takeNotify(eventId: string, runId: string, since: number): Promise<StoredNotify | undefined> {
    return this.writes.run(() => {
      const r = this.stmt(
          `SELECT * FROM workflow_notifies WHERE event_id = ? AND (run_id IS NULL OR run_id = ?) AND created_at >= ?
           ORDER BY seq LIMIT 1`,
        )
        .get(eventId, runId, since) as { seq: number; event_id: string; run_id: string | null; data: Buffer; created_at: number } | undefined;
      if (!r) return undefined;
      this.stmt('DELETE FROM workflow_notifies WHERE seq = ?').run(r.seq);
      return { seq: r.seq, eventId: r.event_id, runId: u(r.run_id), data: r.data, createdAt: r.created_at };
    });
  }

  dropUnstartedRuns(createdFrom: number, createdBefore: number): Promise<string[]> {
    return this.writes.run(() => {
      const rows = this.stmt(unstartedRunsSql('sqlite')).all(createdFrom, createdBefore) as { seq: number; run_id: string }[];
      for (const r of rows) {
        this.stmt('DELETE FROM workflow_steps WHERE run_seq = ?').run(r.seq);
        this.stmt('DELETE FROM workflow_waiters WHERE run_seq = ?').run(r.seq);
        this.stmt('DELETE FROM workflow_runs WHERE seq = ?').run(r.seq);
      }
      return rows.map((r) => r.run_id);
    });
  }

  pruneRuns(endedBefore: number, notifiesBefore: number, limit: number): Promise<number> {
    return this.writes.run(() => {
      this.stmt('DELETE FROM workflow_notifies WHERE created_at < ?').run(notifiesBefore);
      const seqs = (
        this.stmt(
            `SELECT seq FROM workflow_runs WHERE state <> 'RUN_STARTED' AND completed_at < ?
               AND (dlq_id IS NULL OR NOT EXISTS (SELECT 1 FROM dlq WHERE dlq.dlq_id = workflow_runs.dlq_id))
             ORDER BY completed_at ${BOUND_LIMIT}`,
          )
          .all(endedBefore, limit) as { seq: number }[]
      ).map((r) => r.seq);
      const steps = this.stmt('DELETE FROM workflow_steps WHERE run_seq = ?');
      const waiters = this.stmt('DELETE FROM workflow_waiters WHERE run_seq = ?');
      const run = this.stmt('DELETE FROM workflow_runs WHERE seq = ?');
      for (const seq of seqs) {
        steps.run(seq);
        waiters.run(seq);
        run.run(seq);
      }
      return seqs.length;
    }, false);
  }

  async listRuns(f: RunFilter, limit: number, cursor?: number): Promise<WorkflowRun[]> {
    const { sql, params } = runFilterSql(f, cursor);
    const rows = this.stmt(`SELECT * FROM workflow_runs WHERE ${sql} ORDER BY seq DESC ${BOUND_LIMIT}`).all(...params, limit) as RunRow[];
    return rows.map(toRun);
  }
}

/**
 * WHERE clause (with `?` placeholders) and params of a run listing: `f`'s filters AND-ed, runs
 * older than `cursor` (a seq). `dialect` 'pg' for the PostgreSQL store (JSON functions differ).
 */
export function runFilterSql(f: RunFilter, cursor: number | undefined, dialect: 'sqlite' | 'pg' = 'sqlite'): { sql: string; params: unknown[] } {
  const { terms, params, inList } = whereBuilder();
  inList('run_id', f.runIds);
  inList('url', f.url);
  inList('state', f.states);
  inList('flow_control_key', f.flowControlKey);
  inList('caller_ip', f.callerIp);
  inList('dlq_id', f.dlqIds);
  if (f.urlPrefix !== undefined) {
    terms.push('substr(url, 1, ?) = ?');
    params.push(f.urlPrefix.length, f.urlPrefix);
  }
  if (f.createdAt !== undefined) {
    terms.push('created_at = ?');
    params.push(f.createdAt);
  }
  // in the DLQ now: a run restarted, resumed or deleted from the DLQ keeps its dlq_id, but its
  // entry is gone, and it must not take a place of a bulk action's `count`
  if (f.inDlq) terms.push('dlq_id IS NOT NULL AND EXISTS (SELECT 1 FROM dlq WHERE dlq.dlq_id = workflow_runs.dlq_id)');
  if (f.failureState !== undefined) {
    terms.push(dialect === 'pg' ? `(failure::json ->> 'state') = ?` : `json_extract(failure, '$.state') = ?`);
    params.push(f.failureState);
  }
  if (f.label?.length) {
    const each = dialect === 'pg' ? 'json_array_elements_text(labels::json) je(value)' : 'json_each(labels) je';
    terms.push(`EXISTS (SELECT 1 FROM ${each} WHERE je.value IN (${f.label.map(() => '?').join(',')}))`);
    params.push(...f.label);
  }
  const timeCol = f.inDlq ? 'COALESCE(completed_at, created_at)' : 'created_at';
  if (f.fromDate !== undefined) {
    terms.push(`${timeCol} >= ?`);
    params.push(f.fromDate);
  }
  if (f.toDate !== undefined) {
    terms.push(`${timeCol} <= ?`);
    params.push(f.toDate);
  }
  if (cursor !== undefined) {
    terms.push('seq < ?');
    params.push(cursor);
  }
  return { sql: terms.length ? terms.join(' AND ') : dialect === 'pg' ? 'TRUE' : '1', params };
}

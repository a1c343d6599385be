/**
 * PostgreSQL {@link WorkflowStore} (tables of `pg-migrations/0001_init.sql`) on the queue store's
 * pool. Runs live in the database only, so a run continues on whichever node delivers its next
 * step. Every method is one statement or one transaction, resolved after COMMIT.
 */
import type pg from 'pg';
import { toPgParams } from './pg-connect.js';
import { inTransaction } from './pg.js';
import { runFilterSql, toRun, toWaiter, unstartedRunsSql, type RunRow, type WaiterRow } from './sqlite-workflows.js';
import { newRunValues, type NewRun, type RunFilter, type RunState, type StoredNotify, type Waiter, type WorkflowRun, type WorkflowStep, type WorkflowStore } from './workflow-types.js';

export class PgWorkflowStore implements WorkflowStore {
  constructor(private readonly pool: pg.Pool) {}

  async createRun(run: NewRun, now: number): Promise<number> {
    const r = await this.pool.query<{ seq: number }>(
      `INSERT INTO workflow_runs (run_id, created_at, url, state, initial_body, config, labels, caller_ip, flow_control_key, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq`,
      newRunValues(run, now),
    );
    return r.rows[0].seq;
  }

  private async one(sql: string, params: unknown[]): Promise<WorkflowRun | undefined> {
    const r = (await this.pool.query<RunRow>(sql, params)).rows[0];
    return r ? toRun(r) : undefined;
  }

  findRun(runId: string, createdAt?: number): Promise<WorkflowRun | undefined> {
    return createdAt !== undefined
      ? this.one('SELECT * FROM workflow_runs WHERE run_id = $1 AND created_at = $2 ORDER BY seq DESC LIMIT 1', [runId, createdAt])
      : this.one(`SELECT * FROM workflow_runs WHERE run_id = $1 ORDER BY (state = 'RUN_STARTED') DESC, seq DESC LIMIT 1`, [runId]);
  }

  getRun(seq: number): Promise<WorkflowRun | undefined> {
    return this.one('SELECT * FROM workflow_runs WHERE seq = $1', [seq]);
  }

  runByDlqId(dlqId: string): Promise<WorkflowRun | undefined> {
    return this.one('SELECT * FROM workflow_runs WHERE dlq_id = $1 ORDER BY seq DESC LIMIT 1', [dlqId]);
  }

  addStep(runSeq: number, messageId: string, callType: string, body: Buffer, now: number): Promise<void> {
    return inTransaction(this.pool, async (c) => {
      await c.query('INSERT INTO workflow_steps (run_seq, message_id, call_type, body, created_at) VALUES ($1, $2, $3, $4, $5)', [runSeq, messageId, callType, body, now]);
      await c.query('UPDATE workflow_runs SET updated_at = $1 WHERE seq = $2', [now, runSeq]);
    });
  }

  async copySteps(runSeq: number, steps: { messageId: string; callType: string; body: Buffer }[], now: number): Promise<void> {
    if (!steps.length) return;
    await this.pool.query(
      `INSERT INTO workflow_steps (run_seq, message_id, call_type, body, created_at)
       SELECT $1, s.m, s.t, s.b, $5 FROM unnest($2::text[], $3::text[], $4::bytea[]) WITH ORDINALITY AS s(m, t, b, o) ORDER BY s.o`,
      [runSeq, steps.map((s) => s.messageId), steps.map((s) => s.callType), steps.map((s) => s.body), now],
    );
  }

  async steps(runSeq: number): Promise<WorkflowStep[]> {
    const r = await this.pool.query<{ seq: number; message_id: string; call_type: string; body: Buffer; created_at: number }>(
      'SELECT * FROM workflow_steps WHERE run_seq = $1 ORDER BY seq',
      [runSeq],
    );
    return r.rows.map((x) => ({ seq: x.seq, messageId: x.message_id, callType: x.call_type, body: x.body, createdAt: x.created_at }));
  }

  async finishRun(seq: number, state: RunState, now: number, fields: { response?: string; dlqId?: string } = {}): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE workflow_runs SET state = $1, completed_at = $2, updated_at = $2, response = COALESCE($3, response), dlq_id = COALESCE($4, dlq_id)
       WHERE seq = $5 AND state = 'RUN_STARTED'`,
      [state, now, fields.response ?? null, fields.dlqId ?? null, seq],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async updateRun(seq: number, now: number, fields: Parameters<WorkflowStore['updateRun']>[2]): Promise<void> {
    const sets = ['updated_at = $1'];
    const params: unknown[] = [now];
    const set = (col: string, v: unknown) => {
      params.push(v);
      sets.push(`${col} = $${params.length}`);
    };
    if (fields.failure !== undefined) set('failure', fields.failure === null ? null : JSON.stringify(fields.failure));
    if (fields.next !== undefined) set('next', fields.next === null ? null : JSON.stringify(fields.next));
    if (fields.dlqId !== undefined) set('dlq_id', fields.dlqId);
    if (fields.config !== undefined) set('config', JSON.stringify(fields.config));
    params.push(seq);
    await this.pool.query(`UPDATE workflow_runs SET ${sets.join(', ')} WHERE seq = $${params.length}`, params);
  }

  async addWaiter(w: Omit<Waiter, 'seq'>): Promise<number> {
    const r = await this.pool.query<{ seq: number }>(
      `INSERT INTO workflow_waiters (event_id, run_seq, url, deadline, step, timeout_url, timeout_headers, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq`,
      [w.eventId, w.runSeq, w.url, w.deadline, JSON.stringify(w.step), w.timeoutUrl ?? null, w.timeoutHeaders ? JSON.stringify(w.timeoutHeaders) : null, w.createdAt],
    );
    return r.rows[0].seq;
  }

  async waiters(eventId: string): Promise<Waiter[]> {
    return (await this.pool.query<WaiterRow>('SELECT * FROM workflow_waiters WHERE event_id = $1 ORDER BY seq', [eventId])).rows.map(toWaiter);
  }

  async expiredWaiters(now: number, limit: number): Promise<Waiter[]> {
    return (await this.pool.query<WaiterRow>('SELECT * FROM workflow_waiters WHERE deadline <= $1 ORDER BY deadline, seq LIMIT $2', [now, limit])).rows.map(toWaiter);
  }

  async takeWaiter(seq: number): Promise<boolean> {
    return ((await this.pool.query('DELETE FROM workflow_waiters WHERE seq = $1', [seq])).rowCount ?? 0) > 0;
  }

  async addNotify(n: Omit<StoredNotify, 'seq'>): Promise<void> {
    await this.pool.query('INSERT INTO workflow_notifies (event_id, run_id, data, created_at) VALUES ($1, $2, $3, $4)', [n.eventId, n.runId ?? null, n.data, n.createdAt]);
  }

  async takeNotify(eventId: string, runId: string, since: number): Promise<StoredNotify | undefined> {
    // one statement: the oldest matching row is locked (others skipped) and deleted, so two nodes never take the same notify
    const r = await this.pool.query<{ seq: number; event_id: string; run_id: string | null; data: Buffer; created_at: number }>(
      `DELETE FROM workflow_notifies WHERE seq = (
         SELECT seq FROM workflow_notifies WHERE event_id = $1 AND (run_id IS NULL OR run_id = $2) AND created_at >= $3
         ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *`,
      [eventId, runId, since],
    );
    const row = r.rows[0];
    return row ? { seq: row.seq, eventId: row.event_id, runId: row.run_id ?? undefined, data: row.data, createdAt: row.created_at } : undefined;
  }

  dropUnstartedRuns(createdFrom: number, createdBefore: number): Promise<string[]> {
    return inTransaction(this.pool, async (c) => {
      const rows = (await c.query<{ seq: number; run_id: string }>(toPgParams(`${unstartedRunsSql('pg')} FOR UPDATE SKIP LOCKED`), [createdFrom, createdBefore])).rows;
      if (!rows.length) return [];
      const seqs = rows.map((r) => r.seq);
      await c.query('DELETE FROM workflow_steps WHERE run_seq = ANY($1::bigint[])', [seqs]);
      await c.query('DELETE FROM workflow_waiters WHERE run_seq = ANY($1::bigint[])', [seqs]);
      await c.query('DELETE FROM workflow_runs WHERE seq = ANY($1::bigint[])', [seqs]);
      return rows.map((r) => r.run_id);
    });
  }

  pruneRuns(endedBefore: number, notifiesBefore: number, limit: number): Promise<number> {
    return inTransaction(this.pool, async (c) => {
      await c.query('DELETE FROM workflow_notifies WHERE created_at < $1', [notifiesBefore]);
      const seqs = (
        await c.query<{ seq: number }>(
          `SELECT seq FROM workflow_runs r WHERE state <> 'RUN_STARTED' AND completed_at < $1
             AND (dlq_id IS NULL OR NOT EXISTS (SELECT 1 FROM dlq WHERE dlq.dlq_id = r.dlq_id))
           ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
          [endedBefore, limit],
        )
      ).rows.map((x) => x.seq);
      if (!seqs.length) return 0;
      await c.query('DELETE FROM workflow_steps WHERE run_seq = ANY($1::bigint[])', [seqs]);
      await c.query('DELETE FROM workflow_waiters WHERE run_seq = ANY($1::bigint[])', [seqs]);
      await c.query('DELETE FROM workflow_runs WHERE seq = ANY($1::bigint[])', [seqs]);
      return seqs.length;
    });
  }

  async listRuns(f: RunFilter, limit: number, cursor?: number): Promise<WorkflowRun[]> {
    const { sql, params } = runFilterSql(f, cursor, 'pg');
    params.push(limit);
    return (await this.pool.query<RunRow>(toPgParams(`SELECT * FROM workflow_runs WHERE ${sql} ORDER BY seq DESC LIMIT ?`), params)).rows.map(toRun);
  }
}

/**
 * SQLite implementation of the resource stores of `resource-types.ts` (tables of migration 0002), sharing the queue
 * store's handle and group committer so their writes batch with message writes.
 */
import type Database from 'better-sqlite3';
import type { FlowControl, NewMessage } from '../model.js';
import type { GroupCommitter } from './group-commit.js';
import type {
  AdmissionTx,
  FlowKeyState,
  QueueInfo,
  UrlGroupStore,
  QueueAdmissionStore,
  FlowControlStore,
  ScheduleStore,
  ScheduleRecord,
  UrlGroup,
  UrlGroupEndpoint,
} from './resource-types.js';
import { INSERT_MESSAGE_SQL, messageParams } from './sqlite-rows.js';
import { BOUND_LIMIT, statementCache } from './sqlite-statements.js';

/** A `schedules` row (both stores). */
export interface ScheduleRow {
  id: string;
  cron: string;
  destination: string;
  options: string;
  body: Buffer;
  queue_name: string | null;
  caller_ip: string | null;
  paused: number;
  created_at: number;
  last_time: number | null;
  next_time: number | null;
  last_message_ids: string | null;
}

/** A `flow_control_keys` row (both stores). */
export interface FlowRow {
  key: string;
  parallelism: number | null;
  rate: number | null;
  period_s: number | null;
  paused: number;
  pinned_parallelism: number | null;
  pinned_rate: number | null;
  pinned_period_s: number | null;
}

const u = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

/** Row -> {@link ScheduleRecord} (both stores). */
export function scheduleFromRow(r: ScheduleRow): ScheduleRecord {
  return {
    id: r.id,
    cron: r.cron,
    destination: r.destination,
    options: JSON.parse(r.options),
    body: r.body,
    queueName: u(r.queue_name),
    callerIp: u(r.caller_ip),
    paused: r.paused === 1,
    createdAt: r.created_at,
    lastTime: u(r.last_time),
    nextTime: u(r.next_time),
    lastMessageIds: r.last_message_ids ? JSON.parse(r.last_message_ids) : [],
  };
}

/** Row + counts -> {@link FlowKeyState} (both stores). */
export function flowStateFromRow(r: FlowRow, waiting: number, admitted: number): FlowKeyState {
  return {
    key: r.key,
    parallelism: u(r.parallelism),
    rate: u(r.rate),
    periodS: u(r.period_s),
    paused: r.paused === 1,
    pinnedParallelism: u(r.pinned_parallelism),
    pinnedRate: u(r.pinned_rate),
    pinnedPeriodS: u(r.pinned_period_s),
    waiting,
    admitted,
  };
}

// "Admitted" = pending and not held; the text matches the partial indexes of migration 0002.
const ADMITTED_Q = `status = 'pending' AND queue_name IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held')`;
const ADMITTED_F = `status = 'pending' AND flow_control_key IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held')`;

export class SqliteResourceStore implements UrlGroupStore, QueueAdmissionStore, FlowControlStore, ScheduleStore {
  /** Prepared statements by SQL text (`sqlite-statements.ts`). */
  private readonly stmt: (sql: string) => Database.Statement;

  constructor(
    private readonly db: Database.Database,
    private readonly writes: GroupCommitter,
  ) {
    this.stmt = statementCache(db);
  }

  // ---- URL groups ----

  addEndpoints(name: string, endpoints: UrlGroupEndpoint[], now: number): Promise<void> {
    return this.writes.run(() => {
      this.stmt(`INSERT INTO url_groups (name, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET updated_at = excluded.updated_at`)
        .run(name, now, now);
      const exists = this.stmt(`SELECT 1 FROM url_group_endpoints WHERE group_name = ? AND url = ? AND name IS ?`);
      const ins = this.stmt(`INSERT INTO url_group_endpoints (group_name, url, name) VALUES (?, ?, ?)`);
      for (const e of endpoints) if (!exists.get(name, e.url, e.name ?? null)) ins.run(name, e.url, e.name ?? null);
    });
  }

  removeEndpoints(name: string, endpoints: UrlGroupEndpoint[], now: number): Promise<boolean> {
    return this.writes.run(() => {
      if (!this.stmt('SELECT 1 FROM url_groups WHERE name = ?').get(name)) return false;
      for (const e of endpoints) {
        if (e.name !== undefined && e.url !== undefined) this.stmt('DELETE FROM url_group_endpoints WHERE group_name = ? AND name = ? AND url = ?').run(name, e.name, e.url);
        else if (e.name !== undefined) this.stmt('DELETE FROM url_group_endpoints WHERE group_name = ? AND name = ?').run(name, e.name);
        else if (e.url !== undefined) this.stmt('DELETE FROM url_group_endpoints WHERE group_name = ? AND url = ?').run(name, e.url);
      }
      const left = this.stmt('SELECT COUNT(*) AS n FROM url_group_endpoints WHERE group_name = ?').get(name) as { n: number };
      if (left.n === 0) this.stmt('DELETE FROM url_groups WHERE name = ?').run(name);
      else this.stmt('UPDATE url_groups SET updated_at = ? WHERE name = ?').run(now, name);
      return true;
    });
  }

  private group(r: { name: string; created_at: number; updated_at: number }): UrlGroup {
    const eps = this.stmt('SELECT url, name FROM url_group_endpoints WHERE group_name = ? ORDER BY seq').all(r.name) as { url: string; name: string | null }[];
    return {
      name: r.name,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      endpoints: eps.map((e) => (e.name === null ? { url: e.url } : { name: e.name, url: e.url })),
    };
  }

  async listGroups(): Promise<UrlGroup[]> {
    const rows = this.stmt('SELECT * FROM url_groups ORDER BY name').all() as { name: string; created_at: number; updated_at: number }[];
    return rows.map((r) => this.group(r));
  }

  async getGroup(name: string): Promise<UrlGroup | undefined> {
    const r = this.stmt('SELECT * FROM url_groups WHERE name = ?').get(name) as { name: string; created_at: number; updated_at: number } | undefined;
    return r ? this.group(r) : undefined;
  }

  deleteGroup(name: string): Promise<boolean> {
    return this.writes.run(() => {
      this.stmt('DELETE FROM url_group_endpoints WHERE group_name = ?').run(name);
      return this.stmt('DELETE FROM url_groups WHERE name = ?').run(name).changes > 0;
    });
  }

  // ---- queues ----

  upsertQueue(name: string, set: { parallelism?: number; paused?: boolean }, now: number): Promise<void> {
    return this.writes.run(() => {
      this.stmt(
          `INSERT INTO queues (name, parallelism, paused, created_at, updated_at) VALUES (@name, @p, @paused, @now, @now)
           ON CONFLICT(name) DO UPDATE SET parallelism = COALESCE(@pset, parallelism), paused = COALESCE(@pauseset, paused), updated_at = @now`,
        )
        .run({
          name,
          p: set.parallelism ?? 1,
          paused: set.paused ? 1 : 0,
          pset: set.parallelism ?? null,
          pauseset: set.paused === undefined ? null : set.paused ? 1 : 0,
          now,
        });
    });
  }

  ensureQueues(names: string[], now: number): Promise<void> {
    return this.writes.run(() => {
      const st = this.stmt(`INSERT OR IGNORE INTO queues (name, parallelism, paused, created_at, updated_at) VALUES (?, 1, 0, ?, ?)`);
      for (const n of names) st.run(n, now, now);
    });
  }

  private queueInfo(r: { name: string; parallelism: number; paused: number; created_at: number; updated_at: number }): QueueInfo {
    const lag = this.stmt(`SELECT COUNT(*) AS n FROM messages WHERE queue_name = ? AND status = 'pending' AND kind = 'message'`).get(r.name) as { n: number };
    return { name: r.name, createdAt: r.created_at, updatedAt: r.updated_at, parallelism: r.parallelism, paused: r.paused === 1, lag: lag.n };
  }

  async getQueue(name: string): Promise<QueueInfo | undefined> {
    const r = this.stmt('SELECT * FROM queues WHERE name = ?').get(name) as Parameters<SqliteResourceStore['queueInfo']>[0] | undefined;
    return r ? this.queueInfo(r) : undefined;
  }

  async listQueues(): Promise<QueueInfo[]> {
    const rows = this.stmt('SELECT * FROM queues ORDER BY name').all() as Parameters<SqliteResourceStore['queueInfo']>[0][];
    return rows.map((r) => this.queueInfo(r));
  }

  deleteQueue(name: string, now: number): Promise<boolean> {
    return this.writes.run(() => {
      const ok = this.stmt('DELETE FROM queues WHERE name = ?').run(name).changes > 0;
      if (!ok) return false;
      const held = this.stmt(`SELECT seq FROM messages WHERE claimed_by = 'held' AND queue_name = ?`).all(name) as { seq: number }[];
      const fin = this.stmt(`UPDATE messages SET status = 'cancelled', finished_at = ?, claimed_by = NULL WHERE seq = ?`);
      const log = this.stmt(`INSERT INTO logs (time, message_seq, state) VALUES (?, ?, ?)`);
      for (const h of held) {
        fin.run(now, h.seq);
        log.run(now, h.seq, 'CANCEL_REQUESTED');
        log.run(now, h.seq, 'CANCELLED');
      }
      return true;
    });
  }

  setQueuePaused(name: string, paused: boolean, now: number): Promise<boolean> {
    return this.writes.run(() => this.stmt('UPDATE queues SET paused = ?, updated_at = ? WHERE name = ?').run(paused ? 1 : 0, now, name).changes > 0);
  }

  // ---- flow control ----

  recordFlowControl(entries: { key: string; fc: FlowControl }[], now: number): Promise<void> {
    return this.writes.run(() => {
      const st = this.stmt(
        `INSERT INTO flow_control_keys (key, parallelism, rate, period_s, updated_at) VALUES (@key, @p, @r, @s, @now)
         ON CONFLICT(key) DO UPDATE SET parallelism = @p, rate = @r, period_s = @s, updated_at = @now`,
      );
      for (const e of entries) st.run({ key: e.key, p: e.fc.parallelism ?? null, r: e.fc.rate ?? null, s: e.fc.period ?? null, now });
    });
  }

  private flowState(r: FlowRow): FlowKeyState {
    const waiting = this.stmt(`SELECT COUNT(*) AS n FROM messages WHERE claimed_by = 'held' AND flow_control_key = ?`).get(r.key) as { n: number };
    return flowStateFromRow(r, waiting.n, this.countAdmittedKey(r.key));
  }

  private countAdmittedKey(key: string): number {
    return (this.stmt(`SELECT COUNT(*) AS n FROM messages WHERE ${ADMITTED_F} AND flow_control_key = ?`).get(key) as { n: number }).n;
  }

  private flowRow(key: string): FlowRow | undefined {
    return this.stmt('SELECT * FROM flow_control_keys WHERE key = ?').get(key) as FlowRow | undefined;
  }

  async getFlowKey(key: string): Promise<FlowKeyState | undefined> {
    const r = this.flowRow(key);
    return r ? this.flowState(r) : undefined;
  }

  async listFlowKeys(search?: string): Promise<FlowKeyState[]> {
    const rows = (search
      ? this.stmt(`SELECT * FROM flow_control_keys WHERE instr(key, ?) > 0 ORDER BY key`).all(search)
      : this.stmt('SELECT * FROM flow_control_keys ORDER BY key').all()) as FlowRow[];
    return rows.map((r) => this.flowState(r));
  }

  setFlowPaused(key: string, paused: boolean, now: number): Promise<boolean> {
    return this.writes.run(() => this.stmt('UPDATE flow_control_keys SET paused = ?, updated_at = ? WHERE key = ?').run(paused ? 1 : 0, now, key).changes > 0);
  }

  pinFlow(key: string, pin: { parallelism?: number; rate?: number; periodS?: number }, now: number): Promise<boolean> {
    return this.writes.run(() => {
      const r = this.flowRow(key);
      if (!r) return false;
      this.stmt('UPDATE flow_control_keys SET pinned_parallelism = ?, pinned_rate = ?, pinned_period_s = ?, updated_at = ? WHERE key = ?')
        .run(
          pin.parallelism ?? r.pinned_parallelism,
          pin.rate ?? r.pinned_rate,
          pin.rate !== undefined ? (pin.periodS ?? 1) : (pin.periodS ?? r.pinned_period_s),
          now,
          key,
        );
      return true;
    });
  }

  unpinFlow(key: string, unpin: { parallelism: boolean; rate: boolean }, now: number): Promise<boolean> {
    return this.writes.run(() => {
      const r = this.flowRow(key);
      if (!r) return false;
      this.stmt('UPDATE flow_control_keys SET pinned_parallelism = ?, pinned_rate = ?, pinned_period_s = ?, updated_at = ? WHERE key = ?')
        .run(unpin.parallelism ? null : r.pinned_parallelism, unpin.rate ? null : r.pinned_rate, unpin.rate ? null : r.pinned_period_s, now, key);
      return true;
    });
  }

  // ---- admission ----

  admit<T>(fn: (tx: AdmissionTx) => T): Promise<T> {
    const tx: AdmissionTx = {
      heldQueues: () =>
        (this.stmt(`SELECT DISTINCT queue_name AS q FROM messages WHERE claimed_by = 'held' AND queue_name IS NOT NULL`).all() as { q: string }[]).map((r) => r.q),
      heldKeys: () =>
        (this.stmt(`SELECT DISTINCT flow_control_key AS k FROM messages WHERE claimed_by = 'held' AND queue_name IS NULL AND flow_control_key IS NOT NULL`).all() as { k: string }[]).map((r) => r.k),
      queueConfig: (name) => {
        const r = this.stmt('SELECT parallelism, paused FROM queues WHERE name = ?').get(name) as { parallelism: number; paused: number } | undefined;
        return r ? { parallelism: r.parallelism, paused: r.paused === 1 } : undefined;
      },
      flowKey: (key) => {
        const r = this.flowRow(key);
        return r ? this.flowState(r) : undefined;
      },
      admittedInQueue: (name) => (this.stmt(`SELECT COUNT(*) AS n FROM messages WHERE ${ADMITTED_Q} AND queue_name = ?`).get(name) as { n: number }).n,
      admittedForKey: (key) => this.countAdmittedKey(key),
      queueHeads: (name, limit, now) =>
        (this.stmt(`SELECT seq, flow_control_key FROM messages WHERE claimed_by = 'held' AND queue_name = ? AND due_at <= ? ORDER BY seq ${BOUND_LIMIT}`).all(name, now, limit) as { seq: number; flow_control_key: string | null }[]).map(
          (r) => ({ seq: r.seq, flowControlKey: u(r.flow_control_key) }),
        ),
      keyHeads: (key, limit, now) =>
        (this.stmt(`SELECT seq FROM messages WHERE claimed_by = 'held' AND queue_name IS NULL AND flow_control_key = ? AND due_at <= ? ORDER BY seq ${BOUND_LIMIT}`).all(key, now, limit) as { seq: number }[]).map(
          (r) => ({ seq: r.seq, flowControlKey: key }),
        ),
      release: (seqs) => {
        const st = this.stmt(`UPDATE messages SET claimed_by = NULL WHERE seq = ? AND claimed_by = 'held'`);
        for (const s of seqs) st.run(s);
      },
      nextHeldDue: (now) => u((this.stmt(`SELECT MIN(due_at) AS t FROM messages WHERE claimed_by = 'held' AND due_at > ?`).get(now) as { t: number | null }).t),
    };
    return this.writes.run(() => fn(tx), false);
  }

  // ---- schedules ----

  upsertSchedule(s: ScheduleRecord): Promise<void> {
    return this.writes.run(() => {
      this.stmt(
          `INSERT INTO schedules (id, cron, destination, options, body, queue_name, caller_ip, paused, created_at, last_time, next_time, last_message_ids)
           VALUES (@id, @cron, @destination, @options, @body, @queue, @ip, @paused, @created, NULL, @next, NULL)
           ON CONFLICT(id) DO UPDATE SET cron = @cron, destination = @destination, options = @options, body = @body,
             queue_name = @queue, caller_ip = @ip, paused = @paused, next_time = @next`,
        )
        .run({
          id: s.id,
          cron: s.cron,
          destination: s.destination,
          options: JSON.stringify(s.options),
          body: s.body,
          queue: s.queueName ?? null,
          ip: s.callerIp ?? null,
          paused: s.paused ? 1 : 0,
          created: s.createdAt,
          next: s.nextTime ?? null,
        });
    });
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    const r = this.stmt('SELECT * FROM schedules WHERE id = ?').get(id) as ScheduleRow | undefined;
    return r ? scheduleFromRow(r) : undefined;
  }

  async listSchedules(): Promise<ScheduleRecord[]> {
    return (this.stmt('SELECT * FROM schedules ORDER BY created_at, id').all() as ScheduleRow[]).map((r) => scheduleFromRow(r));
  }

  deleteSchedule(id: string): Promise<boolean> {
    return this.writes.run(() => this.stmt('DELETE FROM schedules WHERE id = ?').run(id).changes > 0);
  }

  setSchedulePaused(id: string, paused: boolean, nextTime: number | undefined): Promise<boolean> {
    return this.writes.run(() => this.stmt('UPDATE schedules SET paused = ?, next_time = ? WHERE id = ?').run(paused ? 1 : 0, nextTime ?? null, id).changes > 0);
  }

  async dueSchedules(now: number): Promise<ScheduleRecord[]> {
    return (this.stmt('SELECT * FROM schedules WHERE paused = 0 AND next_time <= ? ORDER BY next_time').all(now) as ScheduleRow[]).map((r) => scheduleFromRow(r));
  }

  async nextScheduleTime(): Promise<number | undefined> {
    return u((this.stmt('SELECT MIN(next_time) AS t FROM schedules WHERE paused = 0').get() as { t: number | null }).t);
  }

  fireSchedule(id: string, expectedNext: number, msgs: NewMessage[], nextTime: number | undefined, now: number): Promise<boolean> {
    return this.writes.run(() => {
      const r = this.stmt('SELECT next_time, paused FROM schedules WHERE id = ?').get(id) as { next_time: number | null; paused: number } | undefined;
      if (!r || r.paused || r.next_time !== expectedNext) return false;
      const ins = this.stmt(INSERT_MESSAGE_SQL);
      const log = this.stmt(`INSERT INTO logs (time, message_seq, state, next_delivery_time) VALUES (?, ?, 'CREATED', ?)`);
      for (const m of msgs) {
        const seq = Number(ins.run(messageParams(m)).lastInsertRowid);
        log.run(now, seq, m.dueAt);
      }
      this.stmt('UPDATE schedules SET last_time = ?, next_time = ?, last_message_ids = ? WHERE id = ?')
        .run(now, nextTime ?? null, JSON.stringify(msgs.map((m) => m.id)), id);
      return true;
    });
  }

  async messageStatuses(ids: string[]): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const st = this.stmt('SELECT status FROM messages WHERE id = ?');
    for (const id of ids) {
      const r = st.get(id) as { status: string } | undefined;
      if (r) out[id] = r.status;
    }
    return out;
  }
}

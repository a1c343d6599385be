/**
 * Resumable queries: `start` runs the query and returns the first `topK`
 * with a uuid; `next` returns the next `additionalK` excluding ids already returned (each batch is
 * fused on its own, as the hosted service's DBSF scores show); `end` frees it. A session idle for
 * `maxIdle` seconds (default 3600, at most {@link MAX_IDLE_S}: larger values are capped) is reaped.
 *
 * A session belongs to the index that started it: `next` and `end` with a token of another index
 * answer "does not exist", as for an unknown id. At most {@link MAX_SESSIONS_PER_INDEX} are active
 * per index (the next start answers 429 until one ends or expires), so a client of one index
 * (even a read-only one) cannot fill a table that other indexes share.
 *
 * On PostgreSQL (`SVC_VECTOR_DATABASE_URL`, {@link ResumableQueries.shared}) the sessions live in
 * the database (`engine/store-pg.ts` `PgSessions`: the resolved query and the ids returned so
 * far), so `next` and `end` work on whichever node the load balancer picks; each batch is
 * computed by the node that answers it, from its own copy of the index. Same limits, same
 * isolation; a `next` locks its session's row, so two concurrent ones never return the same id.
 */
import { randomUUID } from 'node:crypto';
import type { VectorIndex } from '../engine/vector-index.js';
import { vectorError } from '../errors.js';
import { runQuery, type ResolvedQuery } from '../query/execute.js';
import { formatScored, type OutRecord } from '../query/records.js';
import type { PgSessions, StoredSession } from '../engine/store-pg.js';
import type { SparseVector } from '../engine/store.js';

/** The shared sessions table is reaped every this many seconds (ticks of the 1 s reaper). */
export const SHARED_REAP_TICKS = 60;

/** A resolved query as JSON values (the sparse vector's typed arrays as arrays). */
function toStored(q: ResolvedQuery): unknown {
  return q.sparse ? { ...q, sparse: { indices: [...q.sparse.indices], values: [...q.sparse.values] } } : q;
}

/** Inverse of {@link toStored}. */
function fromStored(v: unknown): ResolvedQuery {
  const q = v as ResolvedQuery & { sparse?: { indices: number[]; values: number[] } };
  if (!q.sparse) return q;
  const sparse: SparseVector = { indices: Int32Array.from(q.sparse.indices), values: Float32Array.from(q.sparse.values) };
  return { ...q, sparse };
}

/** `maxIdle` in seconds, capped to {@link MAX_IDLE_S}. @throws VectorError 400 when not a positive number. */
function idleSeconds(maxIdle: unknown): number {
  if (maxIdle === undefined || maxIdle === null) return DEFAULT_MAX_IDLE_S;
  if (typeof maxIdle !== 'number' || !(maxIdle > 0)) throw vectorError('invalidMaxIdle');
  return Math.min(maxIdle, MAX_IDLE_S);
}

/** Active resumable queries per index. */
export const MAX_SESSIONS_PER_INDEX = 1000;
export const DEFAULT_MAX_IDLE_S = 3600;
/** The largest `maxIdle` in seconds (24 h); a larger one is capped to it. */
export const MAX_IDLE_S = 86_400;

interface Session {
  index: VectorIndex;
  ns: string;
  query: ResolvedQuery;
  returned: Set<string>;
  idleMs: number;
  lastUsed: number;
}

export class ResumableQueries {
  private readonly sessions = new Map<string, Session>();
  /** Active sessions per index. */
  private readonly perIndex = new Map<VectorIndex, number>();
  private readonly timer: NodeJS.Timeout;
  /** Sessions kept in PostgreSQL (set once the shared store is open); undefined = in this process's memory. */
  shared: { sessions: PgSessions } | undefined;
  /** Ticks of the reaper since the last reap of the shared table. */
  private ticks = 0;

  constructor(private readonly now: () => number = Date.now) {
    this.timer = setInterval(() => {
      this.reap();
      if (this.shared && ++this.ticks % SHARED_REAP_TICKS === 0) void this.shared.sessions.reap(this.now()).catch(() => undefined);
    }, 1000);
    this.timer.unref();
  }

  /** Removes idle sessions; returns how many. */
  reap(): number {
    const t = this.now();
    let n = 0;
    for (const [id, s] of this.sessions) if (t - s.lastUsed > s.idleMs) {
      this.remove(id, s);
      n++;
    }
    return n;
  }

  private remove(id: string, s: Session): void {
    this.sessions.delete(id);
    const left = (this.perIndex.get(s.index) ?? 1) - 1;
    if (left > 0) this.perIndex.set(s.index, left);
    else this.perIndex.delete(s.index);
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Active sessions of `index`. */
  activeOf(index: VectorIndex): number {
    return this.perIndex.get(index) ?? 0;
  }

  /**
   * Starts a session (`maxIdle` in seconds, capped to {@link MAX_IDLE_S}).
   * @throws VectorError 400 bad `maxIdle`, 429 when the index has {@link MAX_SESSIONS_PER_INDEX} active
   */
  start(index: VectorIndex, ns: string, query: ResolvedQuery, maxIdle: unknown): { uuid: string; scores: OutRecord[] } {
    const idle = idleSeconds(maxIdle);
    if (this.activeOf(index) >= MAX_SESSIONS_PER_INDEX) this.reap();
    if (this.activeOf(index) >= MAX_SESSIONS_PER_INDEX) {
      throw vectorError('tooManySessions', MAX_SESSIONS_PER_INDEX);
    }
    const s: Session = { index, ns, query, returned: new Set(), idleMs: idle * 1000, lastUsed: this.now() };
    const scores = this.batch(s, query.topK);
    const uuid = randomUUID();
    this.sessions.set(uuid, s);
    this.perIndex.set(index, this.activeOf(index) + 1);
    return { uuid, scores };
  }

  private batch(s: Session, k: number): OutRecord[] {
    const nsState = s.index.ns(s.ns);
    const hits = runQuery(s.index, nsState, s.query, k, k, s.returned);
    const out = formatScored(s.index, nsState, hits, s.query);
    for (const r of out) s.returned.add(r.id);
    return out;
  }

  /** The session `uuid` of `index`; one of another index is treated as unknown. */
  private get(index: VectorIndex, uuid: unknown): Session {
    if (typeof uuid !== 'string') throw vectorError('uuidNotString');
    const s = this.sessions.get(uuid);
    if (!s || s.index !== index || this.now() - s.lastUsed > s.idleMs) throw vectorError('resumableExpired', uuid);
    return s;
  }

  /** {@link start}, or its shared form when the sessions live in PostgreSQL ({@link shared}). */
  startQuery(index: VectorIndex, ns: string, query: ResolvedQuery, maxIdle: unknown): { uuid: string; scores: OutRecord[] } | Promise<{ uuid: string; scores: OutRecord[] }> {
    if (this.shared) return this.startShared(this.shared.sessions, index, ns, query, idleSeconds(maxIdle));
    return this.start(index, ns, query, maxIdle);
  }

  /** {@link next}, or its shared form ({@link shared}): the session's row locked meanwhile. */
  nextBatch(index: VectorIndex, uuid: unknown, additionalK: unknown): OutRecord[] | Promise<OutRecord[]> {
    if (this.shared) {
      if (typeof uuid !== 'string') throw vectorError('uuidNotString');
      if (typeof additionalK !== 'number' || !Number.isInteger(additionalK) || additionalK < 0) throw vectorError('invalidAdditionalK');
      const now = this.now();
      return this.shared.sessions.update(uuid, now, (stored) => {
        if (!stored || stored.index !== index.def.name || now - stored.lastUsed > stored.idleMs) throw vectorError('resumableExpired', uuid);
        const s: Session = { index, ns: stored.ns, query: fromStored(stored.query), returned: new Set(stored.returned), idleMs: stored.idleMs, lastUsed: now };
        const result = this.batch(s, additionalK);
        return { added: result.map((r) => r.id), result };
      });
    }
    return this.next(index, uuid, additionalK);
  }

  /** Next `additionalK` results of `index`'s session `uuid`. @throws VectorError 400 unknown/expired/other index's id */
  next(index: VectorIndex, uuid: unknown, additionalK: unknown): OutRecord[] {
    const s = this.get(index, uuid);
    if (typeof additionalK !== 'number' || !Number.isInteger(additionalK) || additionalK < 0) throw vectorError('invalidAdditionalK');
    s.lastUsed = this.now();
    return this.batch(s, additionalK);
  }

  /** {@link end}, or its shared form ({@link shared}). */
  endQuery(index: VectorIndex, uuid: unknown): string | Promise<string> {
    if (this.shared) {
      if (typeof uuid !== 'string') throw vectorError('uuidNotString');
      return this.shared.sessions.delete(uuid, index.def.name, this.now()).then((found) => {
        if (!found) throw vectorError('resumableExpired', uuid);
        return 'Success';
      });
    }
    return this.end(index, uuid);
  }

  /** Ends `index`'s session `uuid`. @throws VectorError 400 unknown/expired/other index's id */
  end(index: VectorIndex, uuid: unknown): string {
    this.remove(uuid as string, this.get(index, uuid));
    return 'Success';
  }

  /** {@link start} on the shared store: the limit counted there, the session stored there. */
  private async startShared(sessions: PgSessions, index: VectorIndex, ns: string, query: ResolvedQuery, idle: number): Promise<{ uuid: string; scores: OutRecord[] }> {
    const now = this.now();
    if ((await sessions.count(index.def.name, now)) >= MAX_SESSIONS_PER_INDEX) {
      await sessions.reap(now);
      if ((await sessions.count(index.def.name, now)) >= MAX_SESSIONS_PER_INDEX) throw vectorError('tooManySessions', MAX_SESSIONS_PER_INDEX);
    }
    const s: Session = { index, ns, query, returned: new Set(), idleMs: idle * 1000, lastUsed: now };
    const scores = this.batch(s, query.topK);
    const uuid = randomUUID();
    const stored: StoredSession = { uuid, index: index.def.name, ns, query: toStored(query), returned: [...s.returned], idleMs: s.idleMs, lastUsed: now };
    await sessions.insert(stored);
    return { uuid, scores };
  }

  /** Drops the sessions of an index (on close). */
  dropIndex(index: VectorIndex): void {
    for (const [id, s] of this.sessions) if (s.index === index) this.remove(id, s);
  }

  close(): void {
    clearInterval(this.timer);
    this.sessions.clear();
    this.perIndex.clear();
  }
}

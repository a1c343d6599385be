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
 */
import { randomUUID } from 'node:crypto';
import type { VectorIndex } from '../engine/vector-index.js';
import { vectorError } from '../errors.js';
import { runQuery, type ResolvedQuery } from '../query/execute.js';
import { formatScored, type OutRecord } from '../query/records.js';

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

  constructor(private readonly now: () => number = Date.now) {
    this.timer = setInterval(() => this.reap(), 1000);
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
    let idle = DEFAULT_MAX_IDLE_S;
    if (maxIdle !== undefined && maxIdle !== null) {
      if (typeof maxIdle !== 'number' || !(maxIdle > 0)) throw vectorError('invalidMaxIdle');
      idle = Math.min(maxIdle, MAX_IDLE_S);
    }
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

  /** Next `additionalK` results of `index`'s session `uuid`. @throws VectorError 400 unknown/expired/other index's id */
  next(index: VectorIndex, uuid: unknown, additionalK: unknown): OutRecord[] {
    const s = this.get(index, uuid);
    if (typeof additionalK !== 'number' || !Number.isInteger(additionalK) || additionalK < 0) throw vectorError('invalidAdditionalK');
    s.lastUsed = this.now();
    return this.batch(s, additionalK);
  }

  /** Ends `index`'s session `uuid`. @throws VectorError 400 unknown/expired/other index's id */
  end(index: VectorIndex, uuid: unknown): string {
    this.remove(uuid as string, this.get(index, uuid));
    return 'Success';
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

/**
 * Resumable queries: `start` runs the query and returns the first `topK`
 * with a uuid; `next` returns the next `additionalK` excluding ids already returned (each batch is
 * fused on its own, as the reference's DBSF literals show); `end` frees it. A session idle for
 * `maxIdle` seconds (default 3600) is reaped. At most {@link MAX_SESSIONS} are active.
 */
import { randomUUID } from 'node:crypto';
import type { VectorIndex } from './engine.js';
import { badRequest } from './errors.js';
import { formatScored, runQuery, type OutRecord, type ResolvedQuery } from './reads.js';

export const MAX_SESSIONS = 10_000;
export const DEFAULT_MAX_IDLE_S = 3600;

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
      this.sessions.delete(id);
      n++;
    }
    return n;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Starts a session (`maxIdle` in seconds). */
  start(index: VectorIndex, ns: string, query: ResolvedQuery, maxIdle: unknown): { uuid: string; scores: OutRecord[] } {
    let idle = DEFAULT_MAX_IDLE_S;
    if (maxIdle !== undefined && maxIdle !== null) {
      if (typeof maxIdle !== 'number' || !(maxIdle > 0)) throw badRequest('maxIdle must be a positive number of seconds');
      idle = maxIdle;
    }
    this.reap();
    if (this.sessions.size >= MAX_SESSIONS) throw badRequest(`too many active resumable queries (max ${MAX_SESSIONS})`);
    const s: Session = { index, ns, query, returned: new Set(), idleMs: idle * 1000, lastUsed: this.now() };
    const scores = this.batch(s, query.topK);
    const uuid = randomUUID();
    this.sessions.set(uuid, s);
    return { uuid, scores };
  }

  private batch(s: Session, k: number): OutRecord[] {
    const nsState = s.index.ns(s.ns);
    const hits = runQuery(s.index, nsState, s.query, k, k, s.returned);
    const out = formatScored(s.index, nsState, hits, s.query);
    for (const r of out) s.returned.add(r.id);
    return out;
  }

  private get(uuid: unknown): Session {
    if (typeof uuid !== 'string') throw badRequest('uuid must be a string');
    this.reap();
    const s = this.sessions.get(uuid);
    if (!s) throw badRequest(`Resumable query ${uuid} does not exist or has expired`);
    return s;
  }

  /** Next `additionalK` results. */
  next(uuid: unknown, additionalK: unknown): OutRecord[] {
    const s = this.get(uuid);
    if (typeof additionalK !== 'number' || !Number.isInteger(additionalK) || additionalK < 0) throw badRequest('additionalK must be a non-negative integer');
    s.lastUsed = this.now();
    return this.batch(s, additionalK);
  }

  /** Ends a session. */
  end(uuid: unknown): string {
    this.get(uuid);
    this.sessions.delete(uuid as string);
    return 'Success';
  }

  /** Drops the sessions of an index (on close). */
  dropIndex(index: VectorIndex): void {
    for (const [id, s] of this.sessions) if (s.index === index) this.sessions.delete(id);
  }

  close(): void {
    clearInterval(this.timer);
    this.sessions.clear();
  }
}

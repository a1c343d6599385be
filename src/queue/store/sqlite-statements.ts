/**
 * Prepared statements of one SQLite handle, kept by SQL text: `db.prepare` parses and plans the
 * SQL every time (about 50,000-150,000 CPU instructions for the store's statements, measured with
 * `npm run bench:instructions`), so a statement run more than once — a workflow step's reads and
 * writes, the once-a-second sweep of expired waiters — is prepared once per process.
 *
 * Statements whose text is built from a filter (listings) are kept too; past {@link MAX_STATEMENTS}
 * distinct texts the cache starts over (better-sqlite3 finalizes statements when they are
 * garbage-collected). The cached statements keep better-sqlite3's default modes: no caller may
 * switch one to `raw`/`pluck`/`expand`.
 */
import type Database from 'better-sqlite3';

/**
 * The LIMIT clause of a statement whose row count is a bound parameter: `LIMIT +?`, never
 * `LIMIT ?`. SQLite reads the value of a bare `LIMIT ?` while planning (with `ORDER BY`, and in a
 * subquery), which ties the plan to that value: every new binding expires the statement and its
 * next run prepares it again (`sqlite3Reprepare`). Measured per run on an empty store: the
 * delivery claim 47-51 -> 7 µs, a logs page 19 -> 3 µs, an admission round's held rows 13 -> 4 µs;
 * the claim alone was 5 % of the instructions per delivered message in `npm run bench:instructions`.
 * An expression is not read at planning time; plans and rows are the same.
 */
export const BOUND_LIMIT = 'LIMIT +?';

/** Most distinct SQL texts kept per handle. */
const MAX_STATEMENTS = 512;

/** Returns `prepare(sql)` for `db` that prepares each distinct text once (module doc). */
export function statementCache(db: Database.Database): (sql: string) => Database.Statement {
  const cache = new Map<string, Database.Statement>();
  return (sql) => {
    let st = cache.get(sql);
    if (st === undefined) {
      st = db.prepare(sql);
      if (cache.size >= MAX_STATEMENTS) cache.clear();
      cache.set(sql, st);
    }
    return st;
  };
}

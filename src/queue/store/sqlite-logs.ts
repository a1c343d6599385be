/**
 * The SQLite store's log listing over rows that may hold two entries.
 *
 * A message handed to a delivery as it is published logs CREATED and ACTIVE at the same time;
 * the store writes them as one `logs` row (`state = 'CREATED'`, `active = 1`, migration 0005)
 * and lists that row as the two entries it stands for, in the order the two rows had: CREATED,
 * then ACTIVE (latest first: ACTIVE, then CREATED), the ACTIVE entry with no next delivery time,
 * error or response, as before. Every other row is one entry.
 *
 * Page cursors address an entry, not a row: the entry's key is `2 * seq` for a row's own state
 * and `2 * seq + 1` for the ACTIVE half of a combined row, and a cursor is the key of the last
 * entry of its page, so a page may end between the two halves and the next one starts at the
 * other. Keys grow with `seq` in the same order as the entries, so `earliestFirst` pages continue
 * at keys above the cursor, `latestFirst` ones below.
 */
import type { LogState } from '../model.js';
import type { LogRow } from './sqlite-rows.js';

/** A `logs` row of the SQLite store: {@link LogRow} and its `active` flag (0 or 1). */
export interface SqliteLogRow extends LogRow {
  active: number;
}

/** One listed entry: its cursor key (module doc) and the row that describes it. */
export interface KeyedLogRow {
  seq: number;
  row: LogRow;
}

/**
 * The SQL bound on `l.seq` for the rows a page after `cursor` (an entry key, digits) may come
 * from: `latestFirst` entries with a key below it, `earliestFirst` ones above it. The row the
 * cursor points into is included when its other half may follow; {@link logEntries} drops the
 * entries at or past the cursor.
 */
export function logCursorTerm(cursor: number, desc: boolean): { sql: string; param: number } {
  return desc ? { sql: 'AND l.seq < ?', param: Math.floor((cursor + 1) / 2) } : { sql: 'AND l.seq > ?', param: Math.floor((cursor - 1) / 2) };
}

/**
 * The WHERE term for a state filter (`states` non-empty): a combined row also matches ACTIVE.
 * Returns SQL with `?` placeholders and its parameters.
 */
export function logStateTerm(states: readonly LogState[]): { sql: string; params: unknown[] } {
  const inList = `l.state IN (${states.map(() => '?').join(',')})`;
  return { sql: states.includes('ACTIVE') ? `(${inList} OR l.active = 1)` : inList, params: [...states] };
}

/**
 * The entries of `rows` (in `seq` order, descending when `desc`) with their keys, a combined row
 * expanded into its two (module doc); entries whose state is not in `states` (when given) and
 * those at or before `cursor` (an entry key, in the page's order) left out. Lazy: rows past the
 * page are never read.
 */
export function* logEntries(
  rows: Iterable<SqliteLogRow>,
  desc: boolean,
  cursor: number | undefined,
  states: readonly LogState[] | undefined,
): Generator<KeyedLogRow> {
  const keep = (key: number, state: string) =>
    (states === undefined || states.length === 0 || states.includes(state as LogState)) &&
    (cursor === undefined || (desc ? key < cursor : key > cursor));
  for (const r of rows) {
    const own = 2 * r.seq;
    if (r.active !== 1) {
      if (keep(own, r.state)) yield { seq: own, row: r };
      continue;
    }
    const active: KeyedLogRow = { seq: own + 1, row: { ...r, state: 'ACTIVE', next_delivery_time: null } };
    if (desc && keep(active.seq, 'ACTIVE')) yield active;
    if (keep(own, r.state)) yield { seq: own, row: r };
    if (!desc && keep(active.seq, 'ACTIVE')) yield active;
  }
}

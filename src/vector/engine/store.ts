/**
 * Durable record store of one index: SQLite (better-sqlite3, WAL, `synchronous=NORMAL`) in
 * `<dataDir>/vector/<index>.sqlite`. Every statement of the vector area lives here (no SQL in route
 * handlers). COMMIT does not fsync: a write is durable once {@link VectorStore.wal} has synced the
 * WAL after it (`src/sqlite-wal-sync.ts`; the same guarantee as `synchronous=FULL`, without
 * stalling the event loop), which the index's group commit waits for before it answers.
 *
 * Tables:
 * - `meta(key, value)`: `dimension` (fixed by the first dense upsert), `seq` (last sequence number).
 * - `namespaces(id, name, next_pos, generation)`: `next_pos` = next range position (per namespace,
 *   restarts at 0 after a reset); `generation` bumps on reset so stale graph snapshots are ignored.
 * - `records(ns, id, pos, seq, vector, sparse, metadata, data)`: `pos` = insertion position (the
 *   range cursor and the ANN label, kept when an id is upserted again), `seq` = global sequence
 *   number of the last write to the record (snapshot replay: records with `seq` > the snapshot's).
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { backupSqlite } from '../../sqlite-backup.js';
import { WalCheckpointer, WalSyncer } from '../../sqlite-wal-sync.js';

/**
 * Schema version of an index's SQLite file (`PRAGMA user_version`), the tables below. Files written
 * before versions were recorded have 0 and the same tables: opening one stamps it 1. A file with a
 * higher number was written by a newer svc and is refused before anything in it is changed.
 */
export const VECTOR_SCHEMA_VERSION = 1;

/**
 * Meta key of a local copy whose dense vectors are (partly) left out (`vectorless.ts`): present
 * until every record's vector was filled from the shared store (`vector-index.ts` `fill`).
 */
export const FILL_MARK = 'vectors_to_fill';

/**
 * What the closed index file `file` (a copy: `VectorStore.backup`) holds that a graph snapshot is
 * checked against: its sequence number (`meta.seq`, 0 when none), its dimension (`meta.dimension`,
 * null when none yet) and each namespace's id and generation (`snapshot.ts` `SnapshotExpectation`).
 */
export function storedState(file: string): { seq: number; dimension: number | null; namespaces: { id: number; generation: number }[] } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const meta = (key: string) => db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key) as string | undefined;
    const dimension = meta('dimension');
    const namespaces = db.prepare('SELECT id, generation FROM namespaces ORDER BY id').all() as { id: number; generation: number }[];
    return { seq: Number(meta('seq') ?? 0), dimension: dimension === undefined ? null : Number(dimension), namespaces };
  } finally {
    db.close();
  }
}

export interface NamespaceRow {
  id: number;
  name: string;
  next_pos: number;
  generation: number;
}

export interface RecordRow {
  id: string;
  pos: number;
  seq: number;
  vector: Buffer | null;
  sparse: Buffer | null;
  metadata: string | null;
  data: string | null;
}

export type RecordHead = Pick<RecordRow, 'id' | 'pos' | 'seq' | 'metadata'> & { hasSparse: 0 | 1 };

/**
 * One entry of a shared store's change sequence (PostgreSQL, `store-pg.ts`), in the order of `seq`:
 * - `upsert`: record `id` of namespace `ns` written at position `pos`; `record` = its row when it
 *   still holds this write (absent when the record was written again or deleted since: a later
 *   change carries it);
 * - `delete`: record `id` of `ns` deleted;
 * - `create` / `rename`: namespace `ns` created / renamed to `name`;
 * - `drop`: namespace `ns` deleted with its records; `reset`: its records deleted, positions
 *   restarting at 0, generation bumped;
 * - `dimension`: the index's dense dimension fixed to `pos`.
 */
export interface ChangeRow {
  seq: number;
  kind: 'upsert' | 'delete' | 'create' | 'rename' | 'drop' | 'reset' | 'dimension';
  ns: number | null;
  id: string | null;
  pos: number | null;
  name: string | null;
  record?: Pick<RecordRow, 'vector' | 'sparse' | 'metadata' | 'data'>;
}

/** A sparse vector as parallel arrays (indices int32, values float32). */
export interface SparseVector {
  indices: Int32Array;
  values: Float32Array;
}

/** Sparse vector -> BLOB: n int32 indices then n float32 values (little-endian). */
export function sparseToBlob(s: SparseVector): Buffer {
  const n = s.indices.length;
  const buf = Buffer.alloc(n * 8);
  Buffer.from(s.indices.buffer, s.indices.byteOffset, n * 4).copy(buf, 0);
  Buffer.from(s.values.buffer, s.values.byteOffset, n * 4).copy(buf, n * 4);
  return buf;
}

/** Inverse of {@link sparseToBlob}. */
export function blobToSparse(b: Buffer): SparseVector {
  const n = b.byteLength / 8;
  const indices = new Int32Array(n);
  const values = new Float32Array(n);
  new Uint8Array(indices.buffer).set(b.subarray(0, n * 4));
  new Uint8Array(values.buffer).set(b.subarray(n * 4));
  return { indices, values };
}

/**
 * Delay (ms) between the first commit a WAL checkpoint has not covered and that checkpoint: about
 * SQLite's automatic rhythm (1,000 pages, ~4 MB) at a thousand 768-d vectors per second.
 */
export const CHECKPOINT_INTERVAL_MS = 1000;
/**
 * The checkpoint worker stops this long (ms) after a checkpoint when no commit came meanwhile:
 * its thread (~9 MB RSS) lives only while writes arrive (and at most {@link CHECKPOINT_INTERVAL_MS}
 * + this after the last one).
 */
export const CHECKPOINT_IDLE_MS = 500;

/** The SQLite store of one index. Methods throw better-sqlite3 errors on I/O failure. */
export class VectorStore {
  readonly db: Database.Database;
  /** fdatasync of the `-wal` file: a committed write is durable once a sync started after its COMMIT resolved. */
  readonly wal: WalSyncer;
  /**
   * WAL checkpoints on a worker thread (call `committed()` after each commit); SQLite's automatic
   * checkpoint is off while it works and back on (every 1,000 pages, SQLite's default) after a failure.
   */
  readonly checkpointer: WalCheckpointer;
  /** Told when the checkpoint worker failed (automatic checkpoints are back on). */
  onCheckpointError: ((err: Error) => void) | undefined;
  private readonly st: Record<string, Database.Statement>;
  /**
   * While set (a shared store's group commit, `vector-index.ts`): every write below is also
   * appended here as a {@link ChangeRow} (records with a copy of their data), to be committed to
   * the shared store. `nextSeq` numbers the changes that are not record writes.
   */
  capture: { changes: ChangeRow[]; nextSeq: () => number } | undefined;

  constructor(readonly file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    const version = Number(this.db.pragma('user_version', { simple: true }));
    if (version > VECTOR_SCHEMA_VERSION) {
      this.db.close();
      throw new Error(`${file}: vector schema version ${version} is newer than this svc supports (${VECTOR_SCHEMA_VERSION}); upgrade svc`);
    }
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.wal = new WalSyncer(`${file}-wal`);
    this.checkpointer = new WalCheckpointer(file, {
      intervalMs: CHECKPOINT_INTERVAL_MS,
      idleMs: CHECKPOINT_IDLE_MS,
      onError: (err) => {
        if (this.db.open) this.db.pragma('wal_autocheckpoint = 1000');
        this.onCheckpointError?.(err);
      },
    });
    this.db.pragma('wal_autocheckpoint = 0');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS namespaces (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
        next_pos INTEGER NOT NULL DEFAULT 0, generation INTEGER NOT NULL DEFAULT 0);
      CREATE TABLE IF NOT EXISTS records (
        ns INTEGER NOT NULL, id TEXT NOT NULL, pos INTEGER NOT NULL, seq INTEGER NOT NULL,
        vector BLOB, sparse BLOB, metadata TEXT, data TEXT,
        PRIMARY KEY (ns, id)) WITHOUT ROWID;
      CREATE UNIQUE INDEX IF NOT EXISTS records_pos ON records (ns, pos);
      CREATE INDEX IF NOT EXISTS records_seq ON records (ns, seq);
      INSERT OR IGNORE INTO namespaces (name) VALUES ('');
    `);
    if (version < VECTOR_SCHEMA_VERSION) this.db.pragma(`user_version = ${VECTOR_SCHEMA_VERSION}`);
    const p = (sql: string) => this.db.prepare(sql);
    this.st = {
      getMeta: p('SELECT value FROM meta WHERE key = ?'),
      setMeta: p('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value'),
      namespaces: p('SELECT id, name, next_pos, generation FROM namespaces ORDER BY id'),
      createNs: p('INSERT INTO namespaces (name) VALUES (?) RETURNING id, name, next_pos, generation'),
      renameNs: p('UPDATE namespaces SET name = ? WHERE id = ?'),
      dropNs: p('DELETE FROM namespaces WHERE id = ?'),
      resetNs: p('UPDATE namespaces SET next_pos = 0, generation = generation + 1 WHERE id = ?'),
      setNextPos: p('UPDATE namespaces SET next_pos = ? WHERE id = ?'),
      clearNs: p('DELETE FROM records WHERE ns = ?'),
      upsert: p(`INSERT INTO records (ns, id, pos, seq, vector, sparse, metadata, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(ns, id) DO UPDATE SET seq = excluded.seq, vector = excluded.vector, sparse = excluded.sparse,
          metadata = excluded.metadata, data = excluded.data`),
      del: p('DELETE FROM records WHERE ns = ? AND id = ?'),
      get: p('SELECT id, pos, seq, vector, sparse, metadata, data FROM records WHERE ns = ? AND id = ?'),
      getByPos: p('SELECT id, pos, seq, vector, sparse, metadata, data FROM records WHERE ns = ? AND pos = ?'),
      vectorAt: p('SELECT vector FROM records WHERE ns = ? AND pos = ?').pluck(),
      vectorsByPos: p('SELECT r.pos AS pos, r.vector AS vector FROM json_each(?) j CROSS JOIN records r ON r.ns = ? AND r.pos = j.value'),
      heads: p('SELECT id, pos, seq, metadata, sparse IS NOT NULL AS hasSparse FROM records WHERE ns = ? ORDER BY pos'),
      // primary-key order: one sequential pass over the table (ORDER BY pos costs a lookup per row)
      headsRaw: p('SELECT id, pos, metadata FROM records WHERE ns = ?').raw(),
      vectors: p('SELECT pos, vector, sparse FROM records WHERE ns = ? ORDER BY pos'),
      newer: p('SELECT pos, seq, vector, sparse FROM records WHERE ns = ? AND seq > ? ORDER BY seq'),
      range: p('SELECT id, pos, seq, vector, sparse, metadata, data FROM records WHERE ns = ? AND pos >= ? ORDER BY pos LIMIT ?'),
      rangePrefix: p(`SELECT id, pos, seq, vector, sparse, metadata, data FROM records
        WHERE ns = ? AND pos >= ? AND substr(id, 1, ?) = ? ORDER BY pos LIMIT ?`),
      createNsAt: p('INSERT INTO namespaces (id, name) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, next_pos = 0'),
      raisePos: p('UPDATE namespaces SET next_pos = max(next_pos, ?) WHERE id = ?'),
      clearAll: p('DELETE FROM records'),
      anyRecord: p('SELECT 1 FROM records LIMIT 1').pluck(),
      delMeta: p('DELETE FROM meta WHERE key = ?'),
      clearNamespaces: p('DELETE FROM namespaces'),
      clearMeta: p('DELETE FROM meta'),
      putNs: p('INSERT INTO namespaces (id, name, next_pos, generation) VALUES (?, ?, ?, ?)'),
      pageInfo: p('SELECT (SELECT page_count FROM pragma_page_count()) * (SELECT page_size FROM pragma_page_size()) AS size'),
      unfilled: p('SELECT pos FROM records WHERE ns = ? AND pos >= ? AND pos < ? AND vector IS NULL').pluck(),
      fill: p('UPDATE records SET vector = ? WHERE ns = ? AND id = ? AND seq = ? AND vector IS NULL'),
      maxPos: p('SELECT max(pos) FROM records WHERE ns = ?').pluck(),
    };
  }

  getMeta(key: string): string | undefined {
    return (this.st.getMeta.get(key) as { value: string } | undefined)?.value;
  }
  setMeta(key: string, value: string): void {
    this.st.setMeta.run(key, value);
  }
  deleteMeta(key: string): void {
    this.st.delMeta.run(key);
  }
  /** True when some namespace holds a record. */
  hasRecords(): boolean {
    return this.st.anyRecord.get() !== undefined;
  }
  namespaces(): NamespaceRow[] {
    return this.st.namespaces.all() as NamespaceRow[];
  }
  createNamespace(name: string): NamespaceRow {
    const row = this.st.createNs.get(name) as NamespaceRow;
    this.note('create', row.id, null, null, name);
    return row;
  }
  renameNamespace(id: number, name: string): void {
    this.st.renameNs.run(name, id);
    this.note('rename', id, null, null, name);
  }
  /** Deletes the namespace row and all its records. */
  dropNamespace(id: number): void {
    this.st.clearNs.run(id);
    this.st.dropNs.run(id);
    this.note('drop', id);
  }
  /** Deletes every record, restarts positions at 0 and bumps the generation. */
  resetNamespace(id: number): void {
    this.st.clearNs.run(id);
    this.st.resetNs.run(id);
    this.note('reset', id);
  }
  /** Appends a change that is not a record write to {@link capture}. */
  private note(kind: ChangeRow['kind'], ns: number | null, id: string | null = null, pos: number | null = null, name: string | null = null): void {
    const c = this.capture;
    if (c) c.changes.push({ seq: c.nextSeq(), kind, ns, id, pos, name });
  }
  /** Fixes the dense dimension (meta `dimension`; a change of a shared store). */
  setDimension(d: number): void {
    this.setMeta('dimension', String(d));
    this.note('dimension', null, null, d);
  }
  setNextPos(id: number, nextPos: number): void {
    this.st.setNextPos.run(nextPos, id);
  }
  upsert(ns: number, r: Omit<RecordRow, 'pos'> & { pos: number }): void {
    this.st.upsert.run(ns, r.id, r.pos, r.seq, r.vector, r.sparse, r.metadata, r.data);
    // the vector's bytes may be a reused conversion buffer: the capture keeps a copy
    this.capture?.changes.push({
      seq: r.seq, kind: 'upsert', ns, id: r.id, pos: r.pos, name: null,
      record: { vector: r.vector && Buffer.from(r.vector), sparse: r.sparse, metadata: r.metadata, data: r.data },
    });
  }
  delete(ns: number, id: string): boolean {
    const gone = this.st.del.run(ns, id).changes > 0;
    if (gone) this.note('delete', ns, id);
    return gone;
  }

  /**
   * Applies changes of a shared store's sequence (`ChangeRow`, in `seq` order) to this local copy,
   * with the positions, namespace ids and sequence numbers they carry, and sets meta `seq` to the
   * last one. Not captured. Run inside a transaction.
   */
  applyChanges(changes: ChangeRow[]): void {
    for (const c of changes) {
      switch (c.kind) {
        case 'upsert':
          if (c.record) this.st.upsert.run(c.ns, c.id, c.pos, c.seq, c.record.vector, c.record.sparse, c.record.metadata, c.record.data);
          this.st.raisePos.run(c.pos! + 1, c.ns);
          break;
        case 'delete':
          this.st.del.run(c.ns, c.id);
          break;
        case 'create':
          this.st.createNsAt.run(c.ns, c.name);
          break;
        case 'rename':
          this.st.renameNs.run(c.name, c.ns);
          break;
        case 'drop':
          this.st.clearNs.run(c.ns);
          this.st.dropNs.run(c.ns);
          break;
        case 'reset':
          this.st.clearNs.run(c.ns);
          this.st.resetNs.run(c.ns);
          break;
        case 'dimension':
          this.setMeta('dimension', String(c.pos));
          break;
      }
    }
    if (changes.length) this.setMeta('seq', String(changes[changes.length - 1].seq));
  }

  /**
   * Empties this local copy (records, namespaces, meta) before a whole reload from a shared store;
   * run inside a transaction with the reload ({@link putNamespace}, {@link upsert}).
   */
  clearAll(): void {
    this.st.clearAll.run();
    this.st.clearNamespaces.run();
    this.st.clearMeta.run();
  }

  /** Inserts a namespace row as a shared store has it (whole reload). */
  putNamespace(row: NamespaceRow): void {
    this.st.putNs.run(row.id, row.name, row.next_pos, row.generation);
  }
  get(ns: number, id: string): RecordRow | undefined {
    return this.st.get.get(ns, id) as RecordRow | undefined;
  }
  getByPos(ns: number, pos: number): RecordRow | undefined {
    return this.st.getByPos.get(ns, pos) as RecordRow | undefined;
  }
  /** Dense vector BLOB of the record at `pos` (undefined/null when absent or sparse-only). */
  vectorAt(ns: number, pos: number): Buffer | null | undefined {
    return this.st.vectorAt.get(ns, pos) as Buffer | null | undefined;
  }
  /** Dense vectors of the records at `positions` (one statement; order not guaranteed). */
  vectorsByPos(ns: number, positions: number[]): IterableIterator<{ pos: number; vector: Buffer | null }> {
    return this.st.vectorsByPos.iterate(JSON.stringify(positions), ns) as IterableIterator<{ pos: number; vector: Buffer | null }>;
  }
  /** id, pos, seq, metadata of every record of a namespace, in position order. */
  heads(ns: number): IterableIterator<RecordHead> {
    return this.st.heads.iterate(ns) as IterableIterator<RecordHead>;
  }
  /**
   * `[id, pos, metadata JSON or null]` of every record of a namespace, in no particular order
   * (start-up: arrays instead of row objects, one sequential pass over the table).
   */
  headsRaw(ns: number): IterableIterator<[string, number, string | null]> {
    return this.st.headsRaw.iterate(ns) as IterableIterator<[string, number, string | null]>;
  }
  /** Vectors of every record (graph rebuild), in position order. */
  vectors(ns: number): IterableIterator<Pick<RecordRow, 'pos' | 'vector' | 'sparse'>> {
    return this.st.vectors.iterate(ns) as IterableIterator<Pick<RecordRow, 'pos' | 'vector' | 'sparse'>>;
  }
  /** Vectors of records written after sequence number `seq` (snapshot replay). */
  newerThan(ns: number, seq: number): IterableIterator<Pick<RecordRow, 'pos' | 'seq' | 'vector' | 'sparse'>> {
    return this.st.newer.iterate(ns, seq) as IterableIterator<Pick<RecordRow, 'pos' | 'seq' | 'vector' | 'sparse'>>;
  }
  /** Up to `limit` records with `pos >= from` (and id starting with `prefix`), in position order. */
  range(ns: number, from: number, limit: number, prefix?: string): RecordRow[] {
    if (prefix) return this.st.rangePrefix.all(ns, from, prefix.length, prefix, limit) as RecordRow[];
    return this.st.range.all(ns, from, limit) as RecordRow[];
  }
  /**
   * Positions in `[from, to)` of namespace `ns` whose dense vector is not filled yet (a copy
   * published without them, {@link FILL_MARK}); one range of the position index, a row read each.
   */
  unfilled(ns: number, from: number, to: number): number[] {
    return this.st.unfilled.all(ns, from, to) as number[];
  }
  /** Highest position of a record of `ns` (undefined: none). */
  maxPos(ns: number): number | undefined {
    return (this.st.maxPos.get(ns) as number | null) ?? undefined;
  }
  /**
   * Fills the dense vectors of `rows` (as the shared store has them) into records of `ns` that
   * still hold the same write (same id and sequence number) and have none yet; a record written,
   * deleted or reset since keeps what it has. Not captured; not synced (a fill lost to a crash is
   * done again: the marker stays until after it in the WAL). Resolves to the number filled.
   */
  fillVectors(ns: number, rows: { id: string; seq: number; vector: Buffer }[]): number {
    let n = 0;
    this.transaction(() => {
      for (const r of rows) n += this.st.fill.run(r.vector, ns, r.id, r.seq).changes;
    });
    // checkpointed like a write (automatic checkpoints are off): the WAL would otherwise keep
    // every page each of these transactions rewrote (gigabytes at 1M records)
    if (n > 0) this.checkpointer.committed();
    return n;
  }
  /** Database size in bytes (pages x page size). */
  size(): number {
    return (this.st.pageInfo.get() as { size: number }).size;
  }
  /**
   * Online copy of the database to the new file `file` (`src/sqlite-backup.ts`): every write
   * committed before the call is in it. Resolves to the copy's schema version.
   */
  async backup(file: string): Promise<{ schemaVersion: number }> {
    return { schemaVersion: (await backupSqlite(this.file, file)).userVersion };
  }

  /** Runs `fn` in a transaction (a savepoint when nested). */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }
  /** True while the database is open and answers a read. */
  ping(): boolean {
    if (!this.db.open) return false;
    try {
      return this.db.prepare('SELECT 1').pluck().get() === 1;
    } catch {
      return false;
    }
  }

  /**
   * Closes the connection (the checkpoint worker is stopped at once: use `checkpointer.close()`
   * first to let a running checkpoint finish; `wal.close()` to wait for the last fsync).
   */
  close(): void {
    this.checkpointer.terminate();
    if (this.db.open) this.db.close();
  }
}

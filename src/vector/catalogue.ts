/**
 * The catalogue of the vector indexes created at run time through the management API
 * (`POST /v2/vector/index`): one SQLite file, `<dataDir>/vector/catalogue.db`, next to the
 * indexes' own files (not in the operator's `SVC_VECTOR_INDEXES` file).
 *
 * Each row: `id` (a UUID: the index's key — its files `vector/<id>.*`, its tokens
 * `vector.<id>.token`/`.readonlyToken`, its path `/<id>` on the vector port), `name` (unique, shown
 * and changed by rename), `definition` (JSON {@link IndexDefinition} whose `name` is the id),
 * `created_at` (ms since the epoch) and `state`:
 * - `creating`: written first on a create (it reserves the name); the index's files and tokens
 *   are made after it; the create commits by switching it to `ready`;
 * - `ready`: the index exists and is served;
 * - `deleting`: written first on a delete; the files and tokens are removed after it, then the row.
 * A crash (SIGKILL) between those steps leaves a `creating` or `deleting` row: start-up removes that
 * index's leftovers and the row ({@link Catalogue.unfinished}), so an index is either wholly there
 * or wholly gone and a name is never blocked by a half-made one.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { IndexDefinition } from './definitions.js';

export type CatalogueState = 'creating' | 'ready' | 'deleting';

export interface CatalogueEntry {
  id: string;
  name: string;
  definition: IndexDefinition;
  /** ms since the epoch */
  createdAt: number;
  state: CatalogueState;
}

/** Thrown by {@link Catalogue.reserve} and {@link Catalogue.rename} when the name is taken. */
export class NameTakenError extends Error {}

/** File name of the catalogue inside `<dataDir>/vector`. */
export const CATALOGUE_FILE = 'catalogue.db';

interface Row {
  id: string;
  name: string;
  definition: string;
  created_at: number;
  state: CatalogueState;
}

const toEntry = (r: Row): CatalogueEntry => ({ id: r.id, name: r.name, definition: JSON.parse(r.definition) as IndexDefinition, createdAt: r.created_at, state: r.state });

/** The runtime index catalogue (synchronous SQLite, WAL, `synchronous=FULL`: each change is on disk when the call returns). */
export class Catalogue {
  private readonly db: Database.Database;

  private constructor(readonly file: string, readonly = false) {
    this.db = new Database(file, { readonly, fileMustExist: readonly });
    if (!readonly) {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL');
      this.db.exec(`CREATE TABLE IF NOT EXISTS indexes (
        id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, definition TEXT NOT NULL,
        created_at INTEGER NOT NULL, state TEXT NOT NULL)`);
    }
  }

  /** Opens (creating) `<dataDir>/vector/catalogue.db`. @throws Error from SQLite (unreadable file). */
  static open(dataDir: string): Catalogue {
    const dir = path.join(dataDir, 'vector');
    fs.mkdirSync(dir, { recursive: true });
    return new Catalogue(path.join(dir, CATALOGUE_FILE));
  }

  /** The `ready` entries without opening the file for writing (for `svc env`); [] when there is no catalogue. */
  static readReady(dataDir: string): CatalogueEntry[] {
    const file = path.join(dataDir, 'vector', CATALOGUE_FILE);
    if (!fs.existsSync(file)) return [];
    let c: Catalogue | undefined;
    try {
      c = new Catalogue(file, true);
      return c.list();
    } catch {
      return [];
    } finally {
      c?.close();
    }
  }

  /** The `ready` entries, oldest first. */
  list(): CatalogueEntry[] {
    return (this.db.prepare(`SELECT * FROM indexes WHERE state = 'ready' ORDER BY created_at, id`).all() as Row[]).map(toEntry);
  }

  /** The entries left `creating` or `deleting` by an interrupted create or delete. */
  unfinished(): CatalogueEntry[] {
    return (this.db.prepare(`SELECT * FROM indexes WHERE state != 'ready'`).all() as Row[]).map(toEntry);
  }

  /** Writes a `creating` row. @throws NameTakenError when a row (any state) has `name`. */
  reserve(id: string, name: string, definition: IndexDefinition, createdAt: number): void {
    try {
      this.db.prepare(`INSERT INTO indexes (id, name, definition, created_at, state) VALUES (?, ?, ?, ?, 'creating')`).run(id, name, JSON.stringify(definition), createdAt);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw new NameTakenError(name);
      throw err;
    }
  }

  /** Sets the state of `id`. */
  setState(id: string, state: CatalogueState): void {
    this.db.prepare('UPDATE indexes SET state = ? WHERE id = ?').run(state, id);
  }

  /** Renames `id`. @throws NameTakenError when another row has `name`. */
  rename(id: string, name: string): void {
    try {
      this.db.prepare('UPDATE indexes SET name = ? WHERE id = ?').run(name, id);
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw new NameTakenError(name);
      throw err;
    }
  }

  /** Removes the row of `id`. */
  remove(id: string): void {
    this.db.prepare('DELETE FROM indexes WHERE id = ?').run(id);
  }

  /** Copies the catalogue to `dest` (SQLite online backup). */
  async backup(dest: string): Promise<void> {
    await this.db.backup(dest);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/**
 * Removes every file of index `key` in `<dataDir>/vector` (`<key>.sqlite`, its `-wal`/`-shm`, the
 * `<key>.snapshots` directory, …). Index keys never contain a dot, so `<key>.` matches no other index.
 */
export function removeIndexFiles(dataDir: string, key: string): void {
  const dir = path.join(dataDir, 'vector');
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) if (n.startsWith(`${key}.`)) fs.rmSync(path.join(dir, n), { recursive: true, force: true });
}

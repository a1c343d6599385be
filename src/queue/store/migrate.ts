/**
 * Numbered, append-only SQLite migrations: files
 * `migrations/NNNN_name.sql` next to this module, applied in order, each in its own transaction,
 * with the schema version kept in `PRAGMA user_version`.
 *
 * Migrations run with foreign keys off and end with `PRAGMA foreign_key_check` (a migration that
 * rebuilds a table others refer to; SQLite's documented procedure for such changes).
 *
 * @throws Error when the database was written by a newer svc (its version is above the newest
 *   migration here), when a migration file fails, or when one leaves a broken foreign key.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';
import { loadMigrationFiles, type Migration } from '../../pg.js';

export type { Migration };

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** The migrations shipped with this build, ordered by version (`src/pg.ts` `loadMigrationFiles`). */
export function loadMigrations(dir = DIR): Migration[] {
  return loadMigrationFiles(dir, 'queue');
}

/** The newest schema version of this build (the number of its last migration). */
export function latestVersion(): number {
  const migrations = loadMigrations();
  return migrations.length ? migrations[migrations.length - 1].version : 0;
}

/** Brings `db` to the newest schema; returns the [from, to] versions. */
export function migrate(db: Database.Database, file: string): [number, number] {
  const migrations = loadMigrations();
  const latest = latestVersion();
  const current = Number(db.pragma('user_version', { simple: true }));
  if (current > latest) {
    throw new Error(`${file}: schema version ${current} is newer than this svc supports (${latest}); upgrade svc`);
  }
  const pending = migrations.filter((m) => m.version > current);
  if (pending.length === 0) return [current, latest];
  // Foreign keys off while migrating (a no-op inside a transaction, so around them), checked
  // before each commit: SQLite's procedure for rebuilding a table that others refer to (a DROP
  // TABLE of `messages` would otherwise delete the rows `dlq` refers to; migration 0007).
  const fk = Number(db.pragma('foreign_keys', { simple: true }));
  db.pragma('foreign_keys = OFF');
  try {
    for (const mig of pending) {
      db.transaction(() => {
        db.exec(mig.sql);
        const broken = db.pragma('foreign_key_check') as unknown[];
        if (broken.length) throw new Error(`${file}: migration ${mig.version} (${mig.name}) leaves ${broken.length} broken foreign key(s)`);
        db.pragma(`user_version = ${mig.version}`);
      })();
    }
  } finally {
    db.pragma(`foreign_keys = ${fk ? 'ON' : 'OFF'}`);
  }
  return [current, latest];
}

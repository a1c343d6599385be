/**
 * Numbered, append-only SQLite migrations: files
 * `migrations/NNNN_name.sql` next to this module, applied in order, each in its own transaction,
 * with the schema version kept in `PRAGMA user_version`.
 *
 * @throws Error when the database was written by a newer svc (its version is above the newest
 *   migration here) or when a migration file fails.
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
  for (const mig of migrations.filter((m) => m.version > current)) {
    db.transaction(() => {
      db.exec(mig.sql);
      db.pragma(`user_version = ${mig.version}`);
    })();
  }
  return [current, latest];
}

/**
 * Numbered, append-only SQLite migrations: files
 * `migrations/NNNN_name.sql` next to this module, applied in order, each in its own transaction,
 * with the schema version kept in `PRAGMA user_version`.
 *
 * @throws Error when the database was written by a newer svc (its version is above the newest
 *   migration here) or when a migration file fails.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations shipped with this build, ordered by version. */
export function loadMigrations(dir = DIR): Migration[] {
  const out: Migration[] = [];
  for (const f of fs.readdirSync(dir).sort()) {
    const m = /^(\d{4})_([\w-]+)\.sql$/.exec(f);
    if (!m) continue;
    out.push({ version: Number(m[1]), name: m[2], sql: fs.readFileSync(path.join(dir, f), 'utf8') });
  }
  // Strictly increasing; a gap is tolerated (two migrations written in parallel land in any order
  // during development), a duplicate is not.
  out.forEach((mig, i) => {
    if (i > 0 && mig.version <= out[i - 1].version) throw new Error(`queue migrations: duplicate version ${mig.version} (${mig.name})`);
  });
  return out;
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

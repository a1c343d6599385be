/**
 * Online copy of a live SQLite database (WAL mode) for backups (`src/backup.ts`), shared by the
 * queue and vector stores. Uses SQLite's online backup API through better-sqlite3's
 * `db.backup()` on the store's own connection: pages are copied in steps of
 * {@link BACKUP_PAGES_PER_STEP} with the event loop free between steps, and a write made through
 * that connection while the copy runs is applied to the copy too (sqlite.org/backup.html: "If the
 * source database is modified by using the same database connection as is used by the backup
 * operation, then the backup database is automatically updated at the same time"), so the copy
 * ends as the database stood at its last step: every write committed before the call is in it.
 * A plain file copy of a WAL database is not used: it can miss committed frames still in `-wal`
 * and tear pages a checkpoint is writing.
 */
import type Database from 'better-sqlite3';
import DatabaseCtor from 'better-sqlite3';

/** Pages per backup step (4 KiB pages: 1 MiB), one step per event-loop turn. */
export const BACKUP_PAGES_PER_STEP = 256;

/**
 * Copies the open database `db` to the new file `dest` (it must not exist), then turns the copy
 * into a single self-contained file (`journal_mode = DELETE`: no `-wal` to carry along).
 * Resolves to the copy's `PRAGMA user_version` (its schema version) and its size in pages.
 * @throws the SQLite error of a failed step (the partial `dest` is left for the caller to remove)
 */
export async function backupSqlite(db: Database.Database, dest: string): Promise<{ userVersion: number; pages: number }> {
  let pages = 0;
  await db.backup(dest, {
    progress: ({ totalPages }) => {
      pages = totalPages;
      return BACKUP_PAGES_PER_STEP;
    },
  });
  const copy = new DatabaseCtor(dest);
  try {
    copy.pragma('journal_mode = DELETE');
    return { userVersion: Number(copy.pragma('user_version', { simple: true })), pages };
  } finally {
    copy.close();
  }
}

/**
 * {@link backupSqlite} of the database file `src` (no svc process has it open: a pre-upgrade
 * backup at start-up), through a connection of its own (which replays a `-wal` left by a crash).
 */
export async function backupSqliteFile(src: string, dest: string): Promise<{ userVersion: number; pages: number }> {
  const db = new DatabaseCtor(src, { fileMustExist: true });
  try {
    return await backupSqlite(db, dest);
  } finally {
    db.close();
  }
}

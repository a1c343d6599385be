/**
 * Online copy of a live SQLite database (WAL mode) for backups (`src/backup.ts`), shared by the
 * queue and vector stores. SQLite's online backup API (through better-sqlite3's `db.backup()`)
 * runs on a worker thread with a connection of its own, and copies every page in ONE step: that
 * step holds one read transaction, so the copy is the database as committed when the step began
 * (every write committed before the call is in it), and in WAL mode the store's writers go on
 * meanwhile (readers do not block writers). Nothing of it runs on the event loop: neither the
 * page copy nor the copy's final fsync (measured in `npm run bench:backup`: the same copy stepped
 * on the event loop stalled requests for up to 250 ms per database).
 * A plain file copy of a WAL database is not used: it can miss committed frames still in `-wal`
 * and tear pages a checkpoint is writing.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const requireCjs = createRequire(import.meta.url);

/** The backup worker (CommonJS, evaluated): copy, then make the copy one self-contained file. */
const BACKUP_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
(async () => {
  const db = new Database(workerData.file, { fileMustExist: true });
  let pages = 0;
  try {
    // 0x7fffffff pages per step: all of it in one step, i.e. one read transaction
    await db.backup(workerData.dest, { progress: (p) => ((pages = p.totalPages), 0x7fffffff) });
  } finally {
    db.close();
  }
  const copy = new Database(workerData.dest);
  let userVersion;
  try {
    copy.pragma('journal_mode = DELETE');
    userVersion = Number(copy.pragma('user_version', { simple: true }));
  } finally {
    copy.close();
  }
  parentPort.postMessage({ ok: true, pages, userVersion });
})().catch((err) => parentPort.postMessage({ ok: false, message: String(err && err.message) }));
`;

/**
 * Copies the database `file` (open in this process or not) to the new file `dest`, then turns
 * the copy into a single self-contained file (`journal_mode = DELETE`: no `-wal` to carry along).
 * Resolves to the copy's `PRAGMA user_version` (its schema version) and its size in pages.
 * @throws Error with SQLite's message when the copy fails (a partial `dest` is left for the caller)
 */
export function backupSqlite(file: string, dest: string): Promise<{ userVersion: number; pages: number }> {
  return new Promise((resolve, reject) => {
    const w = new Worker(BACKUP_WORKER, { eval: true, workerData: { file, dest, driver: requireCjs.resolve('better-sqlite3') } });
    let settled = false;
    w.once('message', (m: { ok: boolean; pages: number; userVersion: number; message?: string }) => {
      settled = true;
      if (m.ok) resolve({ userVersion: m.userVersion, pages: m.pages });
      else reject(new Error(`SQLite backup of ${file}: ${m.message}`));
    });
    w.once('error', (err) => {
      if (!settled) reject(err);
      settled = true;
    });
    w.once('exit', (code) => {
      if (!settled) reject(new Error(`SQLite backup of ${file}: worker exited with code ${code}`));
      settled = true;
    });
  });
}

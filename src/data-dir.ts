/**
 * The data directory (`SVC_DATA_DIR`) as a whole: who may read it and who may use it.
 *
 * - {@link prepareDataDir}: everything under it is private to svc's user — files 0600,
 *   directories 0700 — because the queue's SQLite WAL holds forwarded `Authorization` headers and
 *   `credentials.json` every token. The process umask becomes 0o077, so files created later by
 *   native code (SQLite `-wal`/`-shm`, hnswlib snapshots) and by the supervised redis-server get
 *   the same modes; what an older version left readable is tightened at start-up.
 * - {@link lockDataDir}: one svc process per data directory. A second `svc serve` on the same
 *   directory would release the first one's leases and claim its messages; the lock file
 *   `svc.lock` (the holder's pid) is taken before anything in the directory is read, and a live
 *   holder makes start-up fail with {@link DataDirLockedError}.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Mode of every file under the data directory. */
export const DATA_FILE_MODE = 0o600;
/** Mode of the data directory and every directory under it. */
export const DATA_DIR_MODE = 0o700;
/** Name of the lock file inside the data directory. */
export const LOCK_FILE = 'svc.lock';

/**
 * Creates `dir` (0700) when absent, sets the process umask to 0o077 and tightens every entry
 * under `dir` to 0600 (files) / 0700 (directories); symbolic links are not followed.
 * Does not throw for entries it cannot change (another owner): returns their paths with the error.
 * @throws Error when `dir` cannot be created.
 */
export function prepareDataDir(dir: string): { path: string; error: string }[] {
  try {
    process.umask(0o077);
  } catch {
    /* worker threads cannot change the umask; explicit chmods below still apply */
  }
  fs.mkdirSync(dir, { recursive: true, mode: DATA_DIR_MODE });
  const failed: { path: string; error: string }[] = [];
  const stack = [dir];
  while (stack.length) {
    const d = stack.pop()!;
    chmodIfLooser(d, DATA_DIR_MODE, failed);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch (err) {
      failed.push({ path: d, error: (err as Error).message });
      continue;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) stack.push(p);
      else if (e.isFile()) chmodIfLooser(p, DATA_FILE_MODE, failed);
      // sockets, FIFOs and symbolic links are left alone
    }
  }
  return failed;
}

function chmodIfLooser(p: string, mode: number, failed: { path: string; error: string }[]): void {
  try {
    if ((fs.lstatSync(p).mode & 0o777) !== mode) fs.chmodSync(p, mode);
  } catch (err) {
    failed.push({ path: p, error: (err as Error).message });
  }
}

/** Start-up refused: another live process holds the data directory's lock. */
export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(`data directory ${dir} is in use by another svc process (pid ${pid}, lock file ${path.join(dir, LOCK_FILE)}); stop it or choose another SVC_DATA_DIR`);
    this.name = 'DataDirLockedError';
  }
}

/** True when a process with `pid` exists (EPERM: it exists but belongs to another user). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readPid(file: string): number | undefined {
  try {
    const n = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Takes the data directory's lock for this process: creates `<dir>/svc.lock` holding the pid
 * (atomically: written to a temporary file, then hard-linked to the lock name, which fails when
 * it exists). A lock left by a process that no longer runs (or by this pid, e.g. a container
 * restarted as pid 1) is taken over. `release()` removes the file when it still names this
 * process; it also runs on process exit.
 * @throws DataDirLockedError when a live process holds the lock.
 */
export function lockDataDir(dir: string): { file: string; release(): void } {
  fs.mkdirSync(dir, { recursive: true, mode: DATA_DIR_MODE });
  const file = path.join(dir, LOCK_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${process.pid}\n`, { mode: DATA_FILE_MODE });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        fs.linkSync(tmp, file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 5) throw err;
      }
      const holder = readPid(file);
      if (holder !== undefined && holder !== process.pid && alive(holder)) throw new DataDirLockedError(dir, holder);
      // stale: remove it unless another process replaced it meanwhile, then try again
      if (readPid(file) === holder) fs.rmSync(file, { force: true });
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.off('exit', release);
    if (readPid(file) === process.pid) fs.rmSync(file, { force: true });
  };
  process.on('exit', release);
  return { file, release };
}

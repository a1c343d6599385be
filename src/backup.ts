/**
 * Backups of svc's embedded stores, their restore, and the schema-version rules of upgrades.
 *
 * A backup is a directory laid out like a data directory (`SVC_DATA_DIR`) plus `manifest.json`:
 *
 *   credentials.json                               the credential store, as on disk
 *   queue.sqlite                                   the queue's SQLite database (online backup API)
 *   vector/<index>.sqlite                          each vector index's records (online backup API)
 *   kv/appendonlydir/appendonly.aof.1.base.rdb     the supervised Redis's BGSAVE, as an AOF base
 *   kv/appendonlydir/appendonly.aof.manifest       Redis's AOF manifest naming that base
 *   manifest.json                                  what each file holds, its SHA-256, the schemas
 *
 * Each area writes its own files through {@link BackupTarget} (`AreaServer.backup`, `src/area.ts`);
 * {@link BackupRunner} (wired by `src/main.ts`, reached by mgmt's `POST /v2/backup` and the
 * scheduler) adds `credentials.json` and the manifest. A backup is written under a temporary name
 * (`.<name>.partial-<pid>-<random>` beside the target), every file and directory fsynced, the
 * manifest written last, then renamed to its name: a directory with that name is complete, one
 * with a `.partial-` name never is (a process killed mid-backup leaves only the latter; the next
 * backup into the same parent removes it). One backup at a time per process
 * ({@link BackupInProgressError}).
 *
 * Point in time: each area's copy is taken at a moment between the manifest's `startedAt` and the
 * store's `takenAt`; every write acknowledged before `startedAt` is in it. The areas are not frozen
 * together: a write acknowledged during the backup may be in one store's copy and not another's.
 *
 * {@link restoreBackup} checks the manifest and every SHA-256 and refuses a schema newer than this
 * build supports; it writes a data directory `svc serve` starts from.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { alive } from './data-dir.js';
import type { Metrics } from './metrics.js';

/** Name of the manifest inside a backup directory. */
export const MANIFEST_FILE = 'manifest.json';
/** Version of the backup layout and manifest written by this build. */
export const BACKUP_FORMAT = 1;
/** Marker in the name of a backup still being written (never a complete backup). */
export const PARTIAL_MARKER = '.partial-';

/** svc's version (package.json). */
export const SVC_VERSION: string = (() => {
  try {
    const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'package.json');
    return String((JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version?: unknown }).version ?? 'unknown');
  } catch {
    return 'unknown';
  }
})();

/** One file of a backup, as listed in its manifest. */
export interface BackupFile {
  /** Path relative to the backup (and to the restored data directory), `/`-separated. */
  path: string;
  /** The area whose store it is (`credentials` for the credential store). */
  area: string;
  /** The store's name in {@link Manifest.schemas} (e.g. `queue`, `vector`, `kv`, `credentials`). */
  store: string;
  /** What the file holds, in words. */
  holds: string;
  /** Schema version of the store the file was copied from (absent: the file has none of svc's). */
  schemaVersion?: number;
  /** When the copy's point in time was reached (ISO 8601); every write acknowledged before {@link Manifest.startedAt} is in it. */
  takenAt: string;
  bytes: number;
  sha256: string;
}

/** A store a backup does not copy, and what copies it. */
export interface BackupSkip {
  area: string;
  store: string;
  note: string;
}

export interface Manifest {
  format: number;
  svcVersion: string;
  /** ISO 8601: the backup began; every write acknowledged before it is in the backup. */
  startedAt: string;
  /** ISO 8601: the last store's copy was taken. */
  finishedAt: string;
  /** The data directory the backup was taken from. */
  dataDir: string;
  /** Why the backup was taken: `request` (API/CLI), `schedule`, `pre-upgrade`. */
  reason: string;
  /** Schema version per store, as written by the svc that took the backup. */
  schemas: Record<string, number>;
  files: BackupFile[];
  skipped: BackupSkip[];
}

/** Where an area writes its part of a backup (see the module comment). */
export class BackupTarget {
  readonly files: Omit<BackupFile, 'bytes' | 'sha256'>[] = [];
  readonly skipped: BackupSkip[] = [];
  readonly schemas: Record<string, number> = {};

  /** `dir`: the temporary directory being written. */
  constructor(readonly dir: string) {}

  /** Absolute path for `rel` (`/`-separated) inside the backup; its parent directories are created. */
  path(rel: string): string {
    const p = path.join(this.dir, ...rel.split('/'));
    if (!p.startsWith(this.dir + path.sep)) throw new Error(`backup: path outside the backup: ${rel}`);
    fs.mkdirSync(path.dirname(p), { recursive: true, mode: 0o700 });
    return p;
  }

  /** Lists a file written at {@link path}`(entry.path)`; sums and sizes are computed at the end. */
  add(entry: Omit<BackupFile, 'bytes' | 'sha256' | 'takenAt'> & { takenAt?: string }): void {
    this.files.push({ ...entry, takenAt: entry.takenAt ?? new Date().toISOString() });
    if (entry.schemaVersion !== undefined) this.schemas[entry.store] = entry.schemaVersion;
  }

  /** Records that a store is not copied and which tools copy it. */
  skip(area: string, store: string, note: string): void {
    this.skipped.push({ area, store, note });
  }
}

/** A second backup while one runs (mgmt answers 409). */
export class BackupInProgressError extends Error {
  constructor() {
    super('a backup is already running in this svc process; retry when it has finished');
    this.name = 'BackupInProgressError';
  }
}

/** A target that cannot be written (relative path, exists already). */
export class BackupTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupTargetError';
  }
}

/** A restore refused (bad manifest, sum mismatch, newer schema, non-empty target). */
export class RestoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RestoreError';
  }
}

/** A data directory written by a newer svc: start-up refused before anything is changed. */
export class SchemaTooNewError extends Error {
  constructor(readonly found: StoredSchema[]) {
    super(
      `the data directory was written by a newer svc: ${found.map((s) => `${s.file} has ${s.store} schema version ${s.version}, this svc (${SVC_VERSION}) supports up to ${s.supported}`).join('; ')}; ` +
        'upgrade svc (or restore a backup taken by this version); nothing was changed',
    );
    this.name = 'SchemaTooNewError';
  }
}

/** The schema version a store file records, and the newest this build supports. */
export interface StoredSchema {
  store: string;
  file: string;
  version: number;
  supported: number;
}

/**
 * `PRAGMA user_version` of a SQLite database read from its file header (bytes 60-63, big-endian)
 * without opening it, so nothing (not even a `-shm` file) is created. A version set by a
 * transaction still in the `-wal` file is not seen here (the store's own check at open sees it).
 * Undefined when the file does not exist or is shorter than a header.
 */
export function sqliteUserVersion(file: string): number | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const b = Buffer.alloc(100);
    if (fs.readSync(fd, b, 0, 100, 0) < 100 || b.toString('latin1', 0, 15) !== 'SQLite format 3') return undefined;
    return b.readUInt32BE(60);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Test-only crash point: when the environment variable `BACKUP_TEST_CRASH_POINT` (deliberately not
 * an `SVC_*` setting) equals `name`, the process kills itself with SIGKILL there, so a test can
 * check what a backup killed at that step leaves behind. Names: `after-<area>` (that area's files
 * are written), `before-manifest` (every file summed and synced, no manifest yet).
 */
function crashPoint(name: string): void {
  if (process.env.BACKUP_TEST_CRASH_POINT === name) process.kill(process.pid, 'SIGKILL');
}

/** SHA-256 (hex) and size of a file, read as a stream (the event loop stays free). */
export async function fileSum(file: string): Promise<{ sha256: string; bytes: number }> {
  const h = createHash('sha256');
  let bytes = 0;
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    h.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: h.digest('hex'), bytes };
}

async function fsyncPath(p: string): Promise<void> {
  const fh = await fsp.open(p, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** fsyncs every file and directory under `dir` (directories after their entries), then `dir`. */
async function fsyncTree(dir: string): Promise<void> {
  for (const e of await fsp.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await fsyncTree(p);
    else if (e.isFile()) await fsyncPath(p);
  }
  await fsyncPath(dir);
}

/**
 * Writes a backup to `finalDir` (absolute; must not exist): `produce` fills a {@link BackupTarget}
 * in a temporary directory beside it; then sums, fsyncs, the manifest and the rename.
 * Partial backups left in the parent by a killed process (any name) are removed first.
 * @throws BackupTargetError for a relative or existing `finalDir`; what `produce` throws (the
 *   temporary directory is removed)
 */
export async function writeBackup(
  finalDir: string,
  opts: { dataDir: string; reason: string },
  produce: (target: BackupTarget) => Promise<void>,
): Promise<Manifest> {
  checkTarget(finalDir);
  const parent = path.dirname(finalDir);
  const base = path.basename(finalDir);
  fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  await removeStalePartials(parent);
  const tmp = path.join(parent, `.${base}${PARTIAL_MARKER}${process.pid}-${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(tmp, { mode: 0o700 });
  const startedAt = new Date().toISOString();
  try {
    const target = new BackupTarget(tmp);
    await produce(target);
    const files: BackupFile[] = [];
    for (const f of target.files) files.push({ ...f, ...(await fileSum(target.path(f.path))) });
    const manifest: Manifest = {
      format: BACKUP_FORMAT,
      svcVersion: SVC_VERSION,
      startedAt,
      finishedAt: new Date().toISOString(),
      dataDir: opts.dataDir,
      reason: opts.reason,
      schemas: target.schemas,
      files,
      skipped: target.skipped,
    };
    await fsyncTree(tmp);
    crashPoint('before-manifest');
    // the manifest last: a directory holding one has every file it lists, synced
    const mf = path.join(tmp, MANIFEST_FILE);
    await fsp.writeFile(mf, JSON.stringify(manifest, null, 2) + '\n', { mode: 0o600 });
    await fsyncPath(mf);
    await fsyncPath(tmp);
    await fsp.rename(tmp, finalDir);
    await fsyncPath(parent);
    return manifest;
  } catch (err) {
    await fsp.rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
}

/** @throws BackupTargetError when `dir` is relative or exists already */
function checkTarget(dir: string): void {
  if (!path.isAbsolute(dir)) throw new BackupTargetError(`backup directory must be an absolute path: ${JSON.stringify(dir)}`);
  if (fs.existsSync(dir)) throw new BackupTargetError(`backup directory exists already: ${dir}`);
}

/** Removes the `.<name>.partial-<pid>-<random>` directories in `parent` whose process is gone. */
async function removeStalePartials(parent: string): Promise<void> {
  let names: string[];
  try {
    names = await fsp.readdir(parent);
  } catch {
    return;
  }
  for (const n of names) {
    const m = /^\..+\.partial-(\d+)-[0-9a-f]+$/.exec(n);
    if (!m || (Number(m[1]) !== process.pid && alive(Number(m[1])))) continue;
    await fsp.rm(path.join(parent, n), { recursive: true, force: true });
  }
}

/** The outcome of the last backup of a {@link BackupRunner}. */
export interface BackupOutcome {
  ok: boolean;
  dir: string;
  /** Unix ms. */
  finishedAt: number;
  durationMs: number;
  bytes: number;
  error?: string;
}

/**
 * Runs backups of a running svc one at a time: `credentials.json` plus every area's
 * `backup(target)` (`AreaServer.backup`), in start order. `areas` is read at each run.
 */
export class BackupRunner {
  private running: Promise<Manifest> | undefined;
  /** The last backup's outcome (metrics, `GET /v2/backup`). */
  last: BackupOutcome | undefined;
  /** Called after each backup (metrics). */
  onDone: ((o: BackupOutcome) => void) | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly credentialsFile: string,
    private readonly areas: () => { name: string; backup?: (t: BackupTarget) => Promise<void> }[],
  ) {}

  /** True while a backup runs. */
  get busy(): boolean {
    return this.running !== undefined;
  }

  /**
   * Writes a backup to `dir` (absolute, not existing).
   * @throws BackupInProgressError while another runs; BackupTargetError; an area's failure
   */
  run(dir: string, reason = 'request'): Promise<Manifest> {
    if (this.running) return Promise.reject(new BackupInProgressError());
    try {
      checkTarget(dir); // a refused target is the caller's fault, not a failed backup (metrics)
    } catch (err) {
      return Promise.reject(err);
    }
    const t0 = Date.now();
    const p = writeBackup(dir, { dataDir: this.dataDir, reason }, async (target) => {
      if (fs.existsSync(this.credentialsFile)) {
        await fsp.copyFile(this.credentialsFile, target.path('credentials.json'));
        target.add({
          path: 'credentials.json',
          area: 'credentials',
          store: 'credentials',
          holds: 'every token, signing key and password of the areas and the management account (JSON, mode 0600)',
          schemaVersion: CREDENTIALS_SCHEMA_VERSION,
        });
      } else target.skip('credentials', 'credentials', 'no credentials.json: every credential is given by environment variables');
      for (const a of this.areas()) {
        await a.backup?.(target);
        crashPoint(`after-${a.name}`);
      }
    });
    this.running = p;
    const settle = (o: Omit<BackupOutcome, 'finishedAt' | 'durationMs' | 'dir'>) => {
      this.running = undefined;
      this.last = { ...o, dir, finishedAt: Date.now(), durationMs: Date.now() - t0 };
      this.onDone?.(this.last);
    };
    p.then(
      (m) => settle({ ok: true, bytes: m.files.reduce((s, f) => s + f.bytes, 0) }),
      (err: Error) => settle({ ok: false, bytes: 0, error: err.message }),
    );
    return p;
  }
}

/**
 * Version of `credentials.json`'s shape (a JSON object of credential names to strings). The file
 * itself carries no number: version 1 is the only shape so far; a later shape records its own.
 */
export const CREDENTIALS_SCHEMA_VERSION = 1;

/** `YYYYMMDDTHHMMSSmmmZ` (UTC, to the millisecond): the time in backup names, sortable. */
export function backupStamp(now: Date): string {
  return now.toISOString().replace(/[-:.]/g, '');
}

/** `svc-backup-<stamp>` ({@link backupStamp}): names of scheduled backups and of API backups without a `dir`. */
export function scheduledName(now: Date): string {
  return `svc-backup-${backupStamp(now)}`;
}

/**
 * Scheduled backups: every `intervalMs` a backup into `<dir>/svc-backup-<time>`; after a
 * successful one, complete scheduled backups beyond the newest `keep` are removed. Logs failures.
 * Returns the function that stops it.
 */
export function scheduleBackups(
  runner: BackupRunner,
  opts: { dir: string; intervalMs: number; keep: number; log: (level: 'info' | 'error', obj: object, msg: string) => void },
): () => void {
  const tick = async () => {
    if (runner.busy) return;
    const target = path.join(opts.dir, scheduledName(new Date()));
    try {
      const m = await runner.run(target, 'schedule');
      opts.log('info', { dir: target, files: m.files.length }, 'scheduled backup written');
      pruneBackups(opts.dir, opts.keep);
    } catch (err) {
      opts.log('error', { dir: target, err: (err as Error).message }, 'scheduled backup failed');
    }
  };
  const timer = setInterval(() => void tick(), opts.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Removes complete `svc-backup-*` directories of `dir` beyond the newest `keep`; returns the removed names. */
export function pruneBackups(dir: string, keep: number): string[] {
  const names = fs
    .readdirSync(dir)
    .filter((n) => /^svc-backup-\d{8}T\d{9}Z$/.test(n) && fs.existsSync(path.join(dir, n, MANIFEST_FILE)))
    .sort();
  const gone = names.slice(0, Math.max(0, names.length - keep));
  for (const n of gone) fs.rmSync(path.join(dir, n), { recursive: true, force: true });
  return gone;
}

/** Name prefix of the backups taken before a schema upgrade (`pre-upgrade-<stamp>`). */
export const PRE_UPGRADE_PREFIX = 'pre-upgrade-';

/**
 * Bounds the pre-upgrade backups of `dir` after `latest` (one of them, by name) was written: of
 * the complete `pre-upgrade-*` backups that copied the same files at the same schema versions as
 * `latest` (repeated attempts of one upgrade step: a migration that fails or is killed on every
 * start, or a store whose area is disabled and so is never migrated), the first one (the files as
 * they were before the first attempt) and `latest` (the newest state, with anything written in
 * between, e.g. by the previous svc during a roll-back) are kept, the ones between them removed.
 * Backups of other files or versions, other backups and partial directories are left alone, so
 * each upgrade step keeps at most two copies however often start-up is retried.
 * Returns the removed names; a backup whose manifest cannot be read is kept.
 */
export function prunePreUpgradeBackups(dir: string, latest: string): string[] {
  const key = (name: string): string | undefined => {
    try {
      const m = JSON.parse(fs.readFileSync(path.join(dir, name, MANIFEST_FILE), 'utf8')) as Manifest;
      if (m.reason !== 'pre-upgrade' || !Array.isArray(m.files)) return undefined;
      return JSON.stringify(m.files.map((f) => [f.path, f.schemaVersion ?? null]).sort());
    } catch {
      return undefined;
    }
  };
  const want = key(latest);
  if (want === undefined) return [];
  const same = fs
    .readdirSync(dir)
    .filter((n) => n.startsWith(PRE_UPGRADE_PREFIX) && n !== latest && key(n) === want)
    .sort();
  const gone = same.slice(1).filter((n) => n < latest);
  for (const n of gone) fs.rmSync(path.join(dir, n), { recursive: true, force: true });
  return gone;
}

/**
 * Reads and checks a backup: the manifest's shape and format, every listed file's size and
 * SHA-256, and each store's schema version against `supported` (store name -> newest version
 * this build reads).
 * @throws RestoreError naming the first problem
 */
export async function verifyBackup(backupDir: string, supported: Record<string, number>): Promise<Manifest> {
  const mf = path.join(backupDir, MANIFEST_FILE);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(mf, 'utf8')) as Manifest;
  } catch (err) {
    throw new RestoreError(`${mf}: not a complete svc backup (${(err as Error).message})`);
  }
  if (!manifest || typeof manifest !== 'object' || !Array.isArray(manifest.files) || typeof manifest.format !== 'number') {
    throw new RestoreError(`${mf}: not an svc backup manifest`);
  }
  if (manifest.format > BACKUP_FORMAT) {
    throw new RestoreError(`${mf}: backup format ${manifest.format} was written by a newer svc (${manifest.svcVersion}); this svc (${SVC_VERSION}) reads format ${BACKUP_FORMAT}`);
  }
  for (const [store, version] of Object.entries(manifest.schemas ?? {})) {
    const max = supported[store];
    if (max !== undefined && version > max) {
      throw new RestoreError(`the backup's ${store} schema version ${version} is newer than this svc (${SVC_VERSION}) supports (${max}); restore it with svc ${manifest.svcVersion} or newer`);
    }
  }
  for (const f of manifest.files) {
    if (typeof f.path !== 'string' || f.path.split('/').some((s) => s === '..' || s === '') || path.isAbsolute(f.path)) {
      throw new RestoreError(`${mf}: bad file path ${JSON.stringify(f.path)}`);
    }
    const p = path.join(backupDir, ...f.path.split('/'));
    let sum;
    try {
      sum = await fileSum(p);
    } catch (err) {
      throw new RestoreError(`${f.path}: listed in the manifest but cannot be read (${(err as Error).message})`);
    }
    if (sum.bytes !== f.bytes || sum.sha256 !== f.sha256) {
      throw new RestoreError(`${f.path}: SHA-256 mismatch (manifest ${f.sha256}, ${f.bytes} bytes; file ${sum.sha256}, ${sum.bytes} bytes): the backup is damaged or was changed`);
    }
  }
  return manifest;
}

/**
 * Restores a backup into `dataDir`, which must not exist or be empty: verifies it
 * ({@link verifyBackup}), copies every listed file into a temporary directory beside `dataDir`
 * (modes 0600/0700), fsyncs it and renames it to `dataDir`.
 * @throws RestoreError (nothing written) for a damaged or too new backup or a non-empty target
 */
export async function restoreBackup(backupDir: string, dataDir: string, supported: Record<string, number>): Promise<Manifest> {
  const target = path.resolve(dataDir);
  let existing: string[] | undefined;
  try {
    existing = fs.readdirSync(target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new RestoreError(`${target}: ${(err as Error).message}`);
  }
  if (existing && existing.length > 0) throw new RestoreError(`${target} is not empty (${existing.length} entries): restore into a new or empty directory`);
  const manifest = await verifyBackup(path.resolve(backupDir), supported);
  const parent = path.dirname(target);
  fs.mkdirSync(parent, { recursive: true });
  const tmp = path.join(parent, `.${path.basename(target)}.restoring-${process.pid}-${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(tmp, { mode: 0o700 });
  try {
    for (const f of manifest.files) {
      const to = path.join(tmp, ...f.path.split('/'));
      fs.mkdirSync(path.dirname(to), { recursive: true, mode: 0o700 });
      await fsp.copyFile(path.join(backupDir, ...f.path.split('/')), to);
      await fsp.chmod(to, 0o600);
      const sum = await fileSum(to);
      if (sum.sha256 !== f.sha256) throw new RestoreError(`${f.path}: changed while it was copied`);
    }
    await fsyncTree(tmp);
    if (existing) fs.rmdirSync(target);
    await fsp.rename(tmp, target);
    await fsyncPath(parent);
  } catch (err) {
    await fsp.rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
  return manifest;
}

/**
 * The backup families on `/metrics`: `svc_backup_last_success_timestamp_seconds`,
 * `svc_backup_last_finished_timestamp_seconds`, `svc_backup_last_ok` (1 ok, 0 failed),
 * `svc_backup_last_duration_seconds`, `svc_backup_last_bytes`, `svc_backup_in_progress`, and
 * `svc_backups_total{outcome="ok"|"failed"}`. Gauges are absent until the first backup ends.
 */
export function registerBackupMetrics(metrics: Metrics, runner: BackupRunner): void {
  let lastOk: BackupOutcome | undefined;
  const outcomes = metrics.counter('svc_backups_total', 'Backups finished by this process (API, CLI, schedule), by outcome', ['outcome']);
  const ok = outcomes.labels('ok');
  const failed = outcomes.labels('failed');
  const prev = runner.onDone;
  runner.onDone = (o) => {
    prev?.(o);
    (o.ok ? ok : failed).inc();
    if (o.ok) lastOk = o;
  };
  const last = (f: (o: BackupOutcome) => number) => () => (runner.last ? [[[], f(runner.last)] as const] : []);
  metrics.gauge('svc_backup_last_success_timestamp_seconds', 'Unix time the last successful backup finished').addReader(() => (lastOk ? [[[], lastOk.finishedAt / 1000]] : []));
  metrics.gauge('svc_backup_last_finished_timestamp_seconds', 'Unix time the last backup (successful or not) finished').addReader(last((o) => o.finishedAt / 1000));
  metrics.gauge('svc_backup_last_ok', 'Outcome of the last backup: 1 ok, 0 failed', [], 'min').addReader(last((o) => (o.ok ? 1 : 0)));
  metrics.gauge('svc_backup_last_duration_seconds', 'Duration of the last backup').addReader(last((o) => o.durationMs / 1000));
  metrics.gauge('svc_backup_last_bytes', 'Bytes written by the last successful backup').addReader(() => (lastOk ? [[[], lastOk.bytes]] : []));
  metrics.gauge('svc_backup_in_progress', '1 while a backup runs').addReader(() => [[[], runner.busy ? 1 : 0]]);
}

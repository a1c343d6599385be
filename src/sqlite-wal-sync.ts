/**
 * Asynchronous WAL fsync for a SQLite database in WAL mode that runs with `synchronous = NORMAL`:
 * COMMIT appends the transaction's frames to the `-wal` file without an fsync (so it does not
 * stall the event loop), and {@link WalSyncer.sync} then fdatasyncs that file on libuv's thread
 * pool. A write acknowledged only after such a sync is as durable as under `synchronous = FULL`,
 * which in WAL mode does exactly that at every commit ("the WAL file is synchronized after each
 * transaction commit", sqlite.org/pragma.html#pragma_synchronous); `NORMAL` still syncs the WAL
 * itself before every checkpoint. Without the sync a committed write survives a process crash
 * (kill -9: the frames are in the OS page cache) but not a power loss or an OS crash.
 *
 * Group commit: fdatasyncs of one file never overlap; calls to {@link WalSyncer.sync} made while
 * one runs wait for the next one, which then covers every commit made in between. The caller must
 * call `sync()` only after its COMMIT returned (the file must exist: SQLite creates the `-wal`
 * file when it opens a WAL-mode database and deletes it only when the last connection closes, so
 * the descriptor opened at the first sync stays valid for the connection's life).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const requireCjs = createRequire(import.meta.url);

export class WalSyncer {
  private fd: number | undefined;
  /** An fdatasync is in flight. */
  running = false;
  /** Called each time an fdatasync completes (after its waiters are settled). */
  onSynced: (() => void) | undefined;
  /** Told the duration of each fdatasync in seconds (metrics). */
  onDuration: ((seconds: number) => void) | undefined;
  private waiting: { resolve: () => void; reject: (e: unknown) => void }[] = [];

  /** `file`: the database's `-wal` file (opened read-only at the first {@link sync}). */
  constructor(private readonly file: string) {}

  /**
   * Resolves once an fdatasync of the file that started after this call has completed.
   * @throws (rejects) the file-system error of opening the file or of the fdatasync (`ENOSPC`,
   * `EIO`, ...); a failed sync means the commits it should have covered may not be on disk.
   */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.running || this.waiting.length === 0) return;
    const batch = this.waiting.splice(0);
    try {
      this.fd ??= fs.openSync(this.file, 'r');
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    this.running = true;
    const start = performance.now();
    fs.fdatasync(this.fd, (err) => {
      this.running = false;
      this.onDuration?.((performance.now() - start) / 1000);
      for (const w of batch) (err ? w.reject(err) : w.resolve());
      this.onSynced?.();
      this.kick();
    });
  }

  /** Waits for the running and the requested fdatasyncs, then closes the descriptor. Never rejects. */
  async close(): Promise<void> {
    while (this.running || this.waiting.length) await new Promise((r) => setTimeout(r, 1));
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
  }
}

/** The checkpoint worker (CommonJS, evaluated): one connection to the database, PASSIVE checkpoints on request. */
const CHECKPOINT_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
parentPort.on('message', (m) => {
  if (m === 'close') {
    db.close();
    process.exit(0);
  }
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true, busy: r.busy, log: r.log, checkpointed: r.checkpointed });
  } catch (err) {
    parentPort.postMessage({ ok: false, message: String(err && err.message), code: err && err.code });
  }
});
`;

/** What one checkpoint did (SQLite's `wal_checkpoint` columns): frames in the WAL, frames copied into the database. */
export interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

/**
 * PASSIVE WAL checkpoints on a worker thread with its own connection, so the event loop neither
 * copies WAL pages into the database nor waits for the two fsyncs of a checkpoint (SQLite's
 * automatic checkpoint runs inside the COMMIT that crosses `wal_autocheckpoint` pages, on the
 * caller's thread). PASSIVE "checkpoints as many frames as possible without waiting for any
 * database readers or writers" (sqlite.org/pragma.html#pragma_wal_checkpoint): writes on the main
 * connection go on meanwhile, and the next write after a complete checkpoint restarts the WAL from
 * its beginning, so the file stays bounded.
 *
 * The owner turns automatic checkpoints off on its connection (`PRAGMA wal_autocheckpoint = 0`)
 * and calls {@link committed} after each commit: a checkpoint starts `intervalMs` after the first
 * commit not yet covered, never two at once. The worker starts on the first checkpoint and stops
 * `idleMs` after a checkpoint when no commit came meanwhile (its memory, ~9 MB, is not kept for
 * an index nobody writes to). A failure — the worker
 * cannot start or dies, or a checkpoint throws — is told to `onError` once and stops the
 * checkpointer ({@link failed}): the owner turns automatic checkpoints back on.
 */
export class WalCheckpointer {
  private worker: Worker | undefined;
  private timer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private running = false;
  private dirty = false;
  private closed = false;
  private done: (() => void) | undefined;
  /** A failure stopped the checkpointer (see the class doc). */
  failed = false;
  /** Checkpoints completed. */
  count = 0;
  /** Told the result of each completed checkpoint. */
  onCheckpoint: ((r: CheckpointResult) => void) | undefined;

  /** `file`: the database file (not its `-wal`); times in ms. */
  constructor(
    private readonly file: string,
    private readonly opts: { intervalMs: number; idleMs: number; onError: (err: Error) => void },
  ) {}

  /** Notes a commit: a checkpoint will cover it (see the class doc). */
  committed(): void {
    if (this.failed || this.closed) return;
    this.dirty = true;
    // the worker is needed for the checkpoint to come: not stopped as idle meanwhile
    clearTimeout(this.idleTimer);
    if (this.running || this.timer) return;
    this.timer = setTimeout(this.run, this.opts.intervalMs).unref();
  }

  private readonly run = (): void => {
    this.timer = undefined;
    if (this.failed || this.closed) return;
    clearTimeout(this.idleTimer);
    this.dirty = false;
    this.running = true;
    try {
      this.worker ??= this.start();
    } catch (err) {
      return this.fail(err as Error);
    }
    // referenced while it works (a close waits for it), not while idle
    this.worker.ref();
    this.worker.postMessage('checkpoint');
  };

  private start(): Worker {
    const w = new Worker(CHECKPOINT_WORKER, { eval: true, workerData: { file: this.file, driver: requireCjs.resolve('better-sqlite3') } });
    w.on('message', (r: { ok: boolean; message?: string; code?: string } & CheckpointResult) => {
      this.running = false;
      w.unref();
      if (!r.ok) return this.fail(Object.assign(new Error(`WAL checkpoint failed: ${r.message}`), { code: r.code }));
      this.count++;
      this.onCheckpoint?.(r);
      this.done?.();
      if (this.dirty) this.committed();
      else {
        this.idleTimer = setTimeout(() => {
          if (this.worker === w && !this.running) this.stopWorker();
        }, this.opts.idleMs).unref();
      }
    });
    w.on('error', (err) => this.fail(err));
    w.on('exit', (code) => {
      if (this.worker === w && !this.closed) this.fail(new Error(`WAL checkpoint worker exited with code ${code}`));
    });
    w.unref();
    return w;
  }

  private fail(err: Error): void {
    if (this.failed) return;
    this.failed = true;
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.done?.();
    const w = this.worker;
    this.worker = undefined;
    void w?.terminate();
    this.opts.onError(err);
  }

  /** Stops the worker (its connection closed first); resolves when it has exited. */
  private stopWorker(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (!w) return Promise.resolve();
    return new Promise((resolve) => {
      w.once('exit', () => resolve());
      w.ref();
      w.postMessage('close');
    });
  }

  /** Waits for a running checkpoint, then stops the worker. Never rejects; later commits are ignored. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.idleTimer);
    this.timer = undefined;
    if (this.running) await new Promise<void>((r) => (this.done = r));
    await this.stopWorker();
  }

  /** Stops the worker at once, a running checkpoint with it (SQLite leaves the database consistent). */
  terminate(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.idleTimer);
    const w = this.worker;
    this.worker = undefined;
    void w?.terminate();
  }
}

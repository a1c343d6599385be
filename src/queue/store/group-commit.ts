/**
 * Group commit for a synchronous SQLite handle (WAL mode): writes submitted during one event-loop
 * turn run in ONE transaction; a failing write rolls back alone (the batch is re-run with a
 * savepoint per write when one throws).
 *
 * Durability without blocking the event loop: the connection runs with `synchronous = NORMAL`
 * (COMMIT appends the WAL frames without fsync), and for a batch holding any `durable` write the
 * WAL file is then fsynced asynchronously (`fs.fdatasync` on the libuv thread pool) before those
 * writes' promises resolve. That is exactly what `synchronous = FULL` does in WAL mode ("the WAL
 * file is synchronized after each transaction commit", sqlite.org/pragma.html#pragma_synchronous)
 * minus the stall: the main thread keeps serving requests while the disk flushes, and every
 * batch committed while one fsync runs is covered by the next (classic group commit; the fsync
 * itself is `src/sqlite-wal-sync.ts`, shared with the vector store). NORMAL itself still syncs
 * the WAL before checkpoints and its header on reuse.
 *
 * Two durability classes: `durable` writes (acknowledged publishes, DLQ moves, user actions)
 * resolve after the fsync; `relaxed` writes (delivery leases, ACTIVE/DELIVERED bookkeeping)
 * resolve after COMMIT: safe against a process crash (the WAL is in the OS page cache), and after
 * a power loss they can only fall back to "still pending", i.e. one more delivery (at-least-once).
 *
 * Batches are flushed on `setImmediate` (or, while an fsync runs, as soon as it completes), capped
 * at {@link MAX_BATCH} writes per transaction.
 *
 * {@link FsyncPolicy} `everysec` (opt-in, `SVC_QUEUE_FSYNC`) is Redis's `appendfsync everysec`:
 * durable writes too resolve at COMMIT (still safe against kill -9: the WAL is in the page cache),
 * and the WAL is fsynced once a second when something was committed, so a power loss or OS crash
 * can lose about the last second of acknowledged writes.
 */
import type Database from 'better-sqlite3';
import type { Config } from '../../config.js';
import { WalSyncer } from '../../sqlite-wal-sync.js';

const MAX_BATCH = 2000;
/**
 * Longest wait (ms) of a batch holding only relaxed writes for a durable write to share its
 * commit, applied only while durable writes are flowing: one was queued within this time, or an
 * fsync acknowledged some and nothing was committed since. Under load publishes arrive every turn,
 * so delivery bookkeeping rides along with them; without publishes (a paused queue being drained,
 * retries) relaxed writes commit at the next turn as before, so a chain of dependent bookkeeping
 * steps (outcome -> admission round -> claim) pays no timer per step.
 *
 * The acknowledgement counts as flowing because publishers that wait for their answer send the
 * next publish right after it: between an fsync's end and those publishes, delivery outcomes
 * arrive (the publish -> delivery hand-off does not wait for the fsync), and when the commit and
 * the fsync had taken more than this time they were committed alone (`npm run bench:queue`, 64
 * publishers, 40,000 messages, loaded machine: 1,427-1,594 of 3,119-3,483 commits held only
 * bookkeeping; 559-633 of 2,321-2,445 with the acknowledgement counted;
 * `docs/readme/queue-bench.md` "Seventh pass").
 */
const RELAXED_DELAY_MS = 2;

/**
 * When acknowledged (durable) writes reach the disk: `always` (default) — fsync of the WAL before
 * they resolve; `everysec` — they resolve at COMMIT and the WAL is fsynced every
 * {@link EVERYSEC_INTERVAL_MS}.
 */
export type FsyncPolicy = Config['queue']['fsync'];
const EVERYSEC_INTERVAL_MS = 1000;

interface Pending {
  fn: () => unknown;
  durable: boolean;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export class GroupCommitter {
  private queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private readonly syncer: WalSyncer;
  // Prepared once: better-sqlite3's db.transaction() wrapper costs ~0.3 ms to build per call.
  private readonly sql;

  /** Periodic WAL fsync of the `everysec` policy. */
  private readonly everysec: NodeJS.Timeout | undefined;
  /** Something was committed since the last periodic fsync (set only under `everysec`). */
  private unsynced = false;
  /** Durable writes resolve after the WAL fsync (`always`), else at COMMIT (`everysec`). */
  private readonly waitForSync: boolean;

  /** Told the duration of each WAL fdatasync in seconds (metrics). */
  set onFsync(observe: ((seconds: number) => void) | undefined) {
    this.syncer.onDuration = observe;
  }

  /** `walFile` is the database's `-wal` file (fsynced for durable writes, see {@link FsyncPolicy}). */
  constructor(
    private readonly db: Database.Database,
    walFile: string,
    fsync: FsyncPolicy = 'always',
  ) {
    this.waitForSync = fsync === 'always';
    this.syncer = new WalSyncer(walFile);
    if (fsync === 'everysec') {
      this.everysec = setInterval(() => {
        if (!this.unsynced || this.syncer.running) return;
        this.unsynced = false;
        this.syncer.sync().catch(() => {
          this.unsynced = true; // try again at the next tick
        });
      }, EVERYSEC_INTERVAL_MS);
      this.everysec.unref();
    }
    this.syncer.onSynced = () => {
      if (this.deferred) {
        this.deferred = false;
        this.flush();
      }
      // the durable writes this fsync covered are acknowledged now: publishers answered now
      // publish again within a turn or two, so relaxed writes wait for those (RELAXED_DELAY_MS)
      if (this.waitForSync) this.acknowledged = true;
    };
    db.pragma('synchronous = NORMAL');
    this.sql = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT op'),
      release: db.prepare('RELEASE op'),
      rollbackTo: db.prepare('ROLLBACK TO op'),
    };
  }

  /**
   * Runs `fn` inside the next group transaction; resolves with its result after COMMIT, and for
   * `durable` writes after the WAL fsync that covers it.
   */
  run<T>(fn: () => T, durable = true): Promise<T> {
    if (this.closed) return Promise.reject(new Error('queue store is closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, durable, resolve: resolve as (v: unknown) => void, reject });
      if (durable) this.lastDurableAt = performance.now();
      if (this.scheduled || this.deferred) return;
      if (durable || (!this.acknowledged && performance.now() - this.lastDurableAt > RELAXED_DELAY_MS)) {
        // a durable write, or none lately (a relaxed write would wait for nothing): next turn
        if (this.relaxedTimer) clearTimeout(this.relaxedTimer);
        this.relaxedTimer = undefined;
        this.scheduled = true;
        setImmediate(this.flushSoon);
      } else {
        this.relaxedTimer ??= setTimeout(this.flushRelaxed, RELAXED_DELAY_MS);
      }
    });
  }

  /** When the last durable write was queued (`performance.now()` ms). */
  private lastDurableAt = -Infinity;
  /**
   * An fsync acknowledged durable writes and nothing was committed since: durable writes count as
   * flowing (a relaxed write waits up to {@link RELAXED_DELAY_MS} for the next one) however long
   * the commit and the fsync took. A flag rather than a time, so that a process descheduled for a
   * while right after the acknowledgement does not commit the bookkeeping alone.
   */
  private acknowledged = false;
  /** Pending timer of a relaxed-only batch ({@link RELAXED_DELAY_MS}). */
  private relaxedTimer: NodeJS.Timeout | undefined;
  private readonly flushRelaxed = (): void => {
    this.relaxedTimer = undefined;
    if (this.scheduled || this.deferred) return;
    this.flushSoon();
  };

  /** Writes are waiting for the running fsync to finish (see {@link flushSoon}). */
  private deferred = false;

  /**
   * The scheduled flush. While an fsync is running, the batch waits for it to finish and is then
   * committed at once: durable writes committed now could not be acknowledged before the fsync
   * after that one anyway, and relaxed ones (delivery bookkeeping) lose at most one fsync's time.
   * This merges the transactions of every event-loop turn during an fsync into one (each COMMIT
   * costs WAL writes of every page it dirtied: in the bench about 40% of commits ran during an
   * fsync, and a third of them held only delivery bookkeeping).
   */
  private readonly flushSoon = (): void => {
    this.scheduled = false;
    if (this.relaxedTimer) clearTimeout(this.relaxedTimer);
    this.relaxedTimer = undefined;
    if (this.syncer.running && this.waitForSync) {
      this.deferred = true;
      return;
    }
    this.flush();
  };

  /** Runs and commits everything queued now (also used by close). */
  flush(): void {
    this.acknowledged = false;
    while (this.queue.length) {
      const batch = this.queue.splice(0, MAX_BATCH);
      const results = this.runBatch(batch);
      if (!results) {
        for (const p of batch) p.reject(this.lastError);
        continue;
      }
      const settle = (p: Pending, i: number) => (results[i].ok ? p.resolve(results[i].v) : p.reject(results[i].v));
      const durable: number[] = [];
      if (!this.waitForSync) this.unsynced = true;
      batch.forEach((p, i) => (this.waitForSync && p.durable && results[i].ok ? durable.push(i) : settle(p, i)));
      if (durable.length) {
        this.syncer.sync().then(
          () => durable.forEach((i) => settle(batch[i], i)),
          (err) => durable.forEach((i) => batch[i].reject(err)),
        );
      }
    }
  }

  private lastError: unknown;

  /**
   * One transaction for the batch. Optimistic: ops run back to back without savepoints; when one
   * throws, the transaction is rolled back and the batch re-run with a savepoint per op so only the
   * failing op is lost. Returns undefined when the transaction itself failed (`lastError`).
   */
  private runBatch(batch: Pending[]): { ok: boolean; v: unknown }[] | undefined {
    for (const isolated of [false, true]) {
      const results: { ok: boolean; v: unknown }[] = [];
      let retry = false;
      try {
        this.sql.begin.run();
        for (const p of batch) {
          if (!isolated) {
            try {
              results.push({ ok: true, v: p.fn() });
            } catch {
              retry = true;
              break;
            }
            continue;
          }
          this.sql.savepoint.run();
          try {
            results.push({ ok: true, v: p.fn() });
            this.sql.release.run();
          } catch (err) {
            // SQLite rolls the whole transaction back by itself on some errors (SQLITE_FULL,
            // I/O errors): then every op of the batch is lost and the batch fails with `err`
            if (!this.db.inTransaction) throw err;
            this.sql.rollbackTo.run();
            this.sql.release.run();
            results.push({ ok: false, v: err });
          }
        }
        if (retry) {
          if (this.db.inTransaction) this.sql.rollback.run();
          continue;
        }
        this.sql.commit.run();
        return results;
      } catch (err) {
        if (this.db.inTransaction) {
          try {
            this.sql.rollback.run();
          } catch {
            /* the original error is the one to report */
          }
        }
        this.lastError = err;
        return undefined;
      }
    }
    return undefined;
  }

  /** Flushes, waits for the last fsync and refuses further writes. */
  async close(): Promise<void> {
    if (this.relaxedTimer) clearTimeout(this.relaxedTimer);
    this.relaxedTimer = undefined;
    if (this.everysec) clearInterval(this.everysec);
    this.flush();
    this.closed = true;
    if (this.unsynced) await this.syncer.sync().catch(() => undefined);
    await this.syncer.close();
  }
}

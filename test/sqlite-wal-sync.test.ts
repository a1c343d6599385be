/**
 * The shared WAL helpers (`src/sqlite-wal-sync.ts`) on real files.
 * - fsync: a sync resolves after an fdatasync of the file; calls made while one runs share the
 *   next fdatasync (never the running one, which may have started before their commit); errors of
 *   opening the file or of the fdatasync reject; close waits for the fdatasyncs asked for.
 * - checkpoints on a worker thread: with SQLite's automatic checkpoint off, a commit leads to one
 *   PASSIVE checkpoint that copies every frame into the database (the next write restarts the WAL
 *   from its beginning); a database that cannot be opened reports the failure once.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { WalCheckpointer, WalSyncer, type CheckpointResult } from '../src/sqlite-wal-sync.js';
import { waitFor } from './helpers/wait.js';
import { tempDir } from './helpers/env.js';

test('syncs a WAL file; calls made during a running fdatasync share the next one', async () => {
  const tmp = tempDir('svc-wal-sync-');
  const file = path.join(tmp.dir, 'db.sqlite');
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec('CREATE TABLE t (x)');
    const syncer = new WalSyncer(`${file}-wal`);
    const started: number[] = [];
    let completed = 0;
    syncer.onDuration = (s) => {
      assert.ok(s >= 0);
      completed++;
    };
    const first = syncer.sync();
    assert.equal(syncer.running, true, 'the first call starts an fdatasync at once');
    // committed while the first fdatasync runs: must wait for one that starts after this commit
    db.prepare('INSERT INTO t VALUES (1)').run();
    const later = Array.from({ length: 10 }, () => syncer.sync().then(() => started.push(completed)));
    await first;
    assert.equal(completed, 1);
    assert.deepEqual(started, [], 'not settled by the fdatasync that was already running');
    await Promise.all(later);
    assert.deepEqual(started, Array(10).fill(2), 'the ten calls made meanwhile share one more fdatasync');
    await syncer.close();
    assert.equal(syncer.running, false);
  } finally {
    db.close();
    tmp.cleanup();
  }
});

test('a file that cannot be opened or synced rejects the waiting calls; close still resolves', async () => {
  const tmp = tempDir('svc-wal-sync-');
  try {
    const missing = new WalSyncer(path.join(tmp.dir, 'absent-wal'));
    await assert.rejects(missing.sync(), { code: 'ENOENT' });
    await missing.close();
    // a character device without fsync support: fdatasync fails with EINVAL
    const unsyncable = new WalSyncer('/dev/null');
    await assert.rejects(Promise.all([unsyncable.sync(), unsyncable.sync()]), { code: 'EINVAL' });
    await unsyncable.close();
  } finally {
    tmp.cleanup();
  }
});

test('checkpoints run on a worker thread after commits and keep the WAL from growing', { timeout: 60_000 }, async () => {
  const tmp = tempDir('svc-wal-checkpoint-');
  const file = path.join(tmp.dir, 'db.sqlite');
  const db = new Database(file);
  const errors: Error[] = [];
  const cp = new WalCheckpointer(file, { intervalMs: 10, idleMs: 50, onError: (e) => errors.push(e) });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t (x BLOB)');
    const results: CheckpointResult[] = [];
    cp.onCheckpoint = (r) => results.push(r);
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    const blob = Buffer.alloc(4000, 7);
    const walPages = () => fs.statSync(`${file}-wal`).size / 4096;
    for (let round = 0; round < 3; round++) {
      db.transaction(() => {
        for (let i = 0; i < 500; i++) insert.run(blob);
      })();
      cp.committed();
      await waitFor('a checkpoint', () => results.length > round);
      const r = results[round];
      assert.equal(r.busy, 0);
      assert.ok(r.log >= 500, `the WAL held the commit (${r.log} frames)`);
      assert.equal(r.checkpointed, r.log, 'every frame copied into the database');
    }
    // the WAL was restarted from its beginning after each complete checkpoint: not 3 commits long
    assert.ok(walPages() < 2 * results[0].log, `WAL of ${walPages()} pages after 3 commits of ~${results[0].log}`);
    assert.equal(cp.count, 3);
    // past idleMs the worker has stopped; the next commit starts a new one
    await new Promise((r) => setTimeout(r, 200));
    insert.run(blob);
    cp.committed();
    await waitFor('a checkpoint by a new worker', () => cp.count === 4);
    assert.deepEqual(errors, []);
    assert.equal((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 1501);
  } finally {
    await cp.close();
    db.close();
    tmp.cleanup();
  }
});

test('a checkpoint worker that cannot open the database reports it once and stops', { timeout: 60_000 }, async () => {
  const tmp = tempDir('svc-wal-checkpoint-');
  try {
    const errors: Error[] = [];
    const cp = new WalCheckpointer(path.join(tmp.dir, 'absent.sqlite'), { intervalMs: 1, idleMs: 50, onError: (e) => errors.push(e) });
    cp.committed();
    await waitFor('the failure', () => errors.length > 0);
    assert.equal(cp.failed, true);
    cp.committed(); // ignored once failed
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(errors.length, 1);
    assert.equal(cp.count, 0);
    await cp.close();
  } finally {
    tmp.cleanup();
  }
});

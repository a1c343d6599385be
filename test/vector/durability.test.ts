/**
 * When a vector write is durable (no timing thresholds: orders and states only).
 *
 * - COMMIT runs with `synchronous = NORMAL` (no fsync on the event loop) and a write is answered
 *   only after an fdatasync of the WAL that completed after its commit; `close()` waits for it.
 *   SQLite's automatic checkpoint is off: the store's checkpoint worker checkpoints the WAL.
 * - A WAL that cannot be synced refuses the write (500 `commit failed`), over HTTP through the SDK
 *   and raw: svc never acknowledges a write it could not make durable. (The WAL file removed
 *   under a running svc is a real failure of that kind: SQLite keeps writing to the unlinked
 *   file, which no fsync of the path can reach.)
 * - A snapshot that covers writes the store does not have (written after commits whose WAL sync
 *   never completed, then a power loss) is not loaded: its sequence numbers would be handed out
 *   again and the records written with them never replayed into the graph.
 * Crash durability (kill -9 after acknowledged writes) is `restart.test.ts`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { VectorIndex } from '../../src/vector/engine/vector-index.js';
import { createLogger } from '../../src/logger.js';
import { tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { denseDefinition, nearestId, randomVectors, raw, startVector } from './helpers.js';

const logger = createLogger('silent');
const D = 32;

test('a write is answered after a WAL fdatasync that completed after its commit; close waits for it', { timeout: 60_000 }, async () => {
  const tmp = tempDir();
  try {
    let idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    assert.equal(idx.store.db.pragma('synchronous', { simple: true }), 1, 'NORMAL: COMMIT does not fsync on the event loop');
    assert.equal(idx.store.db.pragma('wal_autocheckpoint', { simple: true }), 0, 'no checkpoint inside COMMIT');
    let synced = 0;
    idx.store.wal.onSynced = () => synced++;
    const vs = randomVectors(40, D, 61);
    for (let k = 0; k < 3; k++) {
      const commits = idx.commits;
      const before = synced;
      const ack = idx.upsert('', vs.slice(k * 10, k * 10 + 10).map((v, i) => ({ id: String(k * 10 + i), vector: v })));
      let answered = false;
      void ack.then(() => (answered = true));
      while (idx.commits === commits) await new Promise((r) => setImmediate(r));
      // committed (and visible) now; answered only once an fdatasync started after the commit is done
      const ns = idx.ns('')!;
      assert.equal(nearestId(idx, ns, vs[k * 10 + 3]), String(k * 10 + 3), 'visible at once');
      assert.equal(await ack, 'Success');
      assert.ok(answered);
      assert.ok(synced > before, `answered after an fdatasync (${before} completed before the write, ${synced} at its answer)`);
    }
    await waitFor('a WAL checkpoint on the worker', () => idx.store.checkpointer.count > 0);
    // close waits for the last sync: nothing is answered after the store is closed
    const last = idx.upsert('', vs.slice(30).map((v, i) => ({ id: String(30 + i), vector: v })));
    await idx.close();
    let state = 'pending';
    void last.then(() => (state = 'answered'), () => (state = 'refused'));
    await new Promise((r) => setImmediate(r));
    assert.equal(state, 'answered');
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    assert.equal(idx.ns('')!.count, 40);
    await idx.close();
  } finally {
    tmp.cleanup();
  }
});

test('a WAL that cannot be synced refuses the write with 500 commit failed; reads keep working', { timeout: 60_000 }, async () => {
  const data = tempDir('svc-vector-walsync-');
  try {
    // the SQLite store's WAL (with SVC_VECTOR_DATABASE_URL the local file is only a cache, never synced)
    const svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '16', SVC_VECTOR_DATABASE_URL: '' }, dataDir: data.dir });
    try {
      const wal = path.join(data.dir, 'vector', 'default.sqlite-wal');
      assert.ok(fs.existsSync(wal), 'the store runs in WAL mode');
      fs.rmSync(wal);
      const [v] = randomVectors(1, 16, 62);
      await assert.rejects(svc.client().upsert({ id: 'a', vector: v }), /commit failed/);
      const r = await raw(`${svc.indexUrl()}/upsert`, svc.token(), JSON.stringify({ id: 'b', vector: v }));
      assert.equal(r.status, 500);
      assert.deepEqual(r.body, { error: 'commit failed', status: 500 });
      assert.equal(typeof (await svc.client().info()).vectorCount, 'number');
    } finally {
      await svc.close();
    }
  } finally {
    data.cleanup();
  }
});

test('a snapshot covering writes the store lost (power loss before their WAL sync) is not loaded', { timeout: 60_000 }, async () => {
  const tmp = tempDir();
  try {
    let idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    const vs = randomVectors(1300, D, 63);
    await idx.upsert('', vs.slice(0, 1000).map((v, i) => ({ id: String(i), vector: v })));
    await idx.upsert('', vs.slice(1000, 1200).map((v, i) => ({ id: String(1000 + i), vector: v })));
    await idx.close(); // the closing snapshot covers both upserts (seq 1200)
    // The last commit (seq 1001-1200) never reached the disk: the store ends at seq 1000.
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    idx.store.db.exec("DELETE FROM records WHERE seq > 1000; UPDATE meta SET value = '1000' WHERE key = 'seq'");
    idx.store.close();
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    assert.equal(idx.loadStats.fromSnapshot, 0, 'the snapshot is ahead of the store');
    assert.equal(idx.loadStats.rebuilt, 1);
    // new writes take the lost sequence numbers again; after a crash they must be in the graph
    await idx.upsert('', vs.slice(1200).map((v, i) => ({ id: `n${i}`, vector: v })));
    await idx.whenIndexed();
    idx.store.close(); // crash: no closing snapshot
    idx = new VectorIndex(denseDefinition(D), tmp.dir, logger);
    const ns = idx.ns('')!;
    assert.equal(ns.count, 1100);
    for (const i of [0, 999]) assert.equal(nearestId(idx, ns, vs[i]), String(i));
    for (const i of [0, 50, 99]) assert.equal(nearestId(idx, ns, vs[1200 + i]), `n${i}`, `n${i} is found after the crash`);
    await idx.close();
  } finally {
    tmp.cleanup();
  }
});

/**
 * QueueStore conformance suite: every backend must pass it. Add a
 * backend by adding a factory to FACTORIES (PostgreSQL later). Real SQLite files, no mocks.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { buildMessage } from '../../src/queue/build.js';
import type { NewMessage } from '../../src/queue/model.js';
import { GroupCommitter } from '../../src/queue/store/group-commit.js';
import { openSqliteQueueStore } from '../../src/queue/store/sqlite.js';
import type { QueueStore } from '../../src/queue/store/types.js';
import { tempDir } from '../helpers/env.js';

const FACTORIES: Record<string, () => { store: QueueStore; reopen(): QueueStore; cleanup(): void; file?: string }> = {
  sqlite: () => {
    const tmp = tempDir('svc-qstore-');
    const file = path.join(tmp.dir, 'queue.sqlite');
    return { store: openSqliteQueueStore(file), reopen: () => openSqliteQueueStore(file), cleanup: tmp.cleanup, file };
  },
};

const T0 = 1_700_000_000_000;

function msg(url: string, over: Partial<NewMessage> = {}): NewMessage {
  return { ...buildMessage({ method: 'POST', headers: { 'Content-Type': ['text/plain'] }, maxRetries: 2 }, { url }, Buffer.from('hi'), T0), ...over };
}

for (const [name, factory] of Object.entries(FACTORIES)) {
  describe(`QueueStore conformance: ${name}`, () => {
    const cleanups: (() => void)[] = [];
    after(() => cleanups.forEach((c) => c()));
    const open = () => {
      const f = factory();
      cleanups.push(f.cleanup);
      return f;
    };

    test('enqueue, claim in due order, complete; owner and lease rules', async () => {
      const { store } = open();
      const a = msg('http://a.test/1', { dueAt: T0 + 20 });
      const b = msg('http://a.test/2', { dueAt: T0 + 10 });
      const c = msg('http://a.test/3', { dueAt: T0 + 10_000 });
      await store.enqueue([a, b, c], T0, 60_000);
      assert.equal(await store.nextDueAt(), T0 + 10);
      const claimed = await store.claimDue({ owner: 'w1', now: T0 + 100, limit: 10, leaseUntil: T0 + 5000 });
      assert.deepEqual(claimed.map((m) => m.id), [b.id, a.id]);
      assert.equal(await store.nextDueAt(), T0 + 10_000, 'claimed messages leave the due index');
      assert.equal((await store.claimDue({ owner: 'w2', now: T0 + 100, limit: 10, leaseUntil: T0 + 5000 })).length, 0);
      assert.equal(await store.complete(b.id, 'w2', T0 + 200, { status: 200 }, []), false, 'only the owner completes');
      assert.equal(await store.complete(b.id, 'w1', T0 + 200, { status: 200 }, []), true);
      assert.equal(await store.getMessage(b.id), undefined, 'delivered messages are not pending');
      assert.equal(await store.releaseLeases(T0 + 4000), 0);
      assert.equal(await store.releaseLeases(T0 + 6000), 1, 'expired lease of a is released');
      const again = await store.claimDue({ owner: 'w3', now: T0 + 6000, limit: 10, leaseUntil: T0 + 9000 });
      assert.deepEqual(again.map((m) => m.id), [a.id]);
      await store.close();
    });

    test('reschedule counts retries; moveToDlq keeps response; DLQ list/get/delete/retry', async () => {
      const { store } = open();
      const a = msg('http://b.test/x', { dueAt: T0, labels: ['l1'] });
      await store.enqueue([a], T0, 60_000);
      await store.claimDue({ owner: 'w', now: T0, limit: 1, leaseUntil: T0 + 1000 });
      assert.equal(await store.reschedule(a.id, 'w', T0 + 1, { status: 500, error: 'boom' }, T0 + 50, []), true);
      const [m] = await store.claimDue({ owner: 'w', now: T0 + 60, limit: 1, leaseUntil: T0 + 1000 });
      assert.equal(m.retried, 1);
      const outcome = { status: 500, headers: { 'X-A': ['1'] }, body: Buffer.from([0xff, 0x00]), error: 'boom' };
      assert.equal(await store.moveToDlq(a.id, 'w', T0 + 70, outcome, `${T0 + 70}-${m.seq}`, []), true);
      const page = await store.listDlq({ label: ['l1'] }, { count: 10, order: 'latestFirst' });
      assert.equal(page.items.length, 1);
      assert.equal(page.cursor, undefined);
      assert.deepEqual(page.items[0].outcome.body, outcome.body);
      assert.equal(page.items[0].outcome.status, 500);
      const dlqId = page.items[0].dlqId;
      assert.ok(await store.getDlq(dlqId));
      const r = await store.retryDlq({ dlqIds: [dlqId] }, 1, T0 + 100, (e) => msg(e.message.url, { dueAt: T0 + 100 }));
      assert.equal(r.messageIds.length, 1);
      assert.equal(await store.getDlq(dlqId), undefined, 'retried entries leave the DLQ');
      assert.ok(await store.getMessage(r.messageIds[0]));
      assert.equal((await store.deleteDlq({ dlqIds: [dlqId] }, 1)).deleted, 0);
      const logs = await store.listLogs({ messageIds: [a.id] }, { count: 100, order: 'earliestFirst' });
      assert.deepEqual(logs.items.map((l) => l.state), ['CREATED', 'ACTIVE', 'ERROR', 'RETRY', 'ACTIVE', 'ERROR', 'FAILED']);
      await store.close();
    });

    test('dedup within the window; cancel pending and in-flight', async () => {
      const { store } = open();
      const a = msg('http://c.test/', { dedupKey: 'id:k1' });
      const b = msg('http://c.test/', { dedupKey: 'id:k1' });
      const [ra, rb] = await store.enqueue([a, b], T0, 1000);
      assert.deepEqual([ra.deduplicated, rb.deduplicated, rb.messageId], [false, true, a.id]);
      const c = msg('http://c.test/', { dedupKey: 'id:k1' });
      const [rc] = await store.enqueue([c], T0 + 2000, 1000);
      assert.equal(rc.deduplicated, false, 'window passed');
      await store.claimDue({ owner: 'w', now: T0 + 3000, limit: 1, leaseUntil: T0 + 9000 });
      assert.equal(await store.cancel({}, T0 + 3001), 2);
      assert.equal(await store.getMessage(c.id), undefined, 'unclaimed one cancelled at once');
      assert.ok(await store.getMessage(a.id), 'in-flight one waits for its attempt');
      await store.reschedule(a.id, 'w', T0 + 3002, { error: 'x' }, T0 + 4000, []);
      assert.equal(await store.getMessage(a.id), undefined, 'cancel honoured when the attempt ended');
      await store.close();
    });

    test('enqueue hand-off: due messages come back claimed, up to the limit', async () => {
      const { store } = open();
      const due = [msg('http://e.test/1'), msg('http://e.test/2'), msg('http://e.test/3')];
      const later = msg('http://e.test/later', { dueAt: T0 + 60_000 });
      const res = await store.enqueue([...due, later], T0, 0, { owner: 'w', leaseUntil: T0 + 1000, ids: new Set([due[0].id, due[1].id]) });
      assert.deepEqual(res.map((r) => r.claimed?.id), [due[0].id, due[1].id, undefined, undefined]);
      assert.equal(res[0].claimed?.retried, 0);
      const rest = await store.claimDue({ owner: 'w2', now: T0, limit: 10, leaseUntil: T0 + 5000 });
      assert.deepEqual(rest.map((m) => m.id), [due[2].id], 'handed-off messages are leased, the others are not');
      assert.equal(await store.complete(due[0].id, 'w', T0 + 1, { status: 200 }, []), true);
      const logs = await store.listLogs({ messageIds: [due[0].id] }, { count: 10, order: 'earliestFirst' });
      assert.deepEqual(logs.items.map((l) => l.state), ['CREATED', 'ACTIVE', 'DELIVERED']);
      assert.equal(await store.releaseLeases(T0 + 2000), 1, 'the lease of due[1] expires like any other');
      await store.close();
    });

    test('group commit: concurrent enqueues share transactions and survive reopen', async () => {
      const f = open();
      const msgs = Array.from({ length: 500 }, (_, i) => msg(`http://d.test/${i}`));
      const results = await Promise.all(msgs.map((m) => f.store.enqueue([m], T0, 0)));
      assert.equal(results.length, 500);
      await f.store.close();
      const s2 = f.reopen();
      for (const m of [msgs[0], msgs[499]]) assert.ok(await s2.getMessage(m.id));
      await s2.close();
    });

    if (name === 'sqlite') {
      test('group commit: a failing write rolls back alone, the others commit', async () => {
        const tmp = tempDir('svc-gc-');
        cleanups.push(tmp.cleanup);
        const file = path.join(tmp.dir, 'g.sqlite');
        const db = new Database(file);
        db.pragma('journal_mode = WAL');
        db.exec('CREATE TABLE t (k TEXT PRIMARY KEY)');
        const gc = new GroupCommitter(db, `${file}-wal`);
        const ins = db.prepare('INSERT INTO t (k) VALUES (?)');
        const results = await Promise.allSettled([
          gc.run(() => ins.run('a')),
          gc.run(() => {
            ins.run('b');
            ins.run('a'); // duplicate key: this whole write must roll back, 'b' included
          }),
          gc.run(() => ins.run('c'), false),
        ]);
        assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
        assert.deepEqual((db.prepare('SELECT k FROM t ORDER BY k').all() as { k: string }[]).map((r) => r.k), ['a', 'c']);
        await gc.close();
        db.close();
      });

      test('group commit: SVC_QUEUE_FSYNC always waits for the WAL fsync, everysec resolves at COMMIT and fsyncs within a second', async () => {
        const tmp = tempDir('svc-gc-fsync-');
        cleanups.push(tmp.cleanup);
        const realSync = fs.fdatasync;
        const synced: number[] = []; // performance.now() of each completed fdatasync
        // count the real fdatasync calls of the committer (it calls fs.fdatasync at run time)
        (fs as { fdatasync: typeof fs.fdatasync }).fdatasync = ((fd: number, cb: (err: NodeJS.ErrnoException | null) => void) =>
          realSync(fd, (err) => {
            synced.push(performance.now());
            cb(err);
          })) as typeof fs.fdatasync;
        try {
          for (const policy of ['always', 'everysec'] as const) {
            synced.length = 0;
            const file = path.join(tmp.dir, `${policy}.sqlite`);
            const db = new Database(file);
            db.pragma('journal_mode = WAL');
            db.exec('CREATE TABLE t (k TEXT PRIMARY KEY)');
            const gc = new GroupCommitter(db, `${file}-wal`, policy);
            const ins = db.prepare('INSERT INTO t (k) VALUES (?)');
            await Promise.all(['a', 'b', 'c'].map((k) => gc.run(() => ins.run(k)))); // durable writes
            const resolvedAt = performance.now();
            if (policy === 'always') {
              assert.equal(synced.length, 1, 'one fsync covered the batch before the writes resolved');
              assert.ok(synced[0] <= resolvedAt);
            } else {
              assert.equal(synced.length, 0, 'everysec: resolved at COMMIT, before any fsync');
              await new Promise((r) => setTimeout(r, 1300));
              assert.equal(synced.length, 1, 'everysec: the WAL was fsynced within a second');
              await new Promise((r) => setTimeout(r, 1100));
              assert.equal(synced.length, 1, 'no fsync when nothing new was committed');
              await gc.run(() => ins.run('d'));
            }
            await gc.close();
            if (policy === 'everysec') assert.equal(synced.length, 2, 'close() fsyncs what the last second committed');
            assert.equal((db.prepare('SELECT COUNT(*) AS n FROM t').get() as { n: number }).n, policy === 'always' ? 3 : 4);
            db.close();
          }
        } finally {
          (fs as { fdatasync: typeof fs.fdatasync }).fdatasync = realSync;
        }
      });

      test('sqlite: WAL, partial due index used, version check', async () => {
        const f = open();
        await f.store.close();
        const db = new Database(f.file!);
        assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
        const plan = db
          .prepare(`EXPLAIN QUERY PLAN SELECT seq FROM messages WHERE status = 'pending' AND claimed_by IS NULL AND due_at <= ? ORDER BY due_at LIMIT 10`)
          .all(0) as { detail: string }[];
        assert.match(plan.map((p) => p.detail).join(' '), /USING (COVERING )?INDEX messages_due/);
        db.pragma('user_version = 999');
        db.close();
        assert.throws(() => f.reopen(), /newer than this svc supports/);
      });
    }
  });
}

/**
 * QueueStore conformance (`store-conformance.ts`) on every backend — SQLite
 * files and a real PostgreSQL (a throw-away cluster, or `SVC_TEST_DATABASE_URL`) — plus the
 * SQLite-only checks of its group committer and schema. No mocks.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { buildMessage } from '../../src/queue/build.js';
import { GroupCommitter } from '../../src/queue/store/group-commit.js';
import { openSqliteQueueStore } from '../../src/queue/store/sqlite.js';
import { loadMigrations } from '../../src/queue/store/migrate.js';
import { insertMessageSqlFor, MESSAGE_COLUMNS, messageValues, presentMessageValues } from '../../src/queue/store/sqlite-rows.js';
import { openPgQueueStore } from '../../src/queue/store/pg.js';
import { tempDir } from '../helpers/env.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { storeConformance } from './store-conformance.js';

/** Commits in a WAL file: frames of the current WAL generation (its header's salts) that end a transaction. */
function walCommits(walFile: string): number {
  const wal = fs.readFileSync(walFile);
  const pageSize = wal.readUInt32BE(8);
  let commits = 0;
  for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
    if (wal.readUInt32BE(off + 8) !== wal.readUInt32BE(16) || wal.readUInt32BE(off + 12) !== wal.readUInt32BE(20)) break;
    if (wal.readUInt32BE(off + 4) !== 0) commits++;
  }
  return commits;
}

storeConformance('sqlite', async () => {
  const tmp = tempDir('svc-qstore-');
  const file = path.join(tmp.dir, 'queue.sqlite');
  return { store: openSqliteQueueStore(file), reopen: async () => openSqliteQueueStore(file), cleanup: tmp.cleanup };
});

describe('SQLite store specifics', () => {
  const cleanups: (() => void)[] = [];
  after(() => cleanups.forEach((c) => c()));
  const open = () => {
    const tmp = tempDir('svc-qstore-');
    cleanups.push(tmp.cleanup);
    const file = path.join(tmp.dir, 'queue.sqlite');
    return { store: openSqliteQueueStore(file), reopen: () => openSqliteQueueStore(file), file };
  };
  /** A group committer over a fresh WAL database with one table `t (k TEXT PRIMARY KEY)`, and its insert. */
  const openCommitter = (prefix: string) => {
    const tmp = tempDir(prefix);
    cleanups.push(tmp.cleanup);
    const file = path.join(tmp.dir, 'g.sqlite');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (k TEXT PRIMARY KEY)');
    return { file, db, gc: new GroupCommitter(db, `${file}-wal`), ins: db.prepare('INSERT INTO t (k) VALUES (?)') };
  };

  test('group commit: a failing write rolls back alone, the others commit', async () => {
    const { file, db, gc, ins } = openCommitter('svc-gc-');
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

  test('group commit: bookkeeping queued right after an fsync acknowledged publishes shares the next publish commit', async () => {
    const { file, db, gc, ins } = openCommitter('svc-gc-ack-');
    // a durable write whose commit and fsync take longer than the relaxed wait (2 ms), as under load
    await gc.run(() => {
      ins.run('a');
      const t = performance.now();
      while (performance.now() - t < 5);
    });
    const before = walCommits(`${file}-wal`);
    // acknowledged: a delivery outcome (relaxed) arrives first, the publisher's next publish a turn later
    const relaxed = gc.run(() => ins.run('r'), false);
    await new Promise((r) => setImmediate(r));
    const durable = gc.run(() => ins.run('b'));
    await Promise.all([relaxed, durable]);
    assert.equal(walCommits(`${file}-wal`) - before, 1, 'the outcome waited for the publish and shared its transaction');
    await gc.close();
    db.close();
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

  test('sqlite: a message handed off at publish writes one log row for CREATED and ACTIVE; rows of schema 4 list as before', async () => {
    const f = open();
    const now = Date.now();
    const m = buildMessage({ method: 'POST', headers: {}, maxRetries: 0 }, { url: 'https://example.com/a' }, Buffer.from('x'), now);
    await f.store.enqueue([m], now, 0, { owner: 'w', leaseUntil: now + 1000, ids: new Set([m.id]) });
    await f.store.close();
    const db = new Database(f.file);
    const rows = db.prepare('SELECT state, active FROM logs ORDER BY seq').all();
    assert.deepEqual(rows.map((r) => ({ ...(r as object) })), [{ state: 'CREATED', active: 1 }]);
    // the two rows an earlier svc wrote for the same events
    const seq = (db.prepare('SELECT message_seq AS s FROM logs').get() as { s: number }).s;
    db.prepare(`INSERT INTO logs (time, message_seq, state, next_delivery_time) VALUES (?, ?, 'CREATED', ?), (?, ?, 'ACTIVE', NULL)`).run(now + 1, seq, now, now + 1, seq);
    db.close();
    const store = f.reopen();
    const states = (await store.listLogs({}, { count: 10, order: 'earliestFirst' })).items.map((l) => l.state);
    assert.deepEqual(states, ['CREATED', 'ACTIVE', 'CREATED', 'ACTIVE']);
    await store.close();
  });

  test('sqlite: a message INSERT names only its non-NULL columns; messages with every option, none, or held read back the same', async () => {
    const now = Date.now();
    const plain = buildMessage({ method: 'POST', headers: { 'Content-Type': ['text/plain'] }, maxRetries: 3 }, { url: 'https://example.com/a' }, Buffer.from('x'), now);
    const values = messageValues(plain, { owner: 'w', leaseUntil: now + 1000 });
    const mask = presentMessageValues(values);
    const sql = insertMessageSqlFor(mask);
    const named = MESSAGE_COLUMNS.filter((c) => sql.includes(`${c},`) || sql.includes(`${c})`));
    assert.deepEqual(named, ['id', 'kind', 'url', 'url_host', 'url_path', 'origin', 'method', 'headers', 'body', 'created_at', 'due_at', 'max_retries', 'claimed_by', 'lease_until']);
    assert.equal(values.length, named.length);
    assert.ok(!values.includes(null));

    const f = open();
    const full = buildMessage(
      {
        method: 'PUT',
        headers: { 'X-A': ['1'] },
        maxRetries: 5,
        delayMs: 60_000,
        retryDelay: '1000 * retried',
        timeoutMs: 2500,
        callback: 'https://example.com/cb',
        callbackOptions: { method: 'POST', headers: {}, maxRetries: 1 },
        failureCallback: 'https://example.com/fcb',
        failureCallbackOptions: { method: 'POST', headers: {}, maxRetries: 2 },
        labels: ['l1'],
        redact: { body: true },
        flowControlKey: 'k',
        flowControl: { parallelism: 2 },
      },
      { url: 'https://example.com/b?q=1', topicName: 't', endpointName: 'e', queueName: 'q', scheduleId: 's' },
      Buffer.from('y'),
      now,
      { callerIp: '10.0.0.1', workflow: { runId: 'wfr_1', url: 'https://example.com/wf' } as never },
    );
    const held = { ...buildMessage({ method: 'POST', headers: {}, maxRetries: 0 }, { url: 'https://example.com/c', queueName: 'q' }, Buffer.from('z'), now), held: true };
    const r = await f.store.enqueue([plain, full, held], now, 0, { owner: 'w', leaseUntil: now + 1000, ids: new Set([plain.id]) });
    assert.equal(r[0].claimed?.seq !== undefined, true);
    for (const m of [full, held]) {
      const got = await f.store.getMessage(m.id);
      assert.ok(got);
      const { held: _held, dedupKey: _d, workflowPublish: _w, ...want } = m as typeof m & { held?: boolean };
      for (const [k, v] of Object.entries(want)) {
        if (v !== undefined) assert.deepEqual((got as unknown as Record<string, unknown>)[k], v, k);
      }
    }
    await f.store.close();
    const db = new Database(f.file);
    const rows = db.prepare('SELECT * FROM messages ORDER BY seq').all() as Record<string, unknown>[];
    db.close();
    assert.equal(rows.length, 3);
    // the plain message: every column it leaves out is NULL (or its DEFAULT)
    const p = rows[0];
    for (const c of MESSAGE_COLUMNS) if (!named.includes(c)) assert.equal(p[c], null, c);
    assert.deepEqual([p.status, p.retried, p.cancel_requested, p.claimed_by], ['pending', 0, 0, 'w']);
    // the full one names every column (lease_until is NULL: not handed off)
    for (const c of MESSAGE_COLUMNS) if (c !== 'lease_until' && c !== 'claimed_by') assert.notEqual(rows[1][c], null, c);
    assert.deepEqual([rows[2].claimed_by, rows[2].lease_until, rows[2].queue_name], ['held', null, 'q']);
  });

  test('sqlite: logs has no AUTOINCREMENT; a log cursor held across the pruning of every row loses and repeats nothing', async () => {
    const f = open();
    const now = Date.now();
    const mk = (t: number) => buildMessage({ method: 'POST', headers: {}, maxRetries: 0 }, { url: 'https://example.com/p' }, Buffer.from('x'), t);
    const first = [mk(now), mk(now)];
    await f.store.enqueue(first, now, 0);
    // a client's cursors after one page each way
    const early = await f.store.listLogs({}, { count: 1, order: 'earliestFirst' });
    const late = await f.store.listLogs({}, { count: 1, order: 'latestFirst' });
    assert.deepEqual([early.items[0].message.id, late.items[0].message.id], [first[0].id, first[1].id]);
    assert.ok(early.cursor !== undefined && late.cursor !== undefined);
    // retention removes every log row (the messages are still pending: they stay)
    await f.store.prune(now + 10, now + 10);
    assert.equal((await f.store.listLogs({}, { count: 10, order: 'earliestFirst' })).items.length, 0, 'the marker row is not listed');
    const later = mk(now + 20);
    await f.store.enqueue([later], now + 20, 0);
    // the entry written after the pruning comes after both cursors, as it would have before
    const next = await f.store.listLogs({}, { count: 10, order: 'earliestFirst', cursor: early.cursor });
    assert.deepEqual(next.items.map((e) => e.message.id), [later.id], 'not lost by the earliest-first page');
    const older = await f.store.listLogs({}, { count: 10, order: 'latestFirst', cursor: late.cursor });
    assert.deepEqual(older.items, [], 'not listed as older than the latest-first cursor');
    assert.deepEqual(await f.store.eventHistogram(0, now + 1000, 1), { CREATED: [1] }, 'the marker row is not counted');
    await f.store.close();
    const db = new Database(f.file);
    const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'logs'`).get() as { sql: string }).sql;
    assert.doesNotMatch(sql, /AUTOINCREMENT/i);
    const seqs = (db.prepare('SELECT seq, message_seq FROM logs ORDER BY seq').all() as { seq: number; message_seq: number }[]);
    assert.equal(seqs.length, 2, 'the marker of the pruned newest seq, and the new row');
    assert.equal(seqs[0].message_seq, 0);
    assert.ok(seqs[1].seq > seqs[0].seq);
    db.close();
  });

  test('sqlite: migration 0006 keeps the log rows, their seq and the largest seq given out when the newest rows were pruned', async () => {
    const tmp = tempDir('svc-qstore-m6-');
    cleanups.push(tmp.cleanup);
    const file = path.join(tmp.dir, 'queue.sqlite');
    const pre = new Database(file);
    pre.pragma('journal_mode = WAL');
    for (const m of loadMigrations().filter((x) => x.version <= 5)) pre.exec(m.sql);
    pre.pragma('user_version = 5');
    const now = Date.now();
    pre.prepare(`INSERT INTO messages (id, url, url_host, url_path, origin, method, headers, body, created_at, due_at, max_retries)
      VALUES ('msg_m6', 'https://example.com/', 'example.com', '/', 'https://example.com', 'POST', '{}', x'78', ?, ?, 0)`).run(now, now);
    const ins = pre.prepare(`INSERT INTO logs (time, message_seq, state, active) VALUES (?, 1, ?, ?)`);
    ins.run(now, 'CREATED', 1);
    ins.run(now + 1, 'DELIVERED', 0);
    ins.run(now + 2, 'ERROR', 0);
    pre.prepare('DELETE FROM logs WHERE seq = 3').run(); // the newest row pruned: seq 3 was given out
    pre.close();
    const store = openSqliteQueueStore(file);
    const entries = (await store.listLogs({}, { count: 10, order: 'earliestFirst' })).items;
    assert.deepEqual(entries.map((e) => e.state), ['CREATED', 'ACTIVE', 'DELIVERED']);
    const m = buildMessage({ method: 'POST', headers: {}, maxRetries: 0 }, { url: 'https://example.com/n' }, Buffer.from('x'), now + 5);
    await store.enqueue([m], now + 5, 0);
    await store.close();
    const db = new Database(file);
    const rows = db.prepare('SELECT seq, message_seq, state, active FROM logs ORDER BY seq').all() as { seq: number; message_seq: number; state: string; active: number }[];
    assert.deepEqual(rows.map((r) => [r.seq, r.message_seq === 0 ? 0 : 1, r.active]), [[1, 1, 1], [2, 1, 0], [3, 0, 0], [4, 1, 0]]);
    const idx = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'logs' ORDER BY name`).all() as { name: string }[]).map((r) => r.name);
    assert.deepEqual(idx, ['logs_message', 'logs_time']);
    db.close();
  });

  test('sqlite: migration 0007 rebuilds messages without AUTOINCREMENT; rows, their seq, DLQ links and indexes kept; pruning keeps the newest message', async () => {
    const tmp = tempDir('svc-qstore-m7-');
    cleanups.push(tmp.cleanup);
    const file = path.join(tmp.dir, 'queue.sqlite');
    const pre = new Database(file);
    pre.pragma('journal_mode = WAL');
    for (const m of loadMigrations().filter((x) => x.version <= 6)) pre.exec(m.sql);
    pre.pragma('user_version = 6');
    const now = Date.now();
    const insert = pre.prepare(`INSERT INTO messages (id, url, url_host, url_path, origin, method, headers, body, created_at, due_at, max_retries, status, finished_at)
      VALUES (?, 'https://example.com/', 'example.com', '/', 'https://example.com', 'POST', '{"A":["b"]}', x'78', ?, ?, 0, ?, ?)`);
    insert.run('msg_live', now, now + 3_600_000, 'pending', null);
    insert.run('msg_dead', now, now, 'failed', now);
    pre.prepare(`INSERT INTO dlq (dlq_id, message_seq, created_at, response_status) VALUES ('dlq_m7', 2, ?, 500)`).run(now);
    pre.close();
    const store = openSqliteQueueStore(file);
    assert.equal((await store.getMessage('msg_live'))?.seq, 1);
    assert.deepEqual((await store.getMessage('msg_live'))?.headers, { A: ['b'] });
    const dlq = await store.getDlq('dlq_m7');
    assert.equal(dlq?.message.id, 'msg_dead', 'the DLQ entry still refers to its message');
    // the newest message is finished and past retention: kept while it has the largest seq
    await store.deleteDlq({ dlqIds: ['dlq_m7'] }, 10);
    await store.prune(now + 10, now + 10);
    const m = buildMessage({ method: 'POST', headers: {}, maxRetries: 0 }, { url: 'https://example.com/n' }, Buffer.from('x'), now + 20);
    await store.enqueue([m], now + 20, 0);
    assert.equal((await store.getMessage(m.id))?.seq, 3, 'the seq of the pruned-looking newest message is not given again');
    await store.prune(now + 30, now + 30);
    await store.close();
    const db = new Database(file);
    const sql = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'messages'`).get() as { sql: string }).sql;
    assert.doesNotMatch(sql, /AUTOINCREMENT/i);
    assert.deepEqual((db.prepare('SELECT seq, id FROM messages ORDER BY seq').all() as { seq: number; id: string }[]).map((r) => [r.seq, r.id]), [[1, 'msg_live'], [3, m.id]], 'once not the newest, it is pruned');
    const idx = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL ORDER BY name`).all() as { name: string }[]).map((r) => r.name);
    assert.deepEqual(idx, ['messages_admitted_fc', 'messages_admitted_queue', 'messages_due', 'messages_finished', 'messages_held_due', 'messages_held_fc', 'messages_held_queue', 'messages_lease']);
    assert.equal(db.pragma('foreign_keys', { simple: true }), 1);
    db.close();
  });

  test('sqlite: a new database has 1 KiB pages (less WAL per message); one created with 4 KiB pages keeps them and works', async () => {
    const f = open();
    await f.store.close();
    const db = new Database(f.file);
    assert.equal(db.pragma('page_size', { simple: true }), 1024);
    db.close();
    // a database of an earlier svc (SQLite's default 4 KiB pages) is opened as it is
    const tmp = tempDir('svc-qstore-');
    cleanups.push(tmp.cleanup);
    const old = path.join(tmp.dir, 'queue.sqlite');
    const pre = new Database(old);
    pre.pragma('page_size = 4096');
    pre.pragma('journal_mode = WAL');
    pre.exec('CREATE TABLE earlier (x INTEGER)');
    pre.close();
    const store = openSqliteQueueStore(old);
    const now = Date.now();
    const m = buildMessage({ method: 'POST', headers: { 'Content-Type': ['text/plain'] }, maxRetries: 2 }, { url: 'https://example.com/hook' }, Buffer.from('hi'), now);
    const r = await store.enqueue([{ ...m, id: 'msg_page_size_kept' }], now, 60_000);
    assert.equal(r[0].messageId, 'msg_page_size_kept');
    assert.equal((await store.getMessage('msg_page_size_kept'))?.url, 'https://example.com/hook');
    await store.close();
    const check = new Database(old);
    assert.equal(check.pragma('page_size', { simple: true }), 4096);
    check.close();
  });
});

describe('PostgreSQL store', () => {
  let server: TestPostgres | undefined;
  const ready = startTestPostgres().then((s) => (server = s));
  after(async () => {
    await ready.catch(() => undefined);
    await server?.stop();
  });
  storeConformance('postgres', async () => {
    const pg = await ready;
    const url = await pg.newDatabase('svc_conf');
    return { store: await openPgQueueStore(url), reopen: () => openPgQueueStore(url), cleanup: () => undefined };
  });
});

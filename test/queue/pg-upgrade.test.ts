/**
 * Upgrading a PostgreSQL queue database made by the previous schema (migrations 0001-0004, one
 * wide `messages` table) to the split of migration 0005 (`message_data` + `message_state`, the
 * `messages` view): a real PostgreSQL (throw-away cluster, or SVC_TEST_DATABASE_URL), the old
 * schema applied from the shipped migration files, messages in every state written with the old
 * table's columns, then a real `svc` process started on it. Everything stays: due and expired-lease
 * messages are delivered, a delayed one is readable, the logs and the DLQ entry of finished ones
 * are listed through the official SDK.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Client } from '@upstash/qstash';
import pg from 'pg';
import { loadMigrations } from '../../src/queue/store/migrate.js';
import { tempDir } from '../helpers/env.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { spawnQueueSvc, startSink, waitFor } from './helpers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = 'upgrade-test-token';
const KEYS = { SVC_QUEUE_CURRENT_SIGNING_KEY: 'sig_upgrade_current', SVC_QUEUE_NEXT_SIGNING_KEY: 'sig_upgrade_next' };
const PREVIOUS = 4; // the last schema version with the single wide messages table

let server: TestPostgres;
const tmp = tempDir('svc-pg-upgrade-');
let child: ChildProcess | undefined;

before(async () => {
  server = await startTestPostgres();
});
after(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
  }
  await server?.stop();
  tmp.cleanup();
});

/** Inserts a message with the columns of the previous schema; returns its seq. */
async function oldMessage(c: pg.Client, id: string, url: string, state: { status?: string; dueAt: number; claimedBy?: string; leaseUntil?: number; finishedAt?: number; queueName?: string }): Promise<number> {
  const u = new URL(url);
  const r = await c.query<{ seq: string }>(
    `INSERT INTO messages (id, kind, status, url, url_host, url_path, origin, method, headers, body, created_at, due_at, max_retries,
                           queue_name, claimed_by, lease_until, finished_at)
     VALUES ($1, 'message', $2, $3, $4, $5, $6, 'POST', '{"content-type":["text/plain"]}', $7, $8, $9, 3, $10, $11, $12, $13) RETURNING seq`,
    [id, state.status ?? 'pending', url, u.host, u.pathname, u.origin, Buffer.from(`body of ${id}`), Date.now() - 60_000, state.dueAt, state.queueName ?? null, state.claimedBy ?? null, state.leaseUntil ?? null, state.finishedAt ?? null],
  );
  return Number(r.rows[0].seq);
}

test('a database of the previous schema (one wide messages table) migrates to message_data + message_state and keeps its messages', async () => {
  const url = await server.newDatabase('svc_upgrade');
  const sink = await startSink();
  const now = Date.now();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    // the previous schema, exactly as those versions of svc made it (src/pg.ts migrate)
    await c.query('CREATE TABLE svc_queue_schema (version INTEGER NOT NULL, applied_at BIGINT NOT NULL)');
    for (const m of loadMigrations(path.join(ROOT, 'src/queue/store/pg-migrations')).filter((x) => x.version <= PREVIOUS)) {
      await c.query('BEGIN');
      await c.query(m.sql);
      await c.query('INSERT INTO svc_queue_schema (version, applied_at) VALUES ($1, $2)', [m.version, now]);
      await c.query('COMMIT');
    }
    await oldMessage(c, 'msg_up_due', `${sink.url}/up/due`, { dueAt: now - 1000 });
    await oldMessage(c, 'msg_up_leased', `${sink.url}/up/leased`, { dueAt: now - 1000, claimedBy: 'a-node-that-died', leaseUntil: now - 500 });
    await oldMessage(c, 'msg_up_delayed', `${sink.url}/up/delayed`, { dueAt: now + 3_600_000 });
    const delivered = await oldMessage(c, 'msg_up_delivered', `${sink.url}/up/delivered`, { status: 'delivered', dueAt: now - 5000, finishedAt: now - 4000 });
    await c.query(
      `INSERT INTO logs (time, message_seq, state, response_status) VALUES ($1, $2, 'CREATED', NULL), ($1 + 1, $2, 'ACTIVE', NULL), ($1 + 2, $2, 'DELIVERED', 200)`,
      [now - 5000, delivered],
    );
    const failed = await oldMessage(c, 'msg_up_failed', `${sink.url}/up/failed`, { status: 'failed', dueAt: now - 5000, finishedAt: now - 4000 });
    await c.query(`INSERT INTO dlq (dlq_id, message_seq, created_at, response_status, error) VALUES ('dlq_up_1', $1, $2, 500, 'boom')`, [failed, now - 4000]);
    await c.query(`INSERT INTO logs (time, message_seq, state, error) VALUES ($1, $2, 'FAILED', 'boom')`, [now - 4000, failed]);
  } finally {
    await c.end();
  }

  try {
    const node = await spawnQueueSvc(tmp.dir, { SVC_QUEUE_DATABASE_URL: url, SVC_QUEUE_DATABASE_SCHEMA: 'public', SVC_QUEUE_TOKEN: TOKEN, ...KEYS });
    child = node.child;
    const client = new Client({ baseUrl: node.url, token: TOKEN, retry: false });

    // due and expired-lease messages are delivered once each, with their stored body
    await waitFor('both old pending messages delivered', () => sink.at('/up/due').length >= 1 && sink.at('/up/leased').length >= 1, 120_000);
    assert.equal(sink.at('/up/due')[0].body.toString(), 'body of msg_up_due');
    assert.equal(sink.at('/up/leased')[0].body.toString(), 'body of msg_up_leased');

    const delayed = await client.messages.get('msg_up_delayed');
    assert.equal(delayed.url, `${sink.url}/up/delayed`);
    assert.equal(delayed.body, 'body of msg_up_delayed');

    const logs = await client.logs({ filter: { messageId: 'msg_up_delivered' } });
    assert.deepEqual(logs.logs.map((l) => l.state).sort(), ['ACTIVE', 'CREATED', 'DELIVERED']);
    assert.ok(logs.logs.every((l) => l.url === `${sink.url}/up/delivered`), 'log entries carry the message url');

    const dlq = await client.dlq.listMessages();
    const entry = dlq.messages.find((m) => m.dlqId === 'dlq_up_1');
    assert.ok(entry, 'the DLQ entry is listed');
    assert.equal(entry.messageId, 'msg_up_failed');
    assert.equal(entry.url, `${sink.url}/up/failed`);

    // the schema is the new one, and nothing was lost or duplicated in the move
    const c2 = new pg.Client({ connectionString: url });
    await c2.connect();
    try {
      const version = (await c2.query<{ v: number }>('SELECT MAX(version) AS v FROM svc_queue_schema')).rows[0].v;
      assert.ok(version > PREVIOUS, `schema migrated past ${PREVIOUS} (now ${version})`);
      const counts = (await c2.query<{ d: number; s: number }>('SELECT (SELECT COUNT(*) FROM message_data)::int AS d, (SELECT COUNT(*) FROM message_state)::int AS s')).rows[0];
      assert.deepEqual(counts, { d: 5, s: 5 });
      const cols = (await c2.query<{ n: string }>(`SELECT column_name AS n FROM information_schema.columns WHERE table_name = 'message_data' AND table_schema = 'public'`)).rows.map((r) => r.n);
      for (const moved of ['status', 'claimed_by', 'lease_until', 'due_at', 'retried', 'finished_at']) assert.ok(!cols.includes(moved), `${moved} left message_data`);
      const states = async () => Object.fromEntries((await c2.query<{ id: string; status: string }>('SELECT id, status FROM messages')).rows.map((r) => [r.id, r.status]));
      const want = { msg_up_due: 'delivered', msg_up_leased: 'delivered', msg_up_delayed: 'pending', msg_up_delivered: 'delivered', msg_up_failed: 'failed' };
      await waitFor('outcomes recorded', async () => {
        assert.deepEqual(await states(), want);
        return true;
      }, 60_000);
    } finally {
      await c2.end();
    }
  } finally {
    await sink.close();
  }
});

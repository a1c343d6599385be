/**
 * The PostgreSQL store's outcome statement finds its rows by primary key, not by scanning the
 * state table: a real PostgreSQL (throw-away cluster, or SVC_TEST_DATABASE_URL), the real store,
 * 64 concurrent publish-with-claim + outcome sequences (the outcomes batch up as under load), and
 * PostgreSQL's own table counters (`pg_stat_user_tables`). With a join by message id and the
 * default `random_page_cost`, every outcome batch scanned the whole young table (rows read by
 * sequential scans = batches x table size); now only a few large batches on a small table scan it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import type { NewMessage } from '../../src/queue/model.js';
import { openPgQueueStore, type PgQueueStore } from '../../src/queue/store/pg.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';

let server: TestPostgres;

before(async () => {
  server = await startTestPostgres();
});
after(async () => {
  await server?.stop();
});

function message(tag: string, i: number): NewMessage {
  const now = Date.now();
  return {
    id: `msg_plan_${tag}_${i}`,
    kind: 'message',
    url: 'http://127.0.0.1:9/plans',
    method: 'POST',
    headers: { 'content-type': ['application/json'] },
    body: Buffer.from(`{"i":${i}}`),
    createdAt: now,
    dueAt: now,
    maxRetries: 3,
  };
}

/** `n` messages, each published leased to this node and then delivered, 64 at a time. */
async function publishAndDeliver(store: PgQueueStore, tag: string, n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < n) {
        const m = message(tag, next++);
        const now = Date.now();
        const [r] = await store.enqueue([m], now, 0, { owner: 'node-a', leaseUntil: now + 60_000, ids: new Set([m.id]) });
        assert.ok(r.claimed, 'handed to the publishing node');
        assert.equal(await store.complete(m.id, 'node-a', Date.now(), { status: 200 }, []), true, 'outcome recorded');
      }
    }),
  );
}

test('outcome batches find their message_state rows by primary key, not by scanning the table', async () => {
  const url = await server.newDatabase('svc_plans');
  const first = await openPgQueueStore(url);
  await publishAndDeliver(first, 'warm', 3000);
  await first.close(); // its sessions end: their table counters are flushed
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('SELECT pg_stat_reset()');
    const store = await openPgQueueStore(url);
    const N = 3000;
    await publishAndDeliver(store, 'run', N);
    await store.close();
    const stats = async () =>
      (await c.query<{ seq_scan: string; seq_tup_read: string; idx_scan: string; n_tup_upd: string }>(
        `SELECT seq_scan, seq_tup_read, idx_scan, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'message_state'`,
      )).rows[0];
    // counters of ended sessions arrive within a moment
    let s = await stats();
    for (let i = 0; i < 100 && Number(s.n_tup_upd) < N; i++) {
      await new Promise((r) => setTimeout(r, 100));
      s = await stats();
    }
    assert.equal(Number(s.n_tup_upd), N, `one state update per outcome (${JSON.stringify(s)})`);
    assert.ok(Number(s.idx_scan) > 0, `outcomes used the primary key (${JSON.stringify(s)})`);
    // a table of 3,000-6,000 rows: a scan per outcome batch (~100+ batches) would read well over
    // 100 x N rows; a few scans are fair while it is small and a batch large (the planner's choice)
    assert.ok(Number(s.seq_tup_read) < 10 * N, `rows read by sequential scans of message_state: ${s.seq_tup_read} (${JSON.stringify(s)})`);
  } finally {
    await c.end();
  }
});

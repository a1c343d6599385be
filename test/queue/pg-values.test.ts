/**
 * The PostgreSQL store's column-array parameters (`src/queue/store/pg-arrays.ts`, built by svc
 * instead of node-postgres) carry every value unchanged: messages whose text holds the characters
 * an array literal gives meaning to (quotes, backslashes, braces, commas, blanks, the word NULL,
 * the empty string, non-ASCII) and whose bodies hold every byte value are published through the
 * store in one batch on a real PostgreSQL (throw-away cluster, or SVC_TEST_DATABASE_URL), read
 * back, delivered, and their log shows each state once.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { NewMessage } from '../../src/queue/model.js';
import { openPgQueueStore } from '../../src/queue/store/pg.js';
import { arrayLiteral } from '../../src/queue/store/pg-arrays.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';

let server: TestPostgres;

before(async () => {
  server = await startTestPostgres();
});
after(async () => {
  await server?.stop();
});

const TRICKY = ['', 'NULL', 'null', ' lead and trail ', 'a,b', '{x}', 'say "hi"', 'back\\slash', '\\"', 'tab\there', 'line\nbreak', 'ünïcødé ✓ 𝄞', "it's"];

test('text and bytes with array-literal syntax in them are stored and read back unchanged', async () => {
  const url = await server.newDatabase('svc_values');
  const store = await openPgQueueStore(url);
  try {
    const now = Date.now();
    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const msgs: NewMessage[] = TRICKY.map((t, i) => ({
      id: `msg_values_${i}`,
      kind: 'message',
      url: `http://127.0.0.1:9/values/${encodeURIComponent(t)}`,
      method: 'POST',
      headers: { 'content-type': ['text/plain'], 'x-tricky': [t, `${t}${t}`] },
      body: i % 2 ? every : Buffer.from(t),
      createdAt: now,
      dueAt: now,
      maxRetries: 3,
      callerIp: t,
      labels: [t, 'other'],
      queueName: undefined,
    }));
    // one enqueue call per message at once: they share one insert statement
    const owner = 'node-values';
    const results = await Promise.all(msgs.map((m) => store.enqueue([m], now, 0, { owner, leaseUntil: now + 60_000, ids: new Set([m.id]) })));
    for (const [r] of results) assert.ok(r.claimed, 'handed to this node');
    for (const m of msgs) {
      const got = await store.getMessage(m.id);
      assert.ok(got, m.id);
      assert.deepEqual(got.headers, m.headers);
      assert.deepEqual(got.body, m.body);
      assert.equal(got.url, m.url);
      assert.equal(got.callerIp, m.callerIp);
      assert.deepEqual(got.labels, m.labels);
    }
    const done = await Promise.all(msgs.map((m) => store.complete(m.id, owner, Date.now(), { status: 200 }, [])));
    assert.deepEqual(done, msgs.map(() => true), 'every outcome recorded');
    assert.deepEqual(await Promise.all(msgs.map((m) => store.complete(m.id, owner, Date.now(), { status: 200 }, []))), msgs.map(() => false), 'a second outcome finds nothing owned');
    const page = await store.listLogs({ messageIds: msgs.map((m) => m.id) }, { count: 1000, order: 'earliestFirst' });
    const states = new Map<string, string[]>();
    for (const e of page.items) states.set(e.message.id, [...(states.get(e.message.id) ?? []), e.state]);
    for (const m of msgs) assert.deepEqual([...(states.get(m.id) ?? [])].sort(), ['ACTIVE', 'CREATED', 'DELIVERED'], m.id);
  } finally {
    await store.close();
  }
});

test('arrayLiteral refuses values it has no element form for', () => {
  assert.throws(() => arrayLiteral([{}]), TypeError);
  assert.throws(() => arrayLiteral([true]), TypeError);
  assert.equal(arrayLiteral([1, null, undefined, 'a"b', Buffer.from([0, 255])]), '{1,NULL,NULL,"a\\"b","\\\\x00ff"}');
});

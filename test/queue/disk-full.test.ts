/**
 * A full disk: the real SQLite store is capped with `PRAGMA max_page_count` (SQLite then fails
 * writes that need a new page with a real SQLITE_FULL, as on a full disk). Publishes answer 507
 * with `Retry-After` and an error saying the disk is full — on the fast publish path and through
 * Fastify (batch, enqueue) — nothing acknowledged before is lost, and writes resume once space
 * returns (the cap is lifted). Through @upstash/qstash and raw HTTP.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import type Database from 'better-sqlite3';
import { Client } from '@upstash/qstash';
import { createLogger } from '../../src/logger.js';
import { createContext } from '../../src/main.js';
import { createQueueServer } from '../../src/queue/server.js';
import { openSqliteQueueStore } from '../../src/queue/store/sqlite.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { startSink, waitFor } from './helpers.js';

test('disk full: 507 + Retry-After, nothing acknowledged lost, writes resume when space returns', { timeout: 120_000 }, async () => {
  const tmp = tempDir('svc-q-full-');
  const sink = await startSink();
  const config = testConfig(tmp.dir, { SVC_AREAS: 'queue' });
  const actx = createContext(config, { logger: createLogger('fatal'), env: {} });
  const store = openSqliteQueueStore(path.join(tmp.dir, 'queue.sqlite'));
  // the store's own connection: max_page_count is a per-connection limit
  const db = (store as unknown as { db: Database.Database }).db;
  const server = await createQueueServer(actx, { store });
  const url = await server.listen();
  const token = actx.credentials.get('queue.token');
  const client = new Client({ baseUrl: url, token, retry: false });
  const raw = (p: string, body: string, headers: Record<string, string> = {}) =>
    fetch(url + p, { method: 'POST', headers: { authorization: `Bearer ${token}`, ...headers }, body });
  try {
    const acked: string[] = [];
    for (let i = 0; i < 5; i++) acked.push((await client.publish({ url: `${sink.url}/before${i}`, body: `b${i}` })).messageId);
    await waitFor('deliveries before', () => [0, 1, 2, 3, 4].every((i) => sink.at(`/before${i}`).length === 1), 30_000);
    await waitFor('outcomes recorded', async () => (await client.logs({ filter: { state: 'DELIVERED' } } as never)).logs.length >= 5, 30_000);

    // the disk is "full": no new page may be allocated
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    const big = 'x'.repeat(300_000);
    const answers = [
      await raw(`/v2/publish/${sink.url}/full-fast`, big), // fast HTTP path
      await raw('/v2/batch', JSON.stringify([{ destination: `${sink.url}/full-batch`, body: big }]), { 'content-type': 'application/json' }),
      await raw(`/v2/enqueue/q1/${sink.url}/full-enqueue`, big),
    ];
    for (const res of answers) {
      const text = await res.text();
      assert.equal(res.status, 507, text);
      assert.match(JSON.parse(text).error, /disk .*is full/);
      assert.ok(Number(res.headers.get('retry-after')) > 0, 'Retry-After');
    }
    await assert.rejects(client.publish({ url: `${sink.url}/full-sdk`, body: big }), /disk .*is full/);

    // space returns: the same publish succeeds and is delivered
    db.pragma('max_page_count = 1073741823');
    const after = await client.publish({ url: `${sink.url}/after`, body: big });
    await waitFor('delivery after', () => sink.at('/after')[0], 30_000);
    assert.equal(sink.at('/after')[0].body.length, big.length);
    for (const p of ['/full-fast', '/full-batch', '/full-enqueue', '/full-sdk']) assert.equal(sink.at(p).length, 0, `${p} was not stored`);

    // everything acknowledged before is still there
    const logs = await client.logs({} as never);
    const ids = new Set(logs.logs.map((l) => (l as { messageId: string }).messageId));
    for (const id of [...acked, after.messageId]) assert.ok(ids.has(id), id);
  } finally {
    await server.close();
    await sink.close();
    tmp.cleanup();
  }
});

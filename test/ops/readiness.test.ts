/**
 * `/v2/health` reports each area's real readiness: the queue is ready while its store answers a
 * read (and its front listens), the vector area while every index is loaded and its SQLite file
 * answers, kv while the database answers PING. Breaking a store (closing its handle under the
 * running server) turns that area `down` and the report `degraded` (503).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Dispatcher } from '../../src/queue/delivery/dispatcher.js';
import type { QueueStore } from '../../src/queue/store/types.js';
import type { VectorServer } from '../../src/vector/index.js';
import { startTestSvc } from '../helpers/env.js';

async function health(url: string): Promise<{ status: number; body: { status: string; areas: Record<string, string> } }> {
  const r = await fetch(`${url}/v2/health`);
  return { status: r.status, body: (await r.json()) as { status: string; areas: Record<string, string> } };
}

test('health: queue and vector report down when their stores stop answering', async () => {
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt']);
  const mgmt = svc.urls.mgmt!;
  try {
    let h = await health(mgmt);
    assert.equal(h.status, 200);
    assert.deepEqual(h.body, { status: 'ok', areas: { queue: 'ok', kv: 'ok', vector: 'ok', mgmt: 'ok' } });

    // the vector index's SQLite handle goes away under the running server
    (svc.servers.vector as VectorServer).indexes.get('default')!.store.close();
    h = await health(mgmt);
    assert.equal(h.status, 503);
    assert.equal(h.body.status, 'degraded');
    assert.equal(h.body.areas.vector, 'down');
    assert.equal(h.body.areas.queue, 'ok');

    // the queue store closes (the dispatcher first, so nothing writes to it any more)
    const queue = svc.servers.queue as unknown as { store: QueueStore; dispatcher: Dispatcher };
    await queue.dispatcher.stop();
    await queue.store.close();
    h = await health(mgmt);
    assert.equal(h.status, 503);
    assert.deepEqual(h.body.areas, { queue: 'down', kv: 'ok', vector: 'down', mgmt: 'ok' });
  } finally {
    await svc.close().catch(() => undefined);
  }
});

/**
 * Per-origin isolation: a slow destination and a failing destination never stall
 * deliveries to other destinations, even with only 4 delivery slots; and queue / flow-control
 * state (paused queue, held messages, FIFO order) survives a restart.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tempDir } from '../helpers/env.js';
import { startQueue, startSink, waitFor } from './helpers.js';

test('a slow and a failing destination do not stall a healthy one (4 delivery slots)', async () => {
  const q = await startQueue({ SVC_QUEUE_MAX_CONCURRENT_DELIVERIES: '4' });
  const slow = await startSink(() => ({ delayMs: 1500 }));
  const failing = await startSink(() => ({ status: 503 }));
  const fast = await startSink();
  try {
    for (let i = 0; i < 12; i++) await q.client.publish({ url: `${slow.url}/s${i}`, body: 'x', retries: 0 });
    for (let i = 0; i < 12; i++) await q.client.publish({ url: `${failing.url}/f${i}`, body: 'x', retries: 3, retryDelay: '20' });
    await waitFor('slow destination busy', () => slow.requests.length >= 1);
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) await q.client.publish({ url: `${fast.url}/ok${i}`, body: 'x' });
    await waitFor('healthy destination served', () => fast.requests.length === 5, 5000);
    const took = Date.now() - t0;
    // Ordering, not a time limit: had the healthy messages waited behind the slow destination's
    // backlog (12 x 1.5 s over its slots), every slow message would have been sent before them.
    assert.ok(slow.requests.length < 12, `the healthy destination was served (after ${took} ms) while the slow one still had a backlog`);
  } finally {
    await q.close();
    await Promise.all([slow.close(), failing.close(), fast.close()]);
  }
});

test('restart keeps a paused queue, its held messages in order, and a paused flow-control key', async () => {
  const tmp = tempDir();
  const sink = await startSink();
  try {
    let q = await startQueue({}, tmp.dir);
    const queue = q.client.queue({ queueName: 'rq' });
    await queue.upsert({ parallelism: 1, paused: true });
    for (let i = 0; i < 4; i++) await queue.enqueue({ url: `${sink.url}/rq?i=${i}`, body: String(i) });
    await q.client.publish({ url: `${sink.url}/rk`, body: 'x', flowControl: { key: 'rk', parallelism: 1 } });
    await waitFor('key known', () => sink.at('/rk').length === 1);
    await q.client.flowControl.pause('rk');
    await q.client.publish({ url: `${sink.url}/rk`, body: 'y', flowControl: { key: 'rk', parallelism: 1 } });
    await q.close();

    q = await startQueue({}, tmp.dir);
    const q2 = q.client.queue({ queueName: 'rq' });
    const info = await q2.get();
    assert.equal(info.paused, true);
    assert.equal(info.lag, 4);
    assert.equal((await q.client.flowControl.get('rk')).isPaused, true);
    assert.equal((await q.client.flowControl.get('rk')).waitListSize, 1);
    await q2.resume();
    await q.client.flowControl.resume('rk');
    await waitFor('queue drained', () => sink.requests.filter((r) => r.url.startsWith('/rq')).length === 4);
    await waitFor('key drained', () => sink.at('/rk').length === 2);
    assert.deepEqual(sink.requests.filter((r) => r.url.startsWith('/rq')).map((r) => r.body.toString()), ['0', '1', '2', '3']);
    await q.close();
  } finally {
    await sink.close();
    tmp.cleanup();
  }
});

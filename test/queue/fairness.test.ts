/**
 * Dispatcher fairness and bounded concurrency end-to-end: with 4 delivery slots, a slow origin
 * with a backlog cannot take every slot, so a second origin's messages are delivered promptly;
 * and never more than the configured number of requests are in flight.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startQueue, startSink, waitFor } from './helpers.js';

test('one slow destination cannot take every delivery slot', async () => {
  let inFlight = 0;
  let maxInFlight = 0;
  const slow = await startSink(() => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    return { delayMs: 1500 };
  });
  const fast = await startSink();
  const q = await startQueue({ SVC_QUEUE_MAX_CONCURRENT_DELIVERIES: '4' });
  try {
    await q.client.batch(Array.from({ length: 12 }, (_, i) => ({ url: `${slow.url}/s${i}`, body: 'slow' })));
    await waitFor('slow origin busy', () => slow.requests.length >= 2);
    const t0 = Date.now();
    await q.client.batch(Array.from({ length: 6 }, (_, i) => ({ url: `${fast.url}/f${i}`, body: 'fast' })));
    await waitFor('fast origin served while the slow one is saturated', () => fast.requests.length >= 6, 5000);
    const took = Date.now() - t0;
    assert.ok(took < 1400, `fast origin waited ${took} ms behind the slow one`);
    assert.ok(slow.requests.length <= 2, `slow origin held ${slow.requests.length} slots (cap is half of 4)`);
    assert.ok(maxInFlight <= 2);
  } finally {
    await q.close();
    await slow.close();
    await fast.close();
  }
});

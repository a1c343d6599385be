/**
 * Queues end to end with the SDK against a real svc and
 * real local destinations: FIFO order and parallelism observed at the destination (request
 * start/end times), retries and callbacks holding the slot, pause/resume, upsert/get/list/delete,
 * lag, batch entries targeting a queue.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

let q: Awaited<ReturnType<typeof startQueue>>;
let sink: Sink;
/** Per path: [start, end] of each request (end = when the sink answered). */
const spans = new Map<string, [number, number][]>();

before(async () => {
  q = await startQueue();
  sink = await startSink((r) => {
    const u = new URL(r.url, 'http://x');
    const delay = Number(u.searchParams.get('delay') ?? 0);
    const fail = u.searchParams.get('failOnce') === '1' && sink.at(r.url).length === 1;
    const key = u.pathname;
    const arr = spans.get(key) ?? [];
    arr.push([r.time, r.time + delay]);
    spans.set(key, arr);
    return { status: fail ? 500 : 200, delayMs: delay };
  });
});
after(async () => {
  await q.close();
  await sink.close();
});

/** Max number of overlapping [start, end) spans. */
function maxOverlap(s: [number, number][]): number {
  const ev = s.flatMap(([a, b]) => [[a, 1], [b, -1]] as [number, number][]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let cur = 0;
  let max = 0;
  for (const [, d] of ev) max = Math.max(max, (cur += d));
  return max;
}

test('parallelism 1: FIFO, one at a time, the next waits for retries of the current', async () => {
  const queue = q.client.queue({ queueName: 'fifo-1' });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const failOnce = i === 1 ? '&failOnce=1' : '';
    const r = await queue.enqueueJSON({ url: `${sink.url}/fifo1?i=${i}&delay=80${failOnce}`, body: { i }, retries: 2, retryDelay: '100' });
    ids.push(r.messageId);
  }
  await waitFor('5 deliveries + 1 retry', () => (spans.get('/fifo1')?.length ?? 0) >= 6, 15_000);
  const order = sink.requests.filter((r) => r.url.startsWith('/fifo1')).map((r) => Number(new URL(r.url, 'http://x').searchParams.get('i')));
  assert.deepEqual(order, [0, 1, 1, 2, 3, 4], 'FIFO, and message 2 waits for the retry of message 1');
  assert.equal(maxOverlap(spans.get('/fifo1')!), 1);
  const info = await queue.get();
  assert.equal(info.parallelism, 1);
  assert.equal(info.name, 'fifo-1');
  await waitFor('lag 0', async () => (await queue.get()).lag === 0);
});

test('parallelism 3: at most 3 in flight, and more than 1', async () => {
  const queue = q.client.queue({ queueName: 'par-3' });
  await queue.upsert({ parallelism: 3 });
  // enqueued at once, each delivery held 500 ms: even a slow machine has 3 in flight together
  await Promise.all(Array.from({ length: 9 }, (_, i) => queue.enqueue({ url: `${sink.url}/par3?i=${i}&delay=500`, body: String(i) })));
  await waitFor('9 deliveries', () => (spans.get('/par3')?.length ?? 0) >= 9, 15_000);
  assert.equal(maxOverlap(spans.get('/par3')!), 3);
  const got = await queue.get();
  assert.equal(got.parallelism, 3);
});

test('the queue slot is held until the callback of the message is delivered', async () => {
  const queue = q.client.queue({ queueName: 'cb-1' });
  await queue.enqueueJSON({ url: `${sink.url}/cbq?i=0`, body: {}, callback: `${sink.url}/cbq-callback?delay=300` });
  await queue.enqueueJSON({ url: `${sink.url}/cbq?i=1`, body: {} });
  await waitFor('both', () => sink.requests.filter((r) => r.url.startsWith('/cbq?')).length === 2, 10_000);
  const cb = sink.requests.find((r) => r.url.startsWith('/cbq-callback'))!;
  const second = sink.requests.find((r) => r.url === '/cbq?i=1')!;
  assert.ok(second.time >= cb.time + 280, `second message started ${second.time - cb.time} ms after the callback request (callback takes 300 ms)`);
});

test('pause holds messages, resume delivers them; list, lag, delete; batch entry with a queue', async () => {
  const queue = q.client.queue({ queueName: 'pz' });
  await queue.upsert({ parallelism: 2, paused: true });
  await queue.enqueue({ url: `${sink.url}/pz?i=0`, body: 'a' });
  const [batchRes] = await q.client.batch([{ url: `${sink.url}/pz?i=1`, body: 'b', queueName: 'pz' }]);
  assert.ok((batchRes as { messageId: string }).messageId);
  await new Promise((r) => setTimeout(r, 400)); // negative check: nothing may arrive while paused
  assert.equal(sink.requests.filter((r) => r.url.startsWith('/pz')).length, 0);
  const doomed = await queue.enqueue({ url: `${sink.url}/pz?i=2`, body: 'c' });
  assert.equal((await q.client.messages.get(doomed.messageId)).queueName, 'pz');
  await q.client.messages.cancel(doomed.messageId); // a waiting message is cancelled at once
  let info = await queue.get();
  assert.equal(info.paused, true);
  assert.equal(info.lag, 2);
  await queue.resume();
  await waitFor('delivered after resume', () => sink.requests.filter((r) => r.url.startsWith('/pz')).length === 2);
  info = await queue.get();
  assert.equal(info.paused, false);
  await queue.pause();
  assert.equal((await queue.get()).paused, true);
  const names = (await queue.list()).map((x) => x.name);
  assert.ok(names.includes('pz') && names.includes('fifo-1'));
  await queue.delete();
  const res = await q.api('/v2/queues/pz');
  assert.equal(res.status, 404);
});

test('bad queue input: names, parallelism, unknown queues', async () => {
  let res = await q.api('/v2/queues', { method: 'POST', body: JSON.stringify({ queueName: 'bad name', parallelism: 1 }) });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error, /invalid queue name/);
  res = await q.api('/v2/queues', { method: 'POST', body: JSON.stringify({ queueName: 'ok', parallelism: 0 }) });
  assert.equal(res.status, 400);
  res = await q.api('/v2/queues', { method: 'POST', body: '{' });
  assert.equal(res.status, 400);
  res = await q.api('/v2/queues/nope/pause', { method: 'POST' });
  assert.equal(res.status, 404);
  res = await q.api(`/v2/enqueue/x y/${sink.url}/a`, { method: 'POST', body: 'x' });
  assert.equal(res.status, 400);
});

/**
 * Flow control end to end: rate and
 * parallelism measured at the destination, the exact 400 text for a malformed value, the
 * management endpoints reflected by `GET /v2/flowControl/{key}`, and waiting messages not
 * blocking other keys or plain messages.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startQueue, startQueueWithFailingOutcomes, startSink, waitFor, type Sink } from './helpers.js';

let q: Awaited<ReturnType<typeof startQueue>>;
let sink: Sink;

before(async () => {
  q = await startQueue();
  sink = await startSink((r) => {
    const d = new URL(r.url, 'http://x').searchParams.get('delay');
    return d ? { delayMs: Number(d) } : undefined;
  });
});
after(async () => {
  await q.close();
  await sink.close();
});

const times = (prefix: string) => sink.requests.filter((r) => r.url.startsWith(prefix)).map((r) => r.time).sort((a, b) => a - b);

test('rate: at most `rate` deliveries start in any period, measured at the destination', async () => {
  const n = 9;
  for (let i = 0; i < n; i++) {
    await q.client.publish({ url: `${sink.url}/rate?i=${i}`, body: 'x', flowControl: { key: 'rk', rate: 3, period: 1 } });
  }
  await waitFor('all delivered', () => times('/rate').length === n, 15_000);
  const t = times('/rate');
  // An attempt counts against the rate until one period after it ended, so the limit holds as
  // the destination sees it: any window of one period holds at most `rate` arrivals.
  let max = 0;
  for (let i = 0; i < t.length; i++) max = Math.max(max, t.filter((x) => x >= t[i] && x < t[i] + 1000).length);
  assert.equal(max, 3, `max arrivals per 1 s window: ${max}`);
  assert.ok(t[n - 1] - t[0] >= 2000, `9 messages at 3/s take at least 2 periods (took ${t[n - 1] - t[0]} ms)`);
});

test('parallelism: at most N in flight at the destination', async () => {
  const inflight = { cur: 0, max: 0 };
  const prev = sink.respond;
  sink.respond = (r, nth) => {
    if (!r.url.startsWith('/par')) return prev(r, nth);
    inflight.cur++;
    inflight.max = Math.max(inflight.max, inflight.cur);
    setTimeout(() => inflight.cur--, 200);
    return { delayMs: 200 };
  };
  for (let i = 0; i < 8; i++) {
    await q.client.publish({ url: `${sink.url}/par?i=${i}`, body: 'x', flowControl: { key: 'pk', parallelism: 2 } });
  }
  await waitFor('all delivered', () => times('/par').length === 8, 15_000);
  sink.respond = prev;
  assert.equal(inflight.max, 2);
});

test('malformed Flow-Control-Value: 400 with the exact hosted text', async () => {
  const res = await q.api(`/v2/publish/${sink.url}/x`, {
    method: 'POST',
    headers: { 'Upstash-Flow-Control-Key': 'k', 'Upstash-Flow-Control-Value': 'speed=3' },
    body: 'x',
  });
  assert.equal(res.status, 400);
  assert.deepEqual(await res.json(), { error: 'Upstash-Flow-Control-Value should be either rate=X or parallelism=Y, or both as comma-separated values' });
  const res2 = await q.api(`/v2/publish/${sink.url}/x`, { method: 'POST', headers: { 'Svc-Flow-Control-Key': 'k', 'Svc-Flow-Control-Value': '' }, body: 'x' });
  assert.equal(res2.status, 400);
});

test('pause / resume / pin / unpin / resetRate are visible in GET /v2/flowControl/{key}; a paused key blocks nobody else', async () => {
  const fc = q.client.flowControl;
  await q.client.publish({ url: `${sink.url}/mk?i=0`, body: 'x', flowControl: { key: 'mk', parallelism: 4, rate: 10, period: '1m' } });
  await waitFor('first', () => sink.requests.some((r) => r.url === '/mk?i=0'));
  let info = await fc.get('mk');
  assert.equal(info.flowControlKey, 'mk');
  assert.equal(info.parallelismMax, 4);
  assert.equal(info.rateMax, 10);
  assert.equal(info.ratePeriod, 60);
  assert.equal(info.rateCount, 1);
  assert.equal(info.isPaused, false);
  await fc.pause('mk');
  assert.equal((await fc.get('mk')).isPaused, true);
  for (let i = 1; i <= 3; i++) await q.client.publish({ url: `${sink.url}/mk?i=${i}`, body: 'x', flowControl: { key: 'mk', parallelism: 4, rate: 10, period: '1m' } });
  // other keys and plain messages to the same destination still flow while mk waits
  await q.client.publish({ url: `${sink.url}/mk-other`, body: 'x', flowControl: { key: 'other', parallelism: 1 } });
  await q.client.publish({ url: `${sink.url}/mk-plain`, body: 'x' });
  await waitFor('other key + plain delivered', () => sink.at('/mk-other').length === 1 && sink.at('/mk-plain').length === 1);
  info = await fc.get('mk');
  assert.equal(info.waitListSize, 3);
  assert.equal(sink.requests.filter((r) => r.url.startsWith('/mk?')).length, 1);
  await fc.pin('mk', { parallelism: 1, rate: 2, period: 5 });
  info = await fc.get('mk');
  assert.equal(info.isPinnedParallelism, true);
  assert.equal(info.isPinnedRate, true);
  assert.equal(info.parallelismMax, 1);
  assert.equal(info.rateMax, 2);
  assert.equal(info.ratePeriod, 5);
  assert.equal(info.rateCount, 0, 'pin resets the rate state');
  await fc.resume('mk');
  await waitFor('2 of 3 released (pinned rate 2 per 5 s)', async () => (await fc.get('mk')).waitListSize === 1);
  assert.equal((await fc.get('mk')).rateCount, 2);
  await fc.resetRate('mk');
  await waitFor('last one released after resetRate', async () => (await fc.get('mk')).waitListSize === 0);
  await fc.unpin('mk', { parallelism: true, rate: true });
  info = await fc.get('mk');
  assert.equal(info.isPinnedParallelism, false);
  assert.equal(info.isPinnedRate, false);
  assert.equal(info.parallelismMax, 4);
  await waitFor('all mk delivered', () => sink.requests.filter((r) => r.url.startsWith('/mk?')).length === 4);
  const list = (await (await q.api('/v2/flowControl')).json()) as { flowControlKey: string }[];
  assert.ok(list.some((k) => k.flowControlKey === 'mk') && list.some((k) => k.flowControlKey === 'other'));
  const g = await fc.getGlobalParallelism();
  assert.equal(g.parallelismMax, 256);
  assert.equal(typeof g.parallelismCount, 'number');
  assert.equal((await q.api('/v2/flowControl/unknown-key')).status, 404);
});

test('rate: an attempt whose outcome could not be recorded still ends (the running count does not leak)', async () => {
  // no second try of the write: the message stays leased (delivered again when the lease expires)
  const q2 = await startQueueWithFailingOutcomes(1, []);
  try {
    for (let i = 0; i < 3; i++) await q2.client.publish({ url: `${sink.url}/leak?i=${i}`, body: 'x', flowControl: { key: 'leak', rate: 1, period: 1 } });
    // the first attempt's DELIVERED record fails; an attempt that never "ended" would hold the
    // key's one start per second forever, and the others would never start
    await waitFor('the other two delivered', () => sink.requests.filter((r) => r.url.startsWith('/leak?')).length === 3, 10_000);
    assert.equal(q2.failures(), 1);
  } finally {
    await q2.close();
  }
});

test('resetRate while a delivery runs: rateCount is 0 at once and the next message is admitted in the new window', async () => {
  const fc = q.client.flowControl;
  const prev = sink.respond;
  // the first delivery is answered only after 20 s: it runs through the whole test
  sink.respond = (r, nth) => (r.url === '/reset-run?i=0' ? { delayMs: 20_000 } : prev(r, nth));
  try {
    const publish = (i: number) => q.client.publish({ url: `${sink.url}/reset-run?i=${i}`, body: 'x', timeout: '60s', flowControl: { key: 'reset-run', rate: 1, period: '1h' } });
    await publish(0);
    await waitFor('first delivery running', () => sink.at('/reset-run?i=0').length === 1, 15_000);
    assert.equal((await fc.get('reset-run')).rateCount, 1);
    await fc.resetRate('reset-run');
    assert.equal((await fc.get('reset-run')).rateCount, 0, 'the running attempt no longer counts');
    // the new window admits the next message although the first one still runs
    await publish(1);
    await waitFor('second delivered after resetRate', () => sink.at('/reset-run?i=1').length === 1, 15_000);
    assert.equal((await fc.get('reset-run')).rateCount, 1, 'the new window holds only the message admitted after the reset');
  } finally {
    sink.respond = prev;
  }
});

test('flow-control key with parallelism only: the message and its key report the default period (1 s)', async () => {
  const { messageId } = await q.client.publish({ url: `${sink.url}/period-only`, body: 'x', delay: 3600, flowControl: { key: 'par-only', parallelism: 3 } });
  const m = await q.client.messages.get(messageId);
  assert.equal(m.flowControlKey, 'par-only');
  assert.equal((m as { period?: number }).period, 1);
  assert.equal((await q.client.flowControl.get('par-only')).ratePeriod, 1);
  await q.client.messages.cancel(messageId);
});

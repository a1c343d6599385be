/**
 * Retries, DLQ, callbacks and logs end-to-end with the official SDK against a real svc and real
 * local destinations: custom retry delay schedule, Retry-After, 489 non-retryable, DLQ with the
 * response captured, every DLQ and log filter, cursor paging, DLQ delete/retry (single and bulk),
 * callback and failure-callback payloads.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startQueue, startQueueWithFailingOutcomes, startSink, waitFor, type Responder, type Sink } from './helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('queue retries, DLQ, callbacks and logs (SDK end-to-end)', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let sink: Sink;
  before(async () => {
    q = await startQueue();
    sink = await startSink((r, n): ReturnType<Responder> => {
      const p = r.url.split('?')[0];
      if (p.startsWith('/fail')) return { status: 500, headers: { 'x-why': 'broken' }, body: 'server exploded' };
      if (p.startsWith('/s4')) return { status: 404, body: 'nope' };
      if (p.startsWith('/bin')) return { status: 503, body: Buffer.from([0xff, 0xfe]) };
      if (p === '/ratelimited' && n === 1) return { status: 429, headers: { 'retry-after': '1' }, body: 'slow down' };
      if (p === '/ratereset' && n === 1) return { status: 503, headers: { 'x-ratelimit-reset': '0.4' } };
      if (p === '/nonretry') return { status: 489, headers: { 'upstash-nonretryable-error': 'true' }, body: 'never again' };
      if (p === '/flaky' && n <= 1) return { status: 500, body: 'first fails' };
      if (p === '/hang') return { delayMs: 5000 };
      if (p === '/redirect') return { status: 302, headers: { location: '/elsewhere' } };
      if (p.startsWith('/dlqretry') && n === 1) return { status: 500, body: 'first fails' };
      return undefined;
    });
  });
  after(async () => {
    await q.close();
    await sink.close();
  });

  const dlqFor = (messageId: string) =>
    waitFor(`DLQ entry of ${messageId}`, async () => (await q.client.dlq.listMessages({ filter: { messageId } } as never)).messages[0]);

  test('custom retry delay expression: schedule, Retried header, callbacks each attempt, failure callback, DLQ', async () => {
    const res = await q.client.publish({
      url: `${sink.url}/fail-sched`,
      body: 'payload',
      retries: 2,
      retryDelay: '300 * (retried + 1)',
      callback: `${sink.url}/cb-sched`,
      failureCallback: `${sink.url}/fcb-sched`,
      headers: { 'X-Src': 's' },
    });
    const entry = (await dlqFor(res.messageId)) as Json;
    const attempts = sink.at('/fail-sched');
    assert.equal(attempts.length, 3);
    assert.deepEqual(attempts.map((a) => a.headers['upstash-retried']), ['0', '1', '2']);
    const gap1 = attempts[1].time - attempts[0].time;
    const gap2 = attempts[2].time - attempts[1].time;
    assert.ok(gap1 >= 280 && gap1 < 3000, `first retry after ~300 ms, got ${gap1}`);
    assert.ok(gap2 >= 580 && gap2 < 3000, `second retry after ~600 ms, got ${gap2}`);

    assert.equal(entry.responseStatus, 500);
    assert.equal(entry.responseBody, 'server exploded');
    assert.deepEqual(entry.responseHeader['X-Why'], ['broken']);
    assert.equal(entry.url, `${sink.url}/fail-sched`);
    assert.equal(entry.body, 'payload');
    assert.deepEqual(entry.header['X-Src'], ['s']);
    assert.match(entry.dlqId, /^\d+-\d+$/);
    assert.equal(entry.maxRetries, 2);

    const cbs = await waitFor('3 callbacks', () => (sink.at('/cb-sched').length >= 3 ? sink.at('/cb-sched') : undefined));
    const payloads = cbs.map((c) => JSON.parse(c.body.toString()) as Json);
    assert.deepEqual(payloads.map((p) => p.retried).sort(), [0, 1, 2]);
    for (const p of payloads) {
      assert.equal(p.status, 500);
      assert.equal(Buffer.from(p.body, 'base64').toString(), 'server exploded');
      assert.equal(p.sourceMessageId, res.messageId);
      assert.equal(p.maxRetries, 2);
      assert.equal(p.url, `${sink.url}/fail-sched`);
      assert.equal(p.method, 'POST');
      assert.equal(Buffer.from(p.sourceBody, 'base64').toString(), 'payload');
      assert.deepEqual(p.sourceHeader['X-Src'], ['s']);
    }
    // Callbacks are signed messages of their own.
    const cb = cbs[0];
    assert.match(cb.headers['upstash-message-id'] as string, /^msg_/);
    assert.notEqual(cb.headers['upstash-message-id'], res.messageId);
    assert.equal(await q.receiver().verify({ signature: cb.headers['upstash-signature'] as string, body: cb.body.toString(), url: `${sink.url}/cb-sched` }), true);

    const [fcb] = await waitFor('failure callback', () => (sink.at('/fcb-sched').length ? sink.at('/fcb-sched') : undefined));
    const fp = JSON.parse(fcb.body.toString()) as Json;
    assert.equal(fp.dlqId, entry.dlqId);
    assert.equal(fp.status, 500);
    assert.equal(fp.retried, 2);
    assert.equal(fp.sourceMessageId, res.messageId);
    assert.equal(Buffer.from(fp.body, 'base64').toString(), 'server exploded');

    const logs = await q.client.logs({ filter: { messageId: res.messageId } } as never);
    assert.deepEqual(
      logs.logs.map((l) => l.state).reverse(),
      ['CREATED', 'ACTIVE', 'ERROR', 'RETRY', 'ACTIVE', 'ERROR', 'RETRY', 'ACTIVE', 'ERROR', 'FAILED'],
    );
    const err = logs.logs.find((l) => l.state === 'ERROR') as Json;
    assert.equal(err.responseStatus, 500);
    assert.equal(Buffer.from(err.responseBody, 'base64').toString(), 'server exploded');
    const retry = logs.logs.find((l) => l.state === 'RETRY') as Json;
    assert.ok(retry.nextDeliveryTime > retry.time);
  });

  test('Retry-After and X-RateLimit-Reset from the destination set the next attempt', async () => {
    await q.client.publish({ url: `${sink.url}/ratelimited`, body: 'x', retryDelay: '60000' });
    await q.client.publish({ url: `${sink.url}/ratereset`, body: 'x', retryDelay: '60000' });
    const [a, b] = await waitFor('retry after Retry-After', () => (sink.at('/ratelimited').length >= 2 ? sink.at('/ratelimited') : undefined), 8000);
    assert.ok(b.time - a.time >= 950, `waited ${b.time - a.time} ms`);
    const [c, d] = await waitFor('retry after X-RateLimit-Reset', () => (sink.at('/ratereset').length >= 2 ? sink.at('/ratereset') : undefined), 8000);
    assert.ok(d.time - c.time >= 350, `waited ${d.time - c.time} ms`);
  });

  test('489 with Upstash-NonRetryable-Error fails at once; a later 2xx delivers', async () => {
    const res = await q.client.publish({ url: `${sink.url}/nonretry`, body: 'x', retries: 3, retryDelay: '10' });
    const entry = (await dlqFor(res.messageId)) as Json;
    assert.equal(entry.responseStatus, 489);
    assert.equal(sink.at('/nonretry').length, 1);
    const ok = await q.client.publish({ url: `${sink.url}/flaky`, body: 'x', retries: 3, retryDelay: '10' });
    await waitFor('flaky delivered', async () => (await q.client.logs({ filter: { messageId: ok.messageId, state: 'DELIVERED' } } as never)).logs.length);
    assert.equal(sink.at('/flaky').length, 2);
  });

  test('an attempt past Upstash-Timeout fails; 3xx counts as a failure', async () => {
    const t0 = Date.now();
    const res = await q.client.publish({ url: `${sink.url}/hang`, body: 'x', retries: 0, timeout: '1s' });
    const entry = (await dlqFor(res.messageId)) as Json;
    assert.ok(Date.now() - t0 < 4500, 'did not wait for the destination');
    assert.match(entry.error, /timeout/);
    assert.equal(entry.responseStatus, undefined);
    const redirected = await q.client.publish({ url: `${sink.url}/redirect`, body: 'x', retries: 0 });
    const r = (await dlqFor(redirected.messageId)) as Json;
    assert.equal(r.responseStatus, 302);
    assert.equal(sink.at('/elsewhere').length, 0, 'redirects are not followed');
  });

  test('DLQ: every filter, cursor paging, get, delete, bulk delete, retry, bulk retry', async () => {
    const t0 = Date.now();
    const pub = (path: string, label: string) => q.client.publish({ url: `${sink.url}${path}`, body: path, retries: 0, label });
    const ids = [
      (await pub('/fail-f1', 'red')).messageId,
      (await pub('/fail-f2', 'blue')).messageId,
      (await pub('/s4-f3', 'red')).messageId,
      (await pub('/s4-f4', 'green')).messageId,
      (await pub('/bin-f5', 'green')).messageId,
    ];
    for (const id of ids) await dlqFor(id);
    const t1 = Date.now();
    const list = async (query: string) => (await (await q.api(`/v2/dlq?fromDate=${t0}&${query}`)).json()) as { messages: Json[]; cursor?: string };
    const idsOf = (r: { messages: Json[] }) => r.messages.map((m) => m.messageId).sort();

    assert.deepEqual(idsOf(await list('')), [...ids].sort());
    assert.deepEqual(idsOf(await list('label=red')), [ids[0], ids[2]].sort());
    assert.deepEqual(idsOf(await list('label=red,blue')), [ids[0], ids[1], ids[2]].sort());
    assert.deepEqual(idsOf(await list('label=red&label=green')), [ids[0], ids[2], ids[3], ids[4]].sort());
    assert.deepEqual(idsOf(await list('responseStatus=404')), [ids[2], ids[3]].sort());
    assert.deepEqual(idsOf(await list('responseStatus=404&label=green')), [ids[3]]);
    assert.deepEqual(idsOf(await list(`url=${encodeURIComponent(`${sink.url}/fail-f2`)}`)), [ids[1]]);
    assert.deepEqual(idsOf(await list(`messageId=${ids[4]}`)), [ids[4]]);
    assert.deepEqual(idsOf(await list('callerIp=127.0.0.1&label=blue')), [ids[1]]);
    assert.deepEqual(idsOf(await list('callerIp=10.0.0.1')), []);
    assert.deepEqual(idsOf(await list('topicName=nope')), []);
    assert.deepEqual(idsOf(await list('queueName=nope')), []);
    assert.deepEqual(idsOf(await list('scheduleId=nope')), []);
    assert.deepEqual(idsOf(await list('flowControlKey=nope')), []);
    assert.deepEqual(idsOf(await list(`toDate=${t0 - 1}`)), []);
    assert.deepEqual(idsOf(await list(`toDate=${t1}`)).length, 5);
    const bin = (await list(`messageId=${ids[4]}`)).messages[0];
    assert.equal(bin.responseBodyBase64, '//4=', 'non-UTF-8 response bodies come as base64');
    assert.equal(bin.responseBody, undefined);
    assert.equal(bin.responseStatus, 503);

    // Order and cursor paging over three pages (the SDK also pages the same way).
    const latest = await list('order=latestFirst&count=5');
    const earliest = await list('order=earliestFirst&count=5');
    assert.deepEqual(latest.messages.map((m) => m.messageId), [...earliest.messages.map((m) => m.messageId)].reverse());
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await q.client.dlq.listMessages({ count: 2, cursor, filter: { fromDate: t0 } } as never);
      seen.push(...page.messages.map((m) => m.messageId));
      cursor = page.cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(seen.sort(), [...ids].sort());
    assert.ok(!('cursor' in (await list('count=100'))), 'no cursor on the last page');

    // get / delete / bulk delete
    const e0 = (await list(`messageId=${ids[0]}`)).messages[0];
    const got = (await (await q.api(`/v2/dlq/${e0.dlqId}`)).json()) as Json;
    assert.equal(got.messageId, ids[0]);
    await q.client.dlq.delete(e0.dlqId);
    await assert.rejects(q.client.dlq.delete(e0.dlqId));
    const e1 = (await list(`messageId=${ids[1]}`)).messages[0];
    assert.deepEqual(await q.client.dlq.delete([e1.dlqId]), { deleted: 1 });
    const oldForm = await q.api('/v2/dlq', { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ dlqIds: ['nope-1'] }) });
    assert.deepEqual(await oldForm.json(), { deleted: 0 });
    const byFilter = await q.client.dlq.delete({ filter: { label: 'green', fromDate: t0 } } as never);
    assert.equal(byFilter.deleted, 2);
    assert.equal(byFilter.cursor, undefined);
    assert.deepEqual(idsOf(await list('')), [ids[2]]);

    // retry (single + bulk): a new message, the entry leaves the DLQ
    const r1 = await q.client.publish({ url: `${sink.url}/dlqretry-a`, body: 'again', retries: 0 });
    const r2 = await q.client.publish({ url: `${sink.url}/dlqretry-b`, body: 'again', retries: 0 });
    const d1 = (await dlqFor(r1.messageId)) as Json;
    const d2 = (await dlqFor(r2.messageId)) as Json;
    const single = await q.api(`/v2/dlq/retry/${d1.dlqId}`, { method: 'POST', headers: { 'Upstash-Retries': '0' } });
    assert.equal(single.status, 201);
    const { messageId: newId } = (await single.json()) as { messageId: string };
    assert.notEqual(newId, r1.messageId);
    await waitFor('retried delivery', () => sink.at('/dlqretry-a').length >= 2);
    assert.equal((await q.api(`/v2/dlq/${d1.dlqId}`)).status, 404);
    const bulk = await q.client.dlq.retry([d2.dlqId]);
    assert.equal(bulk.responses.length, 1);
    assert.equal(bulk.cursor, undefined);
    await waitFor('bulk retried delivery', () => sink.at('/dlqretry-b').length >= 2);
    await assert.rejects(q.client.dlq.delete(d2.dlqId));
    assert.equal((await q.api('/v2/dlq/retry/missing-0', { method: 'POST' })).status, 404);
  });

  test('logs: /v2/events and /v2/logs, every filter, IN_PROGRESS, order, cursor', async () => {
    const t0 = Date.now();
    const a = await q.client.publish({ url: `${sink.url}/log-a`, body: 'a', label: 'logs-x' });
    const b = await q.client.publish({ url: `${sink.url}/fail-log-b`, body: 'b', label: 'logs-y', retries: 1, retryDelay: '60000' });
    await waitFor('a delivered', async () => (await q.client.logs({ filter: { messageId: a.messageId, state: 'DELIVERED' } } as never)).logs.length);
    await waitFor('b waiting for retry', async () => (await q.client.logs({ filter: { messageId: b.messageId, state: 'RETRY' } } as never)).logs.length);
    const ev = async (query: string) => (await (await q.api(`/v2/events?fromDate=${t0}&${query}`)).json()) as { events: Json[]; cursor?: string };
    const states = (r: { events: Json[] }) => r.events.map((e) => `${e.messageId === a.messageId ? 'a' : 'b'}:${e.state}`);

    assert.deepEqual(states(await ev(`messageId=${a.messageId}&order=earliestFirst`)), ['a:CREATED', 'a:ACTIVE', 'a:DELIVERED']);
    assert.deepEqual(states(await ev(`messageIds=${b.messageId}&state=IN_PROGRESS&order=earliestFirst`)), ['b:ACTIVE', 'b:ERROR', 'b:RETRY']);
    assert.deepEqual(states(await ev('label=logs-x&state=DELIVERED')), ['a:DELIVERED']);
    assert.deepEqual(states(await ev(`url=${encodeURIComponent(`${sink.url}/fail-log-b`)}&state=CREATED`)), ['b:CREATED']);
    assert.deepEqual(states(await ev('path=/log-a&state=CREATED')), ['a:CREATED']);
    assert.deepEqual(states(await ev(`host=${new URL(sink.url).host}&label=logs-y&state=ERROR`)), ['b:ERROR']);
    assert.deepEqual(states(await ev('callerIp=127.0.0.1&label=logs-x&state=CREATED')), ['a:CREATED']);
    assert.deepEqual(states(await ev('label=logs-x&state=CREATED,DELIVERED&order=earliestFirst')), ['a:CREATED', 'a:DELIVERED']);
    assert.deepEqual(states(await ev('topicName=none')), []);
    assert.deepEqual(states(await ev('queueName=none')), []);
    assert.deepEqual(states(await ev('scheduleId=none')), []);
    assert.deepEqual(states(await ev(`toDate=${t0 - 1}`)), []);
    const latest = await ev('label=logs-x');
    assert.equal(latest.events[0].state, 'DELIVERED', 'latestFirst by default');
    const entry = latest.events[0];
    assert.equal(Buffer.from(entry.body, 'base64').toString(), 'a');
    assert.equal(entry.url, `${sink.url}/log-a`);
    assert.equal(entry.method, 'POST');
    assert.equal(entry.maxRetries, 3);
    assert.deepEqual(entry.labels, ['logs-x']);
    const err = (await ev(`messageId=${b.messageId}&state=ERROR`)).events[0];
    assert.equal(err.responseStatus, 500);
    assert.equal(Buffer.from(err.responseBody, 'base64').toString(), 'server exploded');
    assert.ok(err.error);

    // Cursor paging: 6 entries for a+b in CREATED/ACTIVE..., count=2 pages through them.
    const all = await ev('label=logs-x,logs-y&count=1000');
    assert.ok(!('cursor' in all));
    const seen: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await q.client.logs({ count: 2, cursor, filter: { label: ['logs-x', 'logs-y'], fromDate: t0 } } as never);
      seen.push(...page.logs.map((l) => l.time));
      cursor = page.cursor;
    } while (cursor);
    assert.equal(seen.length, all.events.length);
    const logsPath = (await (await q.api(`/v2/logs?fromDate=${t0}&label=logs-x`)).json()) as Json;
    assert.equal(logsPath.logs.length, 3);
    assert.equal(logsPath.events, undefined);
    const big = (await (await q.api('/v2/logs?count=5000')).json()) as Json;
    assert.ok(big.logs.length <= 100);
  });
});

test('a failed write of a delivery outcome is written again: the message ends DELIVERED, delivered once', async () => {
  const sink = await startSink();
  const q = await startQueueWithFailingOutcomes(2, [20, 20, 20]); // two SQLITE_FULL, then the write succeeds
  try {
    const { messageId } = await q.client.publish({ url: `${sink.url}/once`, body: 'x' });
    const states = async () => ((await (await q.api(`/v2/logs?messageId=${messageId}`)).json()) as { logs: { state: string }[] }).logs.map((l) => l.state);
    await waitFor('DELIVERED logged', async () => (await states()).includes('DELIVERED'));
    assert.equal(q.failures(), 2);
    assert.deepEqual((await states()).reverse(), ['CREATED', 'ACTIVE', 'DELIVERED']);
    assert.equal(sink.requests.filter((r) => r.url === '/once').length, 1, 'not delivered again');
    await assert.rejects(q.client.messages.get(messageId), /not found/i, 'no longer pending');
  } finally {
    await q.close();
    await sink.close();
  }
});

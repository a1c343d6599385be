/**
 * URL groups end to end: CRUD through the SDK, name
 * rules, and fan-out where only the failing endpoint retries and reaches the DLQ.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

let q: Awaited<ReturnType<typeof startQueue>>;
let sink: Sink;

before(async () => {
  q = await startQueue();
  sink = await startSink((r) => (r.url.startsWith('/bad') ? { status: 500, body: 'boom' } : undefined));
});
after(async () => {
  await q.close();
  await sink.close();
});

test('URL group CRUD with the SDK', async () => {
  const g = q.client.urlGroups;
  await g.addEndpoints({ name: 'grp.one_1-x', endpoints: [{ url: `${sink.url}/a`, name: 'a' }, { url: `${sink.url}/b` }] });
  await g.addEndpoints({ name: 'grp.one_1-x', endpoints: [{ url: `${sink.url}/c`, name: 'c' }, { url: `${sink.url}/b` }] });
  let got = await g.get('grp.one_1-x');
  assert.equal(got.name, 'grp.one_1-x');
  assert.deepEqual(got.endpoints, [{ name: 'a', url: `${sink.url}/a` }, { url: `${sink.url}/b` }, { name: 'c', url: `${sink.url}/c` }]);
  assert.equal(typeof got.createdAt, 'number');
  await g.removeEndpoints({ name: 'grp.one_1-x', endpoints: [{ name: 'a' }, { url: `${sink.url}/b` }] });
  got = await g.get('grp.one_1-x');
  assert.deepEqual(got.endpoints, [{ name: 'c', url: `${sink.url}/c` }]);
  assert.ok((await g.list()).some((x) => x.name === 'grp.one_1-x'));
  await g.removeEndpoints({ name: 'grp.one_1-x', endpoints: [{ name: 'c' }] });
  await assert.rejects(g.get('grp.one_1-x'), /not found/); // deleted when empty
  await g.addEndpoints({ name: 'gone', endpoints: [{ url: `${sink.url}/a` }] });
  await g.delete('gone');
  await assert.rejects(g.get('gone'), /not found/);
  await assert.rejects(g.delete('gone'), /not found/);
});

test('URL group names and bodies are validated', async () => {
  let res = await q.api('/v2/topics/bad%20name/endpoints', { method: 'POST', body: JSON.stringify({ endpoints: [{ url: `${sink.url}/a` }] }) });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error, /invalid URL group name/);
  res = await q.api('/v2/topics/ok/endpoints', { method: 'POST', body: JSON.stringify({ endpoints: [] }) });
  assert.equal(res.status, 400);
  res = await q.api('/v2/topics/ok/endpoints', { method: 'POST', body: JSON.stringify({ endpoints: [{ url: 'ftp://x' }] }) });
  assert.equal(res.status, 400);
  res = await q.api('/v2/publish/no-such-group', { method: 'POST', body: 'x' });
  assert.equal(res.status, 400);
});

test('fan-out: one message per endpoint; only the failing endpoint retries and reaches the DLQ', async () => {
  await q.client.urlGroups.addEndpoints({
    name: 'fan',
    endpoints: [{ url: `${sink.url}/ok1`, name: 'e1' }, { url: `${sink.url}/bad`, name: 'e2' }, { url: `${sink.url}/ok3`, name: 'e3' }],
  });
  const res = (await q.client.publishJSON({ urlGroup: 'fan', body: { hi: 1 }, retries: 2, retryDelay: '50' })) as unknown as { messageId: string; url: string }[];
  assert.ok(Array.isArray(res));
  assert.equal(res.length, 3);
  assert.equal(new Set(res.map((r) => r.messageId)).size, 3);
  assert.deepEqual(res.map((r) => r.url), [`${sink.url}/ok1`, `${sink.url}/bad`, `${sink.url}/ok3`]);
  const dlq = await waitFor('DLQ entry', async () => {
    const l = await q.client.dlq.listMessages({ filter: { urlGroup: 'fan' } as never });
    return l.messages.length ? l.messages : undefined;
  });
  assert.equal(dlq.length, 1);
  assert.equal(dlq[0].url, `${sink.url}/bad`);
  assert.equal(dlq[0].urlGroup ?? (dlq[0] as unknown as { topicName: string }).topicName, 'fan');
  assert.equal(sink.at('/bad').length, 3, 'the failing endpoint got 1 + 2 retries');
  assert.equal(sink.at('/ok1').length, 1);
  assert.equal(sink.at('/ok3').length, 1);
  const ok1 = sink.at('/ok1')[0];
  assert.equal(ok1.headers['upstash-topic-name'], 'fan');
  assert.equal(ok1.headers['upstash-endpoint-name'], 'e1');
  // batch to a URL group returns an array for that entry
  const batch = (await q.client.batchJSON([{ urlGroup: 'fan', body: { b: 1 } }, { url: `${sink.url}/ok1`, body: {} }])) as unknown[];
  assert.ok(Array.isArray(batch[0]) && (batch[0] as unknown[]).length === 3);
  assert.ok(!Array.isArray(batch[1]));
});

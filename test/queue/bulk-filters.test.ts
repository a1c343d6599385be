/**
 * Filter fields of the bulk and list endpoints: a field the endpoint does not know (a typo such as
 * `?labeel=x`) is refused with 400 and nothing is deleted, retried or cancelled; every filter field
 * the `@upstash/qstash` and `@upstash/workflow` SDKs send is still accepted.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('bulk endpoints refuse unknown filter fields', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let sink: Sink;
  let workflow: WorkflowClient;
  const t0 = Date.now();
  before(async () => {
    q = await startQueue();
    sink = await startSink(() => ({ status: 500, body: 'down' }));
    workflow = new WorkflowClient({ baseUrl: q.url, token: q.token });
  });
  after(async () => {
    await q.close();
    await sink.close();
  });

  const dlqCount = async () => ((await (await q.api(`/v2/dlq?fromDate=${t0}`)).json()) as { messages: Json[] }).messages.length;
  const expect400 = async (path: string, method: string, field: string) => {
    const r = await q.api(path, { method });
    const body = (await r.json()) as Json;
    assert.equal(r.status, 400, `${method} ${path}: ${JSON.stringify(body)}`);
    assert.ok(String(body.error).includes(field), `${method} ${path}: ${body.error}`);
  };

  test('DLQ delete and retry with a misspelt field leave the DLQ untouched', async () => {
    for (let i = 0; i < 3; i++) await q.client.publish({ url: `${sink.url}/dead-${i}`, body: 'x', retries: 0, label: 'green' });
    await waitFor('3 DLQ entries', async () => (await dlqCount()) === 3, 30_000);
    await expect400('/v2/dlq?labeel=green', 'DELETE', 'labeel');
    await expect400('/v2/dlq?label=green&urll=x', 'DELETE', 'urll');
    await expect400('/v2/dlq/retry?labeel=green', 'POST', 'labeel');
    await expect400('/v2/dlq?count=1&lable=green', 'GET', 'lable');
    assert.equal(await dlqCount(), 3);
  });

  test('every DLQ filter field the qstash SDK sends is accepted', async () => {
    const filter = {
      messageId: 'nope', url: 'http://nope', urlGroup: 'nope', queueName: 'nope', scheduleId: 'nope', label: 'nope',
      flowControlKey: 'nope', callerIp: '10.9.9.9', responseStatus: 500, fromDate: t0, toDate: Date.now() + 60_000,
    };
    assert.deepEqual((await q.client.dlq.listMessages({ filter, count: 5 })).messages, []);
    assert.deepEqual(await q.client.dlq.delete({ filter, count: 5 }), { deleted: 0 });
    assert.deepEqual((await q.client.dlq.retry({ filter })).responses, []);
    assert.equal(await dlqCount(), 3);
    assert.deepEqual(await q.client.dlq.delete({ filter: { label: 'green', fromDate: t0 } }), { deleted: 3 });
  });

  test('message cancel with a misspelt field cancels nothing; every SDK filter field is accepted', async () => {
    const ids = await Promise.all([0, 1].map(async (i) => (await q.client.publish({ url: `${sink.url}/later-${i}`, body: 'x', delay: 3600, label: 'blue' })).messageId));
    await expect400('/v2/messages?labl=blue', 'DELETE', 'labl');
    for (const id of ids) assert.equal(((await (await q.api(`/v2/messages/${id}`)).json()) as Json).messageId, id);
    const none = {
      url: 'http://nope', urlGroup: 'nope', queueName: 'nope', scheduleId: 'nope', label: 'nope', flowControlKey: 'nope',
      callerIp: '10.9.9.9', host: 'nope', path: '/nope', fromDate: t0, toDate: Date.now() + 60_000,
    };
    assert.deepEqual(await q.client.messages.cancel({ filter: none }), { cancelled: 0 });
    assert.deepEqual(await q.client.messages.cancel({ filter: { label: 'blue' } }), { cancelled: 2 });
  });

  test('messages.cancel({all: true}) sends count=100 and still cancels every pending message', async () => {
    const batch = Array.from({ length: 150 }, (_, i) => ({ url: `${sink.url}/bulk-${i}`, body: 'x', delay: 3600, label: 'all' }));
    const published = await q.client.batchJSON(batch);
    assert.equal(published.length, 150);
    assert.deepEqual(await q.client.messages.cancel({ all: true }), { cancelled: 150 });
  });

  test('logs and events with a misspelt field are refused; every SDK filter field is accepted', async () => {
    await expect400('/v2/logs?stat=DELIVERED', 'GET', 'stat');
    await expect400('/v2/events?messageid=x', 'GET', 'messageid');
    const filter = {
      url: 'http://nope', urlGroup: 'nope', queueName: 'nope', scheduleId: 'nope', label: 'nope', flowControlKey: 'nope',
      callerIp: '10.9.9.9', host: 'nope', path: '/nope', state: 'DELIVERED' as const, fromDate: t0, toDate: Date.now() + 60_000,
    };
    assert.deepEqual((await q.client.logs({ filter, count: 10 })).logs, []);
    assert.deepEqual((await q.client.logs({ messageIds: ['nope'] })).logs, []);
  });

  test('workflow run cancel, workflow DLQ and workflow logs: misspelt and unsupported fields refused, SDK fields accepted', async () => {
    await expect400('/v2/workflows/runs?workflowUrll=http://x', 'DELETE', 'workflowUrll');
    await expect400('/v2/workflows/runs?host=example.com', 'DELETE', 'host');
    await expect400('/v2/workflows/dlq?labeel=x', 'DELETE', 'labeel');
    await expect400('/v2/workflows/dlq/restart?labeel=x', 'POST', 'labeel');
    await expect400('/v2/workflows/logs?stat=RUN_STARTED', 'GET', 'stat');
    await expect400('/v2/dlq?source=workflow&labeel=x', 'GET', 'labeel');
    const universal = { label: 'nope', flowControlKey: 'nope', callerIp: '10.9.9.9', fromDate: t0, toDate: Date.now() + 60_000 };
    assert.deepEqual(await workflow.cancel({ filter: { ...universal, workflowUrl: 'http://nope' } }), { cancelled: 0 });
    assert.deepEqual(await workflow.cancel({ filter: { workflowUrlStartingWith: 'http://nope' } }), { cancelled: 0 });
    const dlqFilter = { ...universal, workflowUrl: 'http://nope', workflowRunId: 'wfr_nope', workflowCreatedAt: 1, failureFunctionState: 'CALLBACK_FAIL' };
    assert.equal((await workflow.dlq.delete({ filter: dlqFilter })).deleted, 0);
    assert.deepEqual((await workflow.dlq.list({ filter: { ...dlqFilter, url: 'http://nope' } })).messages, []);
    assert.deepEqual((await workflow.dlq.restart({ filter: dlqFilter })).workflowRuns, []);
    const logs = await workflow.logs({ filter: { ...universal, workflowUrl: 'http://nope', workflowRunId: 'wfr_nope', workflowCreatedAt: 1, state: 'RUN_SUCCESS', messageId: 'nope' } });
    assert.deepEqual(logs.runs, []);
    assert.deepEqual((await workflow.logs({ workflowRunId: 'wfr_nope', state: 'RUN_SUCCESS', workflowUrl: 'http://nope', label: 'nope', workflowCreatedAt: 1 })).runs, []);
  });
});

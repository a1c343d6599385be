/**
 * `count` of the bulk actions, through the SDKs (both send `count` = 100 when the caller names
 * none, `DEFAULT_BULK_COUNT`): DLQ delete and retry, the workflow DLQ's delete, restart and resume,
 * and workflow-run cancel process at most `count` entries per call and answer a `cursor` while
 * more match (restart/resume at most 50 runs per call); message cancel processes every matching
 * message whatever `count` says, as `@upstash/qstash` 2.12 documents ("the legacy `count` option
 * is ignored by the server") and its suite checks.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient, WorkflowNonRetryableError } from '@upstash/workflow';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';
import { qstashEnv, startWorkflowApp, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('bulk actions honour count', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let sink: Sink;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  before(async () => {
    q = await startQueue();
    sink = await startSink((r) => (r.url.startsWith('/dead') ? { status: 500, body: 'down' } : undefined));
    app = await startWorkflowApp(
      qstashEnv(q),
      {
        '/broken': [
          async (ctx) => {
            await ctx.run('boom', () => {
              throw new WorkflowNonRetryableError('broken');
            });
          },
          {},
        ],
        '/waits': [async (ctx) => (await ctx.waitForEvent('wait', `never-${ctx.workflowRunId}`, { timeout: '1h' })).timeout, {}],
      },
    );
    wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
  });
  after(async () => {
    await app.close();
    await sink.close();
    await q.close();
  });

  const dlqOf = async (label: string) => ((await q.client.dlq.listMessages({ filter: { label } })).messages as Json[]).length;

  test('DLQ delete and retry: at most `count` per call, a cursor while more match; the SDK default (100) when none is named', async () => {
    for (let i = 0; i < 3; i++) await q.client.publish({ url: `${sink.url}/dead-${i}`, body: 'x', retries: 0, label: 'count-dlq' });
    await waitFor('3 DLQ entries', async () => (await dlqOf('count-dlq')) === 3, 30_000);
    const first = await q.client.dlq.delete({ filter: { label: 'count-dlq' }, count: 1 });
    assert.equal(first.deleted, 1);
    assert.ok(first.cursor, 'a cursor: more entries match');
    assert.equal(await dlqOf('count-dlq'), 2);
    const retried = await q.client.dlq.retry({ filter: { label: 'count-dlq' }, count: 1 });
    assert.equal(retried.responses.length, 1);
    assert.ok(retried.cursor);
    await waitFor('the retried one failed again', async () => (await dlqOf('count-dlq')) === 2, 30_000);
    // the SDK's loop until the cursor is gone, one entry per call
    let cursor: string | undefined;
    let calls = 0;
    let deleted = 0;
    do {
      const r = await q.client.dlq.delete({ all: true, count: 1, cursor });
      deleted += r.deleted;
      cursor = r.cursor;
      calls++;
    } while (cursor && calls < 10);
    assert.equal(deleted, 2);
    assert.equal(await dlqOf('count-dlq'), 0);
  });

  test('message cancel ignores count: every matching message is cancelled (qstash-js 2.12)', async () => {
    const published = await q.client.batchJSON([0, 1, 2].map((i) => ({ url: `${sink.url}/later-${i}`, body: { i }, delay: 3600, label: 'count-cancel' })));
    assert.equal(published.length, 3);
    assert.deepEqual(await q.client.messages.cancel({ filter: { label: 'count-cancel' }, count: 1 } as never), { cancelled: 3 });
  });

  test('workflow DLQ restart, resume, delete and run cancel: at most `count` per call', async () => {
    const failed: string[] = [];
    for (let i = 0; i < 4; i++) failed.push((await wf.trigger({ url: `${app.url}/broken`, body: { i }, label: 'count-wf' })).workflowRunId);
    const entries = async () => ((await wf.dlq.list({ filter: { label: 'count-wf' } })) as unknown as { messages: Json[] }).messages;
    await waitFor('4 failed runs in the DLQ', async () => (await entries()).length === 4, 60_000);
    const restarted = await wf.dlq.restart({ filter: { label: 'count-wf' }, count: 1 });
    assert.equal(restarted.workflowRuns.length, 1);
    assert.ok(restarted.cursor, 'a cursor: more failed runs match');
    const resumed = await wf.dlq.resume({ filter: { label: 'count-wf' }, count: 1 });
    assert.equal(resumed.workflowRuns.length, 1);
    await waitFor('the restarted and resumed runs failed again', async () => (await entries()).length === 4, 60_000);
    const del = await wf.dlq.delete({ filter: { label: 'count-wf' }, count: 3 });
    assert.equal(del.deleted, 3);
    assert.ok(del.cursor);
    assert.equal((await entries()).length, 1);
    // default count (the SDK sends 100): every remaining one
    assert.equal((await wf.dlq.delete({ filter: { label: 'count-wf' } })).deleted, 1);

    const waiting: string[] = [];
    for (let i = 0; i < 3; i++) waiting.push((await wf.trigger({ url: `${app.url}/waits`, body: {}, label: 'count-cancel-wf' })).workflowRunId);
    await waitFor('3 waiters', async () => {
      for (const id of waiting) if (((await wf.getWaiters({ eventId: `never-${id}` })) as unknown[]).length !== 1) return false;
      return true;
    }, 60_000);
    assert.deepEqual(await wf.cancel({ filter: { label: 'count-cancel-wf' }, count: 2 } as never), { cancelled: 2 });
    assert.deepEqual(await wf.cancel({ filter: { label: 'count-cancel-wf' } } as never), { cancelled: 1 });
  });
});
